"""The library's layout: no import cycle between its modules, and a map that names every part.

A cycle (a imports b, b imports a) works only as long as the imports run in one order, and it
makes neither file readable on its own; `training/cli.py` and `training/export_cli.py` had one
(issue #36). `src/course_lib/README.md` is the one-page map of which file holds which idea; it
must name only files that exist, and every module of models/, modules/ and training/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
LIB = SRC / "course_lib"
MAP = LIB / "README.md"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of course_lib by dotted name, with its file and whether it is a package."""
    found = {}
    for path in sorted(LIB.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: at module level, in functions, in classes, in
    `if TYPE_CHECKING:` blocks (all of them, so no import hidden in a function escapes)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def import_graph() -> dict[str, set[str]]:
    """Which course_lib modules each course_lib module imports.

    `from course_lib.x import y` counts as importing `course_lib.x.y` when y is a submodule, else
    `course_lib.x`; relative imports are resolved against the importing module's package. The
    parent packages Python imports on the way (`course_lib`, `course_lib.x`) are not edges: they
    would make every package that imports its own submodules a cycle of its own.
    """
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    source = ".".join(package + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as the list of modules around it (first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle_between_course_lib_modules():
    """No course_lib module imports, directly or through others, one that imports it back,
    counting imports inside functions as well as at module level."""
    graph = import_graph()
    assert "course_lib.training.cli_common" in graph["course_lib.training.export_cli"]
    assert "course_lib.training.export_cli" in graph["course_lib.training.cli"]  # its subcommands
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle_made_by_an_import_inside_a_function():
    """The check above would have failed on cli <-> export_cli: one direction was an import
    inside a function, which the graph counts."""
    tree = ast.parse("def f():\n    from course_lib.training.cli import UsageError\n")
    assert [node.module for node in _imports(tree)] == ["course_lib.training.cli"]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_names_shared_by_the_command_modules_are_still_importable_from_cli():
    """UsageError and checkpoint_state moved to cli_common; cli re-exports the same objects, so
    `except UsageError` in cli.main still catches what export_cli raises."""
    from course_lib.training import cli, cli_common, export_cli

    assert cli.UsageError is cli_common.UsageError is export_cli.UsageError
    assert cli.checkpoint_state is cli_common.checkpoint_state


def _named_paths() -> set[str]:
    """The paths the map names: every backticked `something.py` or `folder/`."""
    text = MAP.read_text(encoding="utf-8")
    return {m for m in re.findall(r"`([\w/<>.]+)`", text) if m.endswith((".py", "/"))}


def test_every_path_the_library_map_names_exists():
    named = _named_paths()
    assert len(named) > 40
    templates = {p for p in named if "<" in p}  # config/<family>.py: one file per family
    assert templates == {"config/<family>.py", "interop/<family>.py"}
    for template in templates:
        for family in ("bert", "albert", "deberta", "electra", "modernbert", "roberta"):
            assert (LIB / template.replace("<family>", family)).is_file(), (template, family)
    # Relative to src/course_lib/ (the map says so), or to the repository for that folder itself.
    missing = [
        p for p in sorted(named - templates) if not ((LIB / p).exists() or (ROOT / p).exists())
    ]
    assert not missing, f"src/course_lib/README.md names files that do not exist: {missing}"


def test_the_library_map_names_every_module_of_models_modules_and_training():
    named = _named_paths()
    modules = [
        f"{folder}/{path.name}"
        for folder in ("models", "modules", "training")
        for path in sorted((LIB / folder).glob("*.py"))
        if path.name != "__init__.py"
    ]
    assert len(modules) > 25
    unnamed = [m for m in modules if m not in named]
    assert not unnamed, f"src/course_lib/README.md does not say what these hold: {unnamed}"
