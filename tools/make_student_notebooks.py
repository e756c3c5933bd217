"""Generate the student exercise notebooks and a solutions view from the instructor masters.

Masters live in `chapters/<chapter>/instructor/` (where only instructors look) and mark answers
nbgrader-style:

    ### BEGIN SOLUTION
    ...the answer...
    ### END SOLUTION

The student copy replaces each region with `raise NotImplementedError()` (indented like the
region), drops cells tagged `instructor`, clears every output, tags each `check_*(...)` cell
`raises-exception` (Jupyter's tag for a cell expected to fail: "Run All" goes on past it, nbval
accepts it) and goes into the lesson sequence as `chapters/<chapter>/<notebook>.ipynb`. The solutions view,
`chapters/<chapter>/solutions/<notebook>.md`, lists each answer (markers removed) under its
exercise heading.

    python tools/make_student_notebooks.py          # write everything
    python tools/make_student_notebooks.py --check  # exit 1 if a committed copy is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
REGION = re.compile(
    r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.S | re.M
)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
STUB = "{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()\n"
INSTRUCTOR_TAG = "instructor"
CHECK_CALL = re.compile(r"^check_\w+\(", re.M)


def master_notebooks() -> list[Path]:
    """Every instructor master: a notebook in chapters/*/instructor/ with solution regions."""
    return sorted(
        p
        for p in ROOT.glob("chapters/*/instructor/*.ipynb")
        if "### BEGIN SOLUTION" in p.read_text(encoding="utf-8")
    )


def student_path(master: Path) -> Path:
    """Where the student copy of `master` goes: the chapter folder, in the lesson sequence."""
    return master.parent.parent / master.name


def solutions_path(master: Path) -> Path:
    return master.parent.parent / "solutions" / f"{master.stem}.md"


def stub_source(source: str) -> str:
    """Replace each solution region with a stub that raises NotImplementedError."""
    return REGION.sub(lambda m: STUB.format(indent=m.group(1)), source)


def strip_markers(source: str) -> str:
    """The answer without its ### BEGIN/END SOLUTION lines (for the solutions view)."""
    return MARKER.sub("", source)


def student_version(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A deep copy with stubs for answers, no instructor cells and no outputs."""
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if INSTRUCTOR_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source)
            cell.outputs = []
            cell.execution_count = None
            cell.pop("attachments", None)
            if CHECK_CALL.search(cell.source) and "import" not in cell.source:
                tags = cell.metadata.setdefault("tags", [])
                if "raises-exception" not in tags:
                    tags.append("raises-exception")
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def solutions_markdown(path: Path, nb: nbformat.NotebookNode) -> str:
    lines = [
        f"# Solutions: {path.stem}",
        "",
        f"Generated from `instructor/{path.name}`; do not edit by hand.",
        "",
    ]
    heading = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
        elif "### BEGIN SOLUTION" in cell.source:
            code = strip_markers(cell.source).strip()
            lines += [f"## {heading or 'Exercise'}", "", "```python", code, "```", ""]
    return "\n".join(lines)


def outputs_for(path: Path) -> dict[Path, str]:
    nb = nbformat.read(path, as_version=4)
    return {
        student_path(path): nbformat.writes(student_version(nb)) + "\n",
        solutions_path(path): solutions_markdown(path, nb),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="only check that committed copies are current"
    )
    args = parser.parse_args(argv)
    stale = []
    for master in master_notebooks():
        for target, text in outputs_for(master).items():
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
