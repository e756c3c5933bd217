"""Notebook tooling for authors: percent-script <-> ipynb, and execution in full mode.

    python tools/notebooks.py from-py chapters/01_bert/02_attention.py      # writes .ipynb beside it, deletes nothing
    python tools/notebooks.py execute chapters/01_bert/02_attention.ipynb   # runs it (full mode), stores outputs
    python tools/notebooks.py to-py chapters/01_bert/02_attention.ipynb     # percent script to edit, then from-py
    python tools/notebooks.py execute NB --only 'load_result'  # the setup cells + matching cells only

The committed .ipynb is the source of truth; percent scripts are a convenience for editing
(cells start with `# %%`, markdown cells with `# %% [markdown]` and lines prefixed by `# `).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat


def py_to_notebook(text: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    chunks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            chunks.append((kind, []))
        elif chunks:
            chunks[-1][1].append(line)
    for kind, lines in chunks:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind == "markdown":
            body = "\n".join(ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines)
            nb.cells.append(nbformat.v4.new_markdown_cell(body))
        else:
            nb.cells.append(nbformat.v4.new_code_cell("\n".join(lines)))
    return nb


def notebook_to_py(nb: nbformat.NotebookNode) -> str:
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out.append("# %% [markdown]")
            out.extend(("# " + ln).rstrip() for ln in cell.source.splitlines())
        elif cell.cell_type == "code":
            out.append("# %%")
            out.append(cell.source)
        out.append("")
    return "\n".join(out)


def execute(path: Path, fast: bool = False, timeout: int = 1800) -> float:
    """Run a notebook top to bottom in its own folder and store the outputs; returns seconds."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ["COURSE_FAST"] = "1" if fast else "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    start = time.perf_counter()
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    seconds = time.perf_counter() - start
    # execution metadata carries timestamps that change every run: drop it for clean diffs
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return seconds


def setup_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells before the notebook's first `## ` section: its imports and
    helpers, which every later cell may need."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## "):
            break
        if cell.cell_type == "code":
            out.append(i)
    return out


def execute_only(path: Path, pattern: str, fast: bool = False, timeout: int = 1800) -> list[int]:
    """Run the setup cells and the code cells whose source matches `pattern` (a regex), in order,
    in one kernel, and store their outputs; every other cell keeps its committed output. For a
    change that touches a few cells of a notebook whose full run takes minutes (e.g. the labs'
    committed-result cells after a rerun). Returns the indices of the matching cells."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    regex = re.compile(pattern)
    chosen = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and regex.search(c.source)]
    if not chosen:
        raise SystemExit(f"error: no code cell of {path} matches {pattern!r}")
    order = sorted(set(setup_cells(nb)) | set(chosen))
    sub = nbformat.v4.new_notebook(metadata=nb.metadata)
    sub.cells = [nbformat.from_dict(nb.cells[i]) for i in order]
    os.environ["COURSE_FAST"] = "1" if fast else "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    client = NotebookClient(
        sub,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    for i, cell in zip(order, sub.cells, strict=True):
        nb.cells[i].outputs = cell.outputs
        nb.cells[i].execution_count = cell.execution_count  # nbval: a cell with outputs was run
        nb.cells[i].metadata.pop("execution", None)
    nbformat.write(nb, path)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("from-py")
    a.add_argument("script", type=Path)
    a.add_argument("--out", type=Path)
    b = sub.add_parser("to-py")
    b.add_argument("notebook", type=Path)
    c = sub.add_parser("execute")
    c.add_argument("notebooks", type=Path, nargs="+")
    c.add_argument("--fast", action="store_true", help="run in fast mode (COURSE_FAST=1)")
    c.add_argument(
        "--only",
        metavar="REGEX",
        help="run only the setup cells and the code cells matching REGEX; keep the other outputs",
    )
    args = parser.parse_args(argv)
    if args.cmd == "from-py":
        nb = py_to_notebook(args.script.read_text())
        out = args.out or args.script.with_suffix(".ipynb")
        nbformat.write(nb, out)
        print(f"wrote {out} ({len(nb.cells)} cells)")
    elif args.cmd == "to-py":
        nb = nbformat.read(args.notebook, as_version=4)
        out = args.notebook.with_suffix(".py")
        out.write_text(notebook_to_py(nb))
        print(f"wrote {out}")
    else:
        for path in args.notebooks:
            if args.only:
                chosen = execute_only(path, args.only, fast=args.fast)
                print(f"{path}: cells {chosen} (and the setup cells) re-executed")
                continue
            seconds = execute(path, fast=args.fast)
            print(f"{path}: {seconds:.1f} s ({'fast' if args.fast else 'full'} mode)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
