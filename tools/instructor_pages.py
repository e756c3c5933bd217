"""Write the generated part of each chapter's instructor page from the exercise masters.

Every chapter has `chapters/<chapter>/instructor/README.md`: learning goals written by hand, then
a part between two marker comments that this tool writes from the nbgrader masters, so that it
cannot drift from what nbgrader grades:

* the exercises (the masters' `## Exercise ...` headings), their autograded test cells and points
  (nbgrader metadata: `grade`, `grade_id`, `points`), the exercises each one reuses ("exercise 1"
  in its text) and the lessons it assumes: those its text names ("notebook 04", "notebooks
  01-03"), or, where it names none, the chapter lesson whose text shares the most distinctive
  words with it (tf-idf overlap, the shared words printed as the evidence);
* an estimated student time, from counts (words to read, answer lines to write, design tasks)
  and the machine time of the solved master measured by `--time`, with the method on the page;
* the grading commands, end to end (the same lines as README.md's "For instructors" section,
  with the chapter's assignment name).

    python tools/instructor_pages.py           # rewrite the generated part of every page
    python tools/instructor_pages.py --check   # exit 1 if a page is out of date
    python tools/instructor_pages.py --time    # run every solved master (full mode), record the
                                               # seconds per cell in tools/exercise_timings.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ROOT / "tools" / "exercise_timings.json"
BEGIN_MARK = "<!-- instructor-pages:begin (python tools/instructor_pages.py writes this part) -->"
END_MARK = "<!-- instructor-pages:end -->"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
INSTRUCTOR_TAG = "instructor"

# The grading commands, end to end, for one assignment. README.md's "For instructors" section
# shows exactly these lines for 01_bert (tests/test_instructor_pages.py compares them).
GRADING_COMMANDS = """\
. .venv/bin/activate   # or: conda activate encoders-from-scratch (nbgrader needs its `alembic` on PATH)
python -m pip install -e ".[classroom]"                               # nbgrader 0.9
python tools/make_student_notebooks.py --nbgrader-course ~/encoders  # source/<chapter>/, nbgrader_config.py
cd ~/encoders
nbgrader generate_assignment {assignment}     # release/{assignment}/: the student version
# collect submissions into submitted/<student>/{assignment}/ (or with nbgrader's exchange), then
nbgrader autograde {assignment} --create      # runs every submission; scores in gradebook.db
nbgrader generate_feedback {assignment}       # feedback/<student>/{assignment}/*.html, one line per failed check
nbgrader export --assignment {assignment}     # grades.csv: one total per student
cd -
python tools/gradebook_table.py ~/encoders/gradebook.db --assignment {assignment} -o ~/encoders/{assignment}_by_exercise.csv
"""

# The time model (stated on every page; see estimate()).
READ_WPM = (200, 100)  # words per minute: a quick read, a careful one of technical text
MINUTES_PER_ANSWER_LINE = (1, 3)  # writing and debugging one line of the reference answer
DESIGN_MINUTES = (5, 20)  # deciding what to build first, where the heading says "(design)"
RUNS = (1, 3)  # how many times the cells of an exercise are run before its check passes

NOTEBOOK_REF = re.compile(r"\b[Nn]otebooks?\s+(\d{2})(?:\s*(?:–|-|to|and)\s*(\d{2}))?")
EXERCISE_REF = re.compile(r"\b[Ee]xercises?\s+(\d+)(?:\s*(?:–|-|and)\s*(\d+))?")
EXERCISE_HEADING = re.compile(r"^##\s+(Exercises?\s+(\d+)\b.*)$", re.M)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
STOP_WORDS = frozenset(
    "the and for with that this are from not its but you your each one two all what which when "
    "where into their has have was were how than then them they there these those does only more "
    "most can will would should must use uses used also any same other every own out about over "
    "under here like just very been being our".split()
)
TIE = 0.9  # lessons within 90% of the best overlap are listed with it


@dataclass
class Exercise:
    """One `## Exercise N ...` section of a master: its graded cells and what it asks."""

    title: str
    number: int
    grade_cells: list[tuple[str, float]] = field(default_factory=list)  # (grade_id, points)
    code_cells: list[str] = field(default_factory=list)  # grade_ids of all its code cells
    markdown: list[str] = field(default_factory=list)
    answer_lines: int = 0
    all_design: bool = False  # the introduction calls every exercise a design task

    @property
    def points(self) -> float:
        return sum(p for _, p in self.grade_cells)

    @property
    def text(self) -> str:
        return "\n\n".join(self.markdown)

    @property
    def words(self) -> int:
        return len(self.text.split())

    @property
    def design(self) -> bool:
        return "(design)" in self.title or self.all_design


@dataclass
class Master:
    """One exercise master: the notebook-level text and its exercises in order."""

    path: Path
    intro_words: int
    setup_cells: list[str]
    exercises: list[Exercise]

    @property
    def chapter(self) -> str:
        return self.path.parent.parent.name

    @property
    def key(self) -> str:
        return f"{self.chapter}/{self.path.name}"


def master_notebooks(root: Path | None = None) -> list[Path]:
    """The nbgrader masters: notebooks in chapters/*/instructor/ that hold solution regions in
    nbgrader cells (a lesson master's build cells carry none: lessons are not graded)."""
    root = root or ROOT
    return sorted(
        p
        for p in root.glob("chapters/*/instructor/*.ipynb")
        if BEGIN in p.read_text(encoding="utf-8")
        and any("nbgrader" in c.metadata for c in nbformat.read(p, as_version=4).cells)
    )


def answer_lines(source: str) -> int:
    """Lines of code a student writes: non-blank, non-comment lines inside solution regions."""
    count, inside = 0, False
    for line in source.splitlines():
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        elif inside and line.strip() and not line.strip().startswith("#"):
            count += 1
    return count


def read_master(path: Path) -> Master:
    """Split a master into its exercises by the `## Exercise N` headings; a `## ` heading of
    another kind ("Going further", "What you built") closes the current exercise."""
    nb = nbformat.read(path, as_version=4)
    exercises: list[Exercise] = []
    current: Exercise | None = None
    intro_words, setup = 0, []
    for cell in nb.cells:
        if INSTRUCTOR_TAG in cell.metadata.get("tags", []):
            continue  # not in the student copy: nothing a student reads or runs
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown":
            heading = EXERCISE_HEADING.search(cell.source)
            if heading:
                current = Exercise(title=heading.group(1).strip(), number=int(heading.group(2)))
                exercises.append(current)
            elif re.match(r"^##\s", cell.source):
                current = None
            if current is not None:
                current.markdown.append(cell.source)
            elif not exercises:
                intro_words += len(cell.source.split())
            continue
        if cell.cell_type != "code":
            continue
        grade_id = meta.get("grade_id")
        if current is None:
            if not exercises and grade_id:
                setup.append(grade_id)
            continue
        if grade_id:
            current.code_cells.append(grade_id)
        if meta.get("grade"):
            current.grade_cells.append((grade_id, float(meta.get("points", 0))))
        current.answer_lines += answer_lines(cell.source)
    if re.search(r"\bdesign exercises\b", read_intro(path)):
        for exercise in exercises:
            exercise.all_design = True
    return Master(path=path, intro_words=intro_words, setup_cells=setup, exercises=exercises)


def lesson_notebooks(master: Path) -> dict[str, Path]:
    """The chapter's lessons before the exercise notebook, by their two-digit number (exercise
    and lab notebooks are not lessons)."""
    number = int(master.name[:2])
    chapter = master.parent.parent
    return {
        p.name[:2]: p
        for p in sorted(chapter.glob("[0-9][0-9]_*.ipynb"))
        if int(p.name[:2]) < number and "exercises" not in p.name and "labs" not in p.name
    }


def named_lessons(text: str, lessons: dict[str, Path]) -> list[str]:
    """The lesson numbers a text names: "notebook 04", "notebooks 01–03" (a range counts whole);
    numbers that are not lessons of this chapter are left out."""
    found: set[int] = set()
    for first, last in NOTEBOOK_REF.findall(text):
        found.update(range(int(first), int(last or first) + 1))
    return [f"{n:02d}" for n in sorted(found) if f"{n:02d}" in lessons]


def named_exercises(exercise: Exercise) -> list[int]:
    """The other exercises this one's text points back to ("reuse your answer to exercise 1")."""
    found: set[int] = set()
    for first, last in EXERCISE_REF.findall(exercise.text.split("\n", 1)[-1]):
        found.update(range(int(first), int(last or first) + 1))
    return sorted(n for n in found if n < exercise.number)


def _terms(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text) if w.lower() not in STOP_WORDS]


def closest_lessons(text: str, lessons: dict[str, Path]) -> tuple[list[str], list[str]]:
    """Where a text names no lesson: the lessons whose words it shares most (tf-idf: a word
    counts more the rarer it is among the chapter's lessons), and the three words that weigh most
    for the best one (the evidence the page prints)."""
    docs = {
        number: collections.Counter(
            _terms("\n".join(c.source for c in nbformat.read(path, as_version=4).cells))
        )
        for number, path in lessons.items()
    }
    df = collections.Counter(t for counts in docs.values() for t in counts)
    query = collections.Counter(_terms(text))

    def weights(counts: collections.Counter) -> dict[str, float]:
        idf = {t: math.log((len(docs) + 1) / df[t]) for t in query if counts[t]}
        return {t: min(query[t], 3) * (1 + math.log(counts[t])) * idf[t] for t in idf}

    scores = {number: sum(weights(counts).values()) for number, counts in docs.items()}
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return [], []
    chosen = sorted(n for n, s in scores.items() if s >= TIE * best)
    top = max(chosen, key=lambda n: scores[n])
    evidence = sorted(weights(docs[top]).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return chosen, [t for t, _ in evidence]


def load_timings(path: Path = TIMINGS) -> dict:
    if not path.exists():
        return {"notebooks": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def missing_timings(masters: list[Master], timings: dict) -> list[str]:
    """The code cells (master/grade_id) that the timings file has no measurement for."""
    missing = []
    for master in masters:
        cells = timings["notebooks"].get(master.key, {}).get("cells", {})
        for grade_id in master.setup_cells + [g for ex in master.exercises for g in ex.code_cells]:
            if grade_id not in cells:
                missing.append(f"{master.key}:{grade_id}")
    return missing


def estimate(exercise: Exercise, machine_s: float) -> tuple[int, int]:
    """Minutes (low, high) for one exercise under the stated model: read its words at 200 and at
    100 words a minute, write each line of the reference answer in 1 and in 3 minutes, add 5 and
    20 minutes of deciding for a design task, run its cells once and three times."""
    low = (
        exercise.words / READ_WPM[0]
        + exercise.answer_lines * MINUTES_PER_ANSWER_LINE[0]
        + (DESIGN_MINUTES[0] if exercise.design else 0)
        + RUNS[0] * machine_s / 60
    )
    high = (
        exercise.words / READ_WPM[1]
        + exercise.answer_lines * MINUTES_PER_ANSWER_LINE[1]
        + (DESIGN_MINUTES[1] if exercise.design else 0)
        + RUNS[1] * machine_s / 60
    )
    return max(1, round(low)), max(1, math.ceil(high))


def _round5(minutes: float, up: bool) -> int:
    return int(5 * (math.ceil(minutes / 5) if up else math.floor(minutes / 5))) or 5


def lesson_link(number: str, lessons: dict[str, Path]) -> str:
    path = lessons[number]
    return f"[{path.stem}](../{path.name})"


def generated_section(chapter: str, masters: list[Master], timings: dict) -> str:
    """The generated part of one chapter's page (markers excluded)."""
    out = []
    total_points = sum(ex.points for m in masters for ex in m.exercises)
    names = ", ".join(f"`{m.path.name}`" for m in masters)
    out += [
        "## Exercises and points",
        "",
        f"Assignment `{chapter}` (nbgrader): {names}; {_num(total_points)} points in all, one per "
        "autograded test cell (a `check_*(...)` call). The graded cells are the columns of "
        "`tools/gradebook_table.py`'s table.",
        "",
    ]
    for master in masters:
        lessons = lesson_notebooks(master.path)
        points = sum(ex.points for ex in master.exercises)
        out += [
            f"### `{master.path.name}` ({_num(points)} points)",
            "",
            "| exercise | graded cells (points) | reuses | lessons it names | closest lesson by its "
            "words * |",
            "|---|---|---|---|---|",
        ]
        notes = []
        for ex in master.exercises:
            cells = ", ".join(f"`{g}` ({_num(p)})" for g, p in ex.grade_cells)
            reuses = ", ".join(f"exercise {n}" for n in named_exercises(ex)) or "—"
            named = named_lessons(ex.text, lessons)
            derived, words = closest_lessons(ex.text, lessons)
            extra = [n for n in derived if n not in named]
            if words:
                notes.append(f"exercise {ex.number}: " + ", ".join(f"`{w}`" for w in words))
            out.append(
                f"| {ex.title} | {cells} | {reuses} "
                f"| {', '.join(lesson_link(n, lessons) for n in named) or '—'} "
                f"| {', '.join(lesson_link(n, lessons) for n in extra) or 'the same'} |"
            )
        out.append("")
        scope = named_lessons(read_intro(master.path), lessons)
        if scope:
            out += [
                "The notebook's introduction says it works on "
                + ", ".join(lesson_link(n, lessons) for n in scope)
                + ".",
                "",
            ]
        out += [
            "\\* Derived, not stated: the lesson(s) of this chapter whose text shares the most "
            "distinctive words with the exercise's text (tf-idf over the lessons before it; "
            f"within {TIE:.0%} of the best are listed too), where the text names none or others. "
            "The words that weigh most: " + "; ".join(notes) + '. "Lessons it names" are '
            'the ones the exercise\'s own text cites ("notebook 04"). Each chapter also assumes '
            "the chapters before it.",
            "",
        ]
    out += time_section(masters, timings)
    out += [
        "## Grading, end to end",
        "",
        "From the repository root, in the environment the course is installed in (without it "
        "`nbgrader autograde` stops on `FileNotFoundError: 'alembic'`):",
        "",
        "```bash",
        GRADING_COMMANDS.format(assignment=chapter).rstrip("\n"),
        "```",
        "",
        "`nbgrader export` writes one total per student and assignment; "
        "`tools/gradebook_table.py` writes one row per student with a column per graded cell "
        '(the table above) and the total. README.md\'s "For instructors" section explains the '
        "course's `nbgrader_config.py`.",
    ]
    return "\n".join(out)


def read_intro(path: Path) -> str:
    """The master's first markdown cell: its introduction."""
    nb = nbformat.read(path, as_version=4)
    return next((c.source for c in nb.cells if c.cell_type == "markdown"), "")


def time_section(masters: list[Master], timings: dict) -> list[str]:
    measured = timings.get("measured", {})
    out = [
        "## Estimated student time",
        "",
        "| notebook | exercise | words to read | answer lines | design | solved master's cells (s) "
        "| estimate (min) |",
        "|---|---|---|---|---|---|---|",
    ]
    total_low = total_high = 0.0
    for master in masters:
        cells = timings["notebooks"].get(master.key, {}).get("cells", {})
        setup_s = sum(cells.get(g, 0.0) for g in master.setup_cells)
        low = master.intro_words / READ_WPM[0] + setup_s / 60
        high = master.intro_words / READ_WPM[1] + RUNS[1] * setup_s / 60
        out.append(
            f"| `{master.path.name}` | introduction and imports | {master.intro_words} | — | — "
            f"| {setup_s:.1f} | {_span(max(1, round(low)), max(1, math.ceil(high)))} |"
        )
        for ex in master.exercises:
            seconds = sum(cells.get(g, 0.0) for g in ex.code_cells)
            lo, hi = estimate(ex, seconds)
            low, high = low + lo, high + hi
            out.append(
                f"| `{master.path.name}` | {ex.number}. {ex.title.split('—', 1)[-1].strip()} "
                f"| {ex.words} | {ex.answer_lines} | {'yes' if ex.design else 'no'} "
                f"| {seconds:.1f} | {_span(lo, hi)} |"
            )
        total_low, total_high = total_low + low, total_high + high
    whole = sum(timings["notebooks"].get(m.key, {}).get("total_s", 0.0) for m in masters)
    out += [
        "",
        f"**About {_round5(total_low, up=False)}–{_round5(total_high, up=True)} minutes** for "
        "the chapter's exercises. This is a model, not a measurement of students (no student was "
        "timed): each exercise is its words read at "
        f"{READ_WPM[0]} and at {READ_WPM[1]} words a minute, each line of the reference answer "
        f"(non-blank, non-comment, between the solution markers) written in "
        f"{MINUTES_PER_ANSWER_LINE[0]} and in {MINUTES_PER_ANSWER_LINE[1]} minutes, "
        f"{DESIGN_MINUTES[0]} and {DESIGN_MINUTES[1]} more minutes of deciding for a design "
        f"task, and its cells run {RUNS[0]} and {RUNS[1]} times at the machine time measured on "
        "the solved master. That machine time: "
        f"{measured.get('how', 'not measured yet (python tools/instructor_pages.py --time)')}; "
        f"the whole solved notebook{'s' if len(masters) > 1 else ''} took {whole:.1f} s, so the "
        "checks cost a student next to nothing and the estimate is reading and writing. Time a "
        "pilot student before you fix a deadline.",
        "",
    ]
    return out


def _span(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def _num(points: float) -> str:
    return f"{points:g}"


def chapter_pages(root: Path | None = None) -> dict[Path, list[Master]]:
    """Each chapter's page and the masters it covers."""
    root = root or ROOT
    pages: dict[Path, list[Master]] = {}
    for path in master_notebooks(root):
        pages.setdefault(path.parent / "README.md", []).append(read_master(path))
    return pages


def render(page_text: str, generated: str) -> str:
    """The page with its generated part replaced (ValueError if the markers are missing)."""
    if page_text.count(BEGIN_MARK) != 1 or page_text.count(END_MARK) != 1:
        raise ValueError("needs exactly one begin and one end marker")
    head, rest = page_text.split(BEGIN_MARK)
    _, tail = rest.split(END_MARK)
    return f"{head}{BEGIN_MARK}\n{generated}\n{END_MARK}{tail}"


def time_masters(timings_path: Path = TIMINGS) -> dict:
    """Run every solved master top to bottom in full mode (COURSE_FAST=0, in its own folder, one
    kernel each) and record the wall seconds of each code cell under its grade_id."""
    from nbclient import NotebookClient

    os.environ["COURSE_FAST"] = "0"
    os.environ.setdefault("MPLBACKEND", "agg")
    result: dict = {"notebooks": {}}
    for path in master_notebooks():
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            timeout=900,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        cells, start = {}, time.perf_counter()
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    began = time.perf_counter()
                    client.execute_cell(cell, index)
                    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell{index}")
                    cells[grade_id] = round(time.perf_counter() - began, 2)
        key = f"{path.parent.parent.name}/{path.name}"
        result["notebooks"][key] = {
            "total_s": round(time.perf_counter() - start, 1),
            "cells": cells,
        }
        print(f"{key}: {result['notebooks'][key]['total_s']} s")
    import torch

    result["measured"] = {
        "how": (
            f"each solved master run once, top to bottom, in full mode (COURSE_FAST=0) by "
            f"`python tools/instructor_pages.py --time` on {time.strftime('%Y-%m-%d')}, "
            f"{os.cpu_count()} CPU cores ({platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads), kernel start-up excluded; the masters' check cells "
            "include the hidden tests, so this is a little more than a student's visible checks"
        )
    }
    timings_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is out of date")
    parser.add_argument(
        "--time", action="store_true", help="measure the solved masters first (a minute or so)"
    )
    args = parser.parse_args(argv)
    if args.time:
        time_masters()
    timings = load_timings()
    pages = chapter_pages()
    missing = missing_timings([m for ms in pages.values() for m in ms], timings)
    if missing:
        print(
            f"instructor_pages: no machine time for {', '.join(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''}; run python tools/instructor_pages.py --time"
        )
        return 1
    stale = []
    for page, masters in pages.items():
        chapter = page.parent.parent.name
        if not page.exists():
            print(f"{page.relative_to(ROOT)} is missing: write its learning goals and the markers")
            return 1
        text = page.read_text(encoding="utf-8")
        try:
            new = render(text, generated_section(chapter, masters, timings))
        except ValueError as err:
            print(f"{page.relative_to(ROOT)}: {err} ({BEGIN_MARK} ... {END_MARK})")
            return 1
        if new == text:
            continue
        if args.check:
            stale.append(str(page.relative_to(ROOT)))
        else:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
    if stale:
        print("out of date (run python tools/instructor_pages.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
