"""Generate the student exercise notebooks, the lesson copies and a solutions view from the
instructor masters.

Exercise masters live in `chapters/<chapter>/instructor/` (where only instructors look). They
are nbgrader source notebooks: answers sit nbgrader-style between

    ### BEGIN SOLUTION
    ...the answer...
    ### END SOLUTION

in cells whose metadata says `nbgrader.solution`; each `check_*(...)` cell is an autograded test
cell (`grade`, `points`, `locked`) and every other cell is read-only (`locked`). The student copy
is what `nbgrader generate_assignment` releases (tests/test_nbgrader.py compares the two): each
region becomes `raise NotImplementedError()` (indented like the region), cells tagged `instructor`
are dropped, outputs are cleared and locked cells are made non-editable and non-deletable. On top of
that, each `check_*(...)` cell is tagged `raises-exception` (Jupyter's tag for a cell expected to
fail: "Run All" goes on past it, nbval accepts it). The copy goes into the lesson sequence as
`chapters/<chapter>/<notebook>.ipynb`. The solutions view, `chapters/<chapter>/solutions/<notebook>.md`,
lists each answer (markers removed) under its exercise heading.

    python tools/make_student_notebooks.py          # write everything
    python tools/make_student_notebooks.py --check  # exit 1 if a committed copy is out of date
    python tools/make_student_notebooks.py --nbgrader-course DIR
        # an nbgrader course directory: DIR/source/<chapter>/<notebook>.ipynb and DIR/nbgrader_config.py

Hidden tests. A check cell may end with nbgrader's hidden tests (between `### BEGIN HIDDEN TESTS`
and `### END HIDDEN TESTS`): the same checker on other inputs and edge cases, and
`check_own_work`, which fails an answer that calls the library's own implementation. nbval runs
them in the masters; nbgrader strips them from the release and puts them back when it grades;
the lesson-path copy drops them as nbgrader does (self-learners have the visible checks).

Lesson masters (issue 38). A lesson whose "Build it yourself" cells are the learner's to write
has its master in `chapters/<chapter>/instructor/` too, recognised by its content: cells tagged
`build`, no nbgrader metadata (lessons are not graded and never enter the nbgrader course, the
instructor pages or the hidden-test checks). Each `build` cell holds a signature, a docstring and
the answer between the same markers, inside a function or method body; the next code cell is
tagged `build-check` and calls a `BuildCheck` (course_lib.exercises.build) it imports:

    from course_lib.exercises.lessons_bert import check_position_ids
    my_position_ids = check_position_ids(my_position_ids)

The lesson copy, `chapters/<chapter>/<notebook>.ipynb`, is the master with each region a stub
(the build cell's outputs cleared), the check cell's output the exact verdict the check prints on
that stub (`stub_output`: "Not written yet", and that the library's version stands in), and right
after it a closed `<details><summary>Show a solution</summary>` markdown cell with the answer
(shown, never executed). Every other cell keeps the master's outputs, so the copy reads well
on GitHub, and Run All on it completes. `build_answers(master)` gives the tests each answer. A
build cell without a region or without its check cell stops the tool with the cell named. nbval
runs the lesson copies in the README's test command and the masters in `.ci/lesson-masters`
(`--lesson-masters` lists them). After changing a master: re-execute it
(`python tools/notebooks.py execute chapters/<chapter>/instructor/<notebook>.ipynb`), then run
this tool.

The course directory is the graded version: an nbgrader course exists to grade, so its source
notebooks are the masters made classroom-ready (`graded_master`): a first cell saying how to
install the course, no pointer to the solutions view, references to lesson notebooks and
repository folders that are not in the release named as parts of the public course, and the
`raises-exception` tag on check cells so "Run All" on the release goes on past an unsolved
check. The lesson-path copy keeps its self-study pointers.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB_LINES = ["# YOUR CODE HERE", "raise NotImplementedError()"]  # nbgrader's code_stub["python"]
REGION = re.compile(
    r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.S | re.M
)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
COURSE = "*Encoders from Scratch*"
INSTALL_ID = "install_course"
INSTALL_TEXT = f"""## How to install the course

These exercises import `course_lib`, the library of the {COURSE} course. Install it once,
into the Python this notebook runs with, from a copy of the course (the folder holding its
`pyproject.toml`):

```bash
python -m pip install "torch==2.13.0" -e .
```

Then restart the kernel. Each `check_*` cell tells you what is wrong with your answer; a failing
check does not stop "Run All". Your work is graded with more tests than the ones you see."""
# sentences of the lesson-path copy that point to what a graded release does not contain
SOLUTIONS_POINTER = re.compile(r" *Stuck after a real try\?[^\n]*?solutions/[^\n]*?exercise\.")
LESSON_NOTEBOOKS = re.compile(r"\b(notebooks? \d\d(?:[–-]\d\d)?)('s)?")
REPO_PATH = re.compile(r"`(?:experiments|tests|benchmarks|tools)/[^`]*`")
INSTRUCTOR_TAG = "instructor"
NBGRADER_CONFIG = ROOT / "tools" / "nbgrader_config.py"
CHECK_CALL = re.compile(r"^check_\w+\(", re.M)
BUILD_TAG, CHECK_TAG = "build", "build-check"  # a lesson master's build cell and the check after it
SOLUTION_SUMMARY = "<details><summary>Show a solution</summary>"
SOLUTION_DETAILS = SOLUTION_SUMMARY + "\n\n```python\n{code}\n```\n\n</details>"


def master_kind(path: Path) -> str | None:
    """What the notebook at `path` is: "lesson" (a lesson master: a cell tagged `build`, no
    nbgrader metadata), "exercise" (any other notebook with solution regions: an nbgrader master,
    whose metadata the tool checks) or None; read from its content, so moving a notebook into
    instructor/ is all it takes."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text and BUILD_TAG not in text:
        return None
    metadata = [cell.get("metadata", {}) for cell in json.loads(text).get("cells", [])]
    graded = any("nbgrader" in m for m in metadata)
    if not graded and any(BUILD_TAG in m.get("tags", []) for m in metadata):
        return "lesson"
    return "exercise" if BEGIN in text else None


def master_notebooks() -> list[Path]:
    """Every exercise master: an nbgrader notebook in chapters/*/instructor/ with solution
    regions (the graded course, the hidden tests and the instructor pages are made of these)."""
    return [
        p
        for p in sorted(ROOT.glob("chapters/*/instructor/*.ipynb"))
        if master_kind(p) == "exercise"
    ]


def lesson_masters() -> list[Path]:
    """Every lesson master: a notebook in chapters/*/instructor/ with cells tagged `build`."""
    return [
        p for p in sorted(ROOT.glob("chapters/*/instructor/*.ipynb")) if master_kind(p) == "lesson"
    ]


def student_path(master: Path) -> Path:
    """Where the copy of `master` (exercise or lesson) goes: the chapter folder, in the lesson
    sequence."""
    return master.parent.parent / master.name


def solutions_path(master: Path) -> Path:
    return master.parent.parent / "solutions" / f"{master.stem}.md"


class MasterError(ValueError):
    """A master whose solution regions or nbgrader metadata nbgrader itself would reject, or a
    lesson master whose build cells the lesson copy cannot be made from (the cell is named)."""


def stub_source(source: str) -> str:
    """Replace each solution region with a stub that raises NotImplementedError, line for line as
    nbgrader's ClearSolutions does (a marker anywhere in a line counts; the stub takes its indent)."""
    lines, inside = [], False
    for line in source.split("\n"):
        if BEGIN in line:
            if inside:
                raise MasterError(f"a {BEGIN} inside another solution region")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            lines += [indent + stub for stub in STUB_LINES]
        elif END in line:
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise MasterError(f"a {BEGIN} without its {END}")
    return "\n".join(lines)


def nbgrader_meta(cell: nbformat.NotebookNode) -> dict:
    return cell.metadata.get("nbgrader", {})


def is_check_cell(cell: nbformat.NotebookNode) -> bool:
    """A cell that calls a checker (the import cell names them too, without calling); its hidden
    tests, which may import what they compare with, do not count."""
    visible = cell.source.split(BEGIN_HIDDEN)[0]
    return cell.cell_type == "code" and bool(CHECK_CALL.search(visible)) and "import" not in visible


def strip_hidden_tests(source: str) -> str:
    """`source` without its hidden-test regions, markers included, line for line as nbgrader's
    ClearHiddenTests removes them from the release."""
    lines, inside = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            if inside:
                raise MasterError(f"a {BEGIN_HIDDEN} inside another hidden-test region")
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise MasterError(f"a {BEGIN_HIDDEN} without its {END_HIDDEN}")
    return "\n".join(lines)


def strip_markers(source: str) -> str:
    """The answer without its ### BEGIN/END SOLUTION lines (for the solutions view)."""
    return MARKER.sub("", source)


def student_version(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A deep copy as nbgrader generate_assignment releases it: stubs for answers, no instructor
    cells, no outputs, locked cells read-only; check cells also tagged `raises-exception`."""
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if INSTRUCTOR_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code":
            try:
                stubbed = stub_source(cell.source)
            except MasterError as err:
                raise MasterError(f"cell {cell.get('id', '?')}: {err}") from None
            if meta.get("solution") and stubbed == cell.source:
                stubbed = "\n".join(STUB_LINES)  # nbgrader replaces a whole unmarked solution cell
            elif stubbed != cell.source and not meta.get("solution"):
                raise MasterError(
                    f"cell {cell.get('id', '?')}: a solution region in a cell not marked as a "
                    "solution; set its metadata nbgrader.solution to true (nbgrader requires it)"
                )
            if BEGIN_HIDDEN in stubbed and not meta.get("grade"):
                raise MasterError(
                    f"cell {cell.get('id', '?')}: hidden tests in a cell that is not graded; "
                    "put them in the exercise's check cell (nbgrader restores them only there)"
                )
            cell.source = strip_hidden_tests(stubbed)
            cell.outputs = []
            cell.execution_count = None
            cell.pop("attachments", None)
            for field in ("collapsed", "scrolled"):
                cell.metadata.pop(field, None)
            if is_check_cell(cell):
                tags = cell.metadata.setdefault("tags", [])
                if "raises-exception" not in tags:
                    tags.append("raises-exception")
        # nbgrader's LockCells: answers may not be deleted, tests and instructions not edited either
        if meta.get("solution"):
            cell.metadata["deletable"] = False
        elif meta.get("grade") or meta.get("locked"):
            cell.metadata["deletable"] = False
            cell.metadata["editable"] = False
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def graded_master(master: Path, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The master as a graded course's source notebook: an install cell first, no pointer to the
    solutions view, lesson notebooks and repository folders named as parts of the public course
    (the release holds neither), and `raises-exception` on every check cell."""
    nb = nbformat.from_dict(nb)
    chapter = master.parent.parent.name
    where = f"of the course's chapter {chapter[:2]}"
    for cell in nb.cells:
        if cell.cell_type == "markdown" and INSTRUCTOR_TAG not in cell.metadata.get("tags", []):
            text = SOLUTIONS_POINTER.sub("", cell.source)
            text = LESSON_NOTEBOOKS.sub(lambda m: f"{m.group(1)} {where}{m.group(2) or ''}", text)
            text = REPO_PATH.sub(lambda m: f"{m.group(0)} (in the {COURSE} course)", text)
            cell.source = text.rstrip() if text != cell.source else text
        elif is_check_cell(cell):
            tags = cell.metadata.setdefault("tags", [])
            if "raises-exception" not in tags:
                tags.append("raises-exception")
    install = nbformat.v4.new_markdown_cell(INSTALL_TEXT, id=INSTALL_ID)  # same id every run
    install.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": INSTALL_ID,
        "locked": True,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    nb.cells.insert(0, install)
    return nb


def solutions_markdown(
    path: Path, nb: nbformat.NotebookNode, names: dict[int, str] | None = None
) -> str:
    """Each answer, markers removed, under the heading it belongs to (and, for a lesson's build
    cells, `names`: cell index -> what the cell defines, the name it builds)."""
    lines = [
        f"# Solutions: {path.stem}",
        "",
        f"Generated from `instructor/{path.name}`; do not edit by hand.",
        "",
    ]
    heading = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
        elif BEGIN in cell.source:
            code = strip_markers(cell.source).strip()
            title = heading or "Exercise"
            if names and index in names:
                title += f" (`{names[index]}`)"
            lines += [f"## {title}", "", "```python", code, "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- lesson masters


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.metadata.get("tags", [])


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as err:
        raise MasterError(f"{where}: not valid Python ({err.msg}, line {err.lineno})") from None


def _built_name(build: str, check: str, where: str) -> str:
    """The function or class the build cell defines (the one its check cell passes on, if it
    defines several): the name the learner's stub has, and the check's verdict names."""
    defined = [
        node.name
        for node in _parse(build, where).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    passed = {
        arg.id
        for node in ast.walk(_parse(check, where))
        if isinstance(node, ast.Call)
        for arg in node.args
        if isinstance(arg, ast.Name)
    }
    chosen = [name for name in defined if name in passed] or defined
    if len(chosen) != 1:
        raise MasterError(
            f"{where}: a `{BUILD_TAG}` cell must define the function or class its check is given "
            f"(found {', '.join(defined) or 'none'}; the check passes {', '.join(sorted(passed)) or 'none'})"
        )
    return chosen[0]


def _stubs_inside_functions(stub: str, where: str) -> None:
    """A stub must raise when the learner's function is called, not when the cell runs: a region
    at the top of the cell or in a class body would stop Run All there."""
    tree = _parse(stub, where)
    bodies = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for node in ast.walk(tree):
        unwritten = isinstance(node, ast.Raise) and "NotImplementedError" in ast.unparse(node)
        if unwritten and not any(a < node.lineno <= b for a, b in bodies):
            raise MasterError(
                f"{where}: the solution region of a `{BUILD_TAG}` cell must sit inside a function "
                "or method body (its stub would raise as the cell runs and stop Run All)"
            )


def build_check_of(check: str, where: str) -> Any:
    """The BuildCheck object the check cell calls (`from module import check_x` in the cell)."""
    tree = _parse(check, where)
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    called = [
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in imported
    ]
    if not called:
        raise MasterError(
            f"{where}: a `{CHECK_TAG}` cell must import its check and call it, e.g. "
            "`from course_lib.exercises.lessons_bert import check_x` then `my_x = check_x(my_x)`"
        )
    module, attribute = imported[called[0]]
    try:
        check_object = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise MasterError(f"{where}: cannot import {attribute} from {module} ({err})") from None
    if not callable(getattr(check_object, "stub_output", None)):
        raise MasterError(f"{where}: {module}.{attribute} is not a BuildCheck (no stub_output)")
    return check_object


class Build(NamedTuple):
    """One build cell of a lesson master and the check cell right after it."""

    build: int  # index of the build cell in the notebook
    check: int  # index of its check cell
    name: str  # the function or class the cell defines
    where: str  # "cell N (id)", for messages

    def answer(self, nb: nbformat.NotebookNode) -> str:
        """The whole build cell, solution included, markers removed."""
        return strip_markers(nb.cells[self.build].source).strip("\n")


def lesson_builds(nb: nbformat.NotebookNode) -> list[Build]:
    """Every build cell of a lesson master with its check; MasterError names the first cell that
    is not as the lesson copy needs it (no solution region, no check cell after it, ...)."""
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    builds = []
    for position, index in enumerate(code):
        cell = nb.cells[index]
        where = f"cell {index + 1} ({cell.get('id', 'no id')})"
        tags = _tags(cell)
        if "nbgrader" in cell.metadata:
            raise MasterError(
                f"{where}: nbgrader metadata in a lesson master (cells tagged `{BUILD_TAG}`); "
                "lessons are not graded: remove it"
            )
        previous = nb.cells[code[position - 1]] if position else None
        if CHECK_TAG in tags and (previous is None or BUILD_TAG not in _tags(previous)):
            raise MasterError(
                f"{where}: a `{CHECK_TAG}` cell must come right after a `{BUILD_TAG}` cell"
            )
        if BUILD_TAG not in tags:
            if BEGIN in cell.source:
                raise MasterError(
                    f"{where}: a solution region in a cell not tagged `{BUILD_TAG}`; tag it, "
                    "or take the markers out"
                )
            continue
        if BEGIN not in cell.source:
            raise MasterError(
                f"{where}: a `{BUILD_TAG}` cell without a solution region; put the answer "
                f"between `{BEGIN}` and `{END}` lines"
            )
        following = code[position + 1] if position + 1 < len(code) else None
        if following is None or CHECK_TAG not in _tags(nb.cells[following]):
            raise MasterError(
                f"{where}: a `{BUILD_TAG}` cell must be followed by its check: the next code "
                f"cell tagged `{CHECK_TAG}`, calling the check on what this cell defines"
            )
        try:
            stub = stub_source(cell.source)
        except MasterError as err:
            raise MasterError(f"{where}: {err}") from None
        _stubs_inside_functions(stub, where)
        name = _built_name(cell.source, nb.cells[following].source, where)
        builds.append(Build(index, following, name, where))
    return builds


def build_answers(master_path: Path) -> dict[str, str]:
    """name -> the build cell's source with the answer in and the markers out, for each build
    cell of a lesson master (the tests run the master's answer through its check)."""
    nb = nbformat.read(master_path, as_version=4)
    return {b.name: b.answer(nb) for b in lesson_builds(nb)}


def lesson_version(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The lesson copy of a lesson master: each build cell's region a stub (outputs cleared),
    its check cell's output the check's verdict on that stub, then a closed "Show a solution"
    markdown cell with the answer (shown, never executed). Cells tagged `instructor` are
    dropped; every other cell keeps its outputs."""
    nb = nbformat.from_dict(nb)
    for b in reversed(lesson_builds(nb)):
        build, check = nb.cells[b.build], nb.cells[b.check]
        answer = b.answer(nb)
        build.source = stub_source(build.source)
        build.outputs = []
        build.execution_count = None
        verdict = build_check_of(check.source, b.where).stub_output(b.name)
        check.outputs = [nbformat.v4.new_output("stream", name="stdout", text=verdict)]
        details = nbformat.v4.new_markdown_cell(SOLUTION_DETAILS.format(code=answer))
        if nb.nbformat_minor >= 5:
            details.id = f"{check.get('id') or b.name}-solution"[:64]
        else:
            details.pop("id", None)
        nb.cells.insert(b.check + 1, details)
    nb.cells = [c for c in nb.cells if INSTRUCTOR_TAG not in _tags(c)]
    return nb


def outputs_for(path: Path) -> dict[Path, str]:
    """The files generated from one master: its copy in the lesson sequence and its solutions."""
    nb = nbformat.read(path, as_version=4)
    if master_kind(path) == "lesson":
        copy = lesson_version(nb)
        names = {b.build: b.name for b in lesson_builds(nb)}
    else:
        copy, names = student_version(nb), None
    return {
        student_path(path): nbformat.writes(copy) + "\n",
        solutions_path(path): solutions_markdown(path, nb, names),
    }


def nbgrader_course(directory: Path) -> int:
    """Lay out a graded nbgrader course directory: one assignment per chapter (source/<chapter>/
    holds its masters, made classroom-ready by `graded_master`) and the course's
    nbgrader_config.py. Never overwrites: a differing file stops it."""
    plan: dict[Path, tuple[Path, bytes]] = {
        directory / "nbgrader_config.py": (NBGRADER_CONFIG, NBGRADER_CONFIG.read_bytes())
    }
    for master in master_notebooks():
        graded = graded_master(master, nbformat.read(master, as_version=4))
        text = (nbformat.writes(graded) + "\n").encode("utf-8")
        plan[directory / "source" / master.parent.parent.name / master.name] = (master, text)
    for target, (origin, data) in plan.items():
        if target.exists() and target.read_bytes() != data:
            print(
                f"{target} exists and differs from {origin.relative_to(ROOT)}; "
                "move it away or choose another directory (nothing was written)"
            )
            return 1
    for target, (_, data) in plan.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    chapters = sorted({m.parent.parent.name for m in master_notebooks()})
    print(f"nbgrader course in {directory}: assignments {', '.join(chapters)}")
    print(f"next: cd {directory} && nbgrader generate_assignment {chapters[0]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="only check that committed copies are current"
    )
    parser.add_argument(
        "--nbgrader-course",
        type=Path,
        metavar="DIR",
        help="lay out a graded nbgrader course directory in DIR (one assignment per chapter; "
        "hidden tests, no pointer to the solutions, an install cell first)",
    )
    parser.add_argument(
        "--lesson-masters",
        action="store_true",
        help="list the lesson masters, one path a line (CI's .ci/lesson-masters runs them)",
    )
    args = parser.parse_args(argv)
    if args.nbgrader_course is not None:
        return nbgrader_course(args.nbgrader_course)
    if args.lesson_masters:
        for master in lesson_masters():
            print(master.relative_to(ROOT).as_posix())
        return 0
    outputs = {}
    for master in master_notebooks() + lesson_masters():
        try:
            outputs.update(outputs_for(master))
        except MasterError as err:
            print(f"{master.relative_to(ROOT)}: {err} (nothing was written)")
            return 1
    stale = []
    for target, text in outputs.items():
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(target.relative_to(ROOT))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print("out of date (run python tools/make_student_notebooks.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
