"""One row per student, one column per exercise: the grades `nbgrader export` does not give.

`nbgrader export` writes one total per student and assignment. To see which exercises a class
got wrong, this reads nbgrader's gradebook (through nbgrader's own `Gradebook` API, read only)
and writes a CSV with a column per autograded test cell, named `<assignment>/<notebook>/<cell>`
(the cells of each chapter's instructor page), then `total` and `max_score`. The first data row,
`(max)`, holds each cell's points. A cell with no grade (no submission) is left empty and counts
0 in the total; a manual grade overrides the automatic one, as in nbgrader.

    python tools/gradebook_table.py ~/encoders/gradebook.db                      # to stdout
    python tools/gradebook_table.py ~/encoders/gradebook.db --assignment 01_bert -o 01_bert.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys
from pathlib import Path


def _natural(name: str) -> list:
    """ex2_check before ex10_check."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def grade_table(database: Path, assignments: list[str] | None = None) -> list[list[str]]:
    """The table as rows of strings: header, `(max)`, then one row per student (sorted by id).
    FileNotFoundError when `database` does not exist (nbgrader would create an empty one)."""
    if not Path(database).is_file():
        raise FileNotFoundError(database)
    from nbgrader.api import Gradebook, MissingEntry

    # nbgrader runs the `alembic` script of its own environment: find it even when that
    # environment was not activated (`python tools/gradebook_table.py` with the venv's python).
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])
    rows: list[list[str]] = []
    # course_id="" reads whatever course the database holds and adds no course row to it
    with Gradebook(f"sqlite:///{Path(database).resolve()}", course_id="") as gradebook:
        columns = []  # (assignment, notebook, grade cell, points)
        for assignment in sorted(gradebook.assignments, key=lambda a: _natural(a.name)):
            if assignments and assignment.name not in assignments:
                continue
            for notebook in sorted(assignment.notebooks, key=lambda n: _natural(n.name)):
                for cell in sorted(notebook.grade_cells, key=lambda c: _natural(c.name)):
                    columns.append((assignment.name, notebook.name, cell.name, cell.max_score))
        missing = sorted(set(assignments or []) - {a for a, *_ in columns})
        if missing:
            raise KeyError(f"no assignment {', '.join(missing)} in the gradebook")
        rows.append(
            ["student_id", *(f"{a}/{n}/{c}" for a, n, c, _ in columns), "total", "max_score"]
        )
        max_total = sum(points for *_, points in columns)
        rows.append(["(max)", *(f"{p:g}" for *_, p in columns), f"{max_total:g}", f"{max_total:g}"])
        for student in sorted(gradebook.students, key=lambda s: s.id):
            row, total = [student.id], 0.0
            for assignment, notebook, cell, _ in columns:
                try:
                    score = gradebook.find_grade(cell, notebook, assignment, student.id).score
                except MissingEntry:
                    row.append("")
                    continue
                total += score
                row.append(f"{score:g}")
            rows.append([*row, f"{total:g}", f"{max_total:g}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("database", type=Path, help="nbgrader's gradebook.db")
    parser.add_argument(
        "--assignment", action="append", help="only this assignment (repeat for several)"
    )
    parser.add_argument("-o", "--output", type=Path, help="write the CSV here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        rows = grade_table(args.database, args.assignment)
    except FileNotFoundError:
        print(
            f"gradebook_table: error: no gradebook at {args.database} "
            "(run `nbgrader autograde <assignment> --create` in the course directory first)",
            file=sys.stderr,
        )
        return 2
    except KeyError as err:
        print(f"gradebook_table: error: {err.args[0]}", file=sys.stderr)
        return 2
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    if args.output is None:
        sys.stdout.write(buffer.getvalue())
    else:
        args.output.write_text(buffer.getvalue(), encoding="utf-8")
        print(f"wrote {args.output}: {len(rows) - 2} students, {len(rows[0]) - 3} graded cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
