"""Generate student notebooks and a solutions view from the instructor (master) notebooks.

Masters mark answers nbgrader-style:

    ### BEGIN SOLUTION
    ...the answer...
    ### END SOLUTION

The student copy replaces each region with `raise NotImplementedError()` (indented like the
region), clears every output, and goes to `chapters/<chapter>/student/`. The solutions view,
`chapters/<chapter>/solutions/<notebook>.md`, lists each answer under its exercise heading.

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
REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.S | re.M)
STUB = "{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()\n"


def master_notebooks() -> list[Path]:
    return sorted(
        p
        for p in ROOT.glob("chapters/*/*.ipynb")
        if "### BEGIN SOLUTION" in p.read_text(encoding="utf-8")
    )


def stub_source(source: str) -> str:
    return REGION.sub(lambda m: STUB.format(indent=m.group(1)), source)


def student_version(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(nb)  # deep copy
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source)
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
        cell.pop("attachments", None) if cell.cell_type == "code" else None
    nb.metadata.pop("widgets", None)
    return nb


def solutions_markdown(path: Path, nb: nbformat.NotebookNode) -> str:
    lines = [f"# Solutions: {path.stem}", "", f"Generated from `{path.name}`; do not edit by hand.", ""]
    heading = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
        elif "### BEGIN SOLUTION" in cell.source:
            lines += [f"## {heading or 'Exercise'}", "", "```python", cell.source.strip(), "```", ""]
    return "\n".join(lines)


def outputs_for(path: Path) -> dict[Path, str]:
    nb = nbformat.read(path, as_version=4)
    chapter = path.parent
    return {
        chapter / "student" / path.name: nbformat.writes(student_version(nb)) + "\n",
        chapter / "solutions" / f"{path.stem}.md": solutions_markdown(path, nb),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that committed copies are current")
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
