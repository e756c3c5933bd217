"""Every chapter has an instructor page whose tables are computed from the nbgrader masters (so
they cannot drift from what nbgrader grades), whose grading commands are README.md's, and which
the course book never publishes; tools/gradebook_table.py turns nbgrader's gradebook into one row
per student and one column per graded cell."""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pages = _load("instructor_pages")
table = _load("gradebook_table")

MASTERS = pages.master_notebooks()
CHAPTERS = sorted({m.parent.parent.name for m in MASTERS})
needs_nbgrader = pytest.mark.skipif(
    importlib.util.find_spec("nbgrader") is None,
    reason='nbgrader is not installed (pip install -e ".[classroom]")',
)


def test_every_chapter_with_exercises_has_a_page_with_learning_goals():
    chapters = sorted(p.name for p in (ROOT / "chapters").iterdir() if (p / "README.md").exists())
    assert CHAPTERS == chapters, "every chapter has exercise masters"
    for chapter in CHAPTERS:
        page = ROOT / "chapters" / chapter / "instructor" / "README.md"
        assert page.exists(), page
        goals = page.read_text(encoding="utf-8").split("## Learning goals", 1)[1]
        goals = goals.split(pages.BEGIN_MARK, 1)[0]
        assert len(re.findall(r"^- \S", goals, re.M)) >= 3, f"{chapter}: write its learning goals"


def test_the_pages_are_what_the_tool_computes_from_the_masters(capsys):
    """`--check` regenerates every page in memory: a master whose points, graded cells or text
    changed, or a timing file missing a cell, makes it fail with the command that fixes it."""
    assert pages.main(["--check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    "master", MASTERS, ids=[f"{m.parent.parent.name}/{m.name}" for m in MASTERS]
)
def test_the_exercises_hold_every_graded_cell_and_point(master):
    """The tool's split into exercises loses no graded cell: its cells and points are exactly
    nbgrader's metadata, and the page's table lists each one with its points."""
    cells = nbformat.read(master, as_version=4).cells
    graded = {
        c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
        for c in cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    parsed = pages.read_master(master)
    found = {g: p for ex in parsed.exercises for g, p in ex.grade_cells}
    assert found == graded
    assert [ex.number for ex in parsed.exercises] == sorted(ex.number for ex in parsed.exercises)
    page = (master.parent / "README.md").read_text(encoding="utf-8")
    section = page.split(f"### `{master.name}` ({sum(graded.values()):g} points)", 1)[1]
    for grade_id, points in graded.items():
        assert f"`{grade_id}` ({points:g})" in section.split("\n## ", 1)[0]


def test_lessons_named_in_a_text_and_the_closest_by_words():
    lessons = pages.lesson_notebooks(
        ROOT / "chapters/05_modern_encoders/instructor/05_exercises.ipynb"
    )
    assert sorted(lessons) == ["01", "02", "03", "04"]
    assert pages.named_lessons("see notebook 03 and notebooks 01–02; notebook 09", lessons) == [
        "01",
        "02",
        "03",
    ]
    closest, words = pages.closest_lessons("rotary embeddings turn feature pairs", lessons)
    assert closest == ["03"] and words


def _bash_block(text: str, after: str) -> str:
    section = text.split(after, 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_pages_and_the_readme_give_the_same_grading_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ours = _bash_block(readme, "## For instructors")
    assert ours == pages.GRADING_COMMANDS.format(assignment="01_bert")
    for needed in (
        "generate_assignment",
        "autograde",
        "generate_feedback",
        "export",
        "gradebook_table",
    ):
        assert f"{needed} " in ours or f"{needed}.py " in ours, needed
    for chapter in CHAPTERS:
        assert f"chapters/{chapter}/instructor/README.md" in readme, (
            f"README links {chapter}'s page"
        )
        page = (ROOT / "chapters" / chapter / "instructor" / "README.md").read_text(
            encoding="utf-8"
        )
        assert _bash_block(page, "## Grading, end to end") == pages.GRADING_COMMANDS.format(
            assignment=chapter
        )


def test_the_readme_says_what_the_course_config_sets():
    config = (ROOT / "tools" / "nbgrader_config.py").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## For instructors", 1)[1]
    readme = readme.split("\n## ", 1)[0]
    course_id = re.search(r'course_id = "([^"]+)"', config).group(1)
    timeout = re.search(r"Execute\.timeout = (\d+)", config).group(1)
    assert f'course_id = "{course_id}"' in readme
    assert f"{timeout} s" in readme and "alembic" in readme
    assert '"instructor"' in config and "instructor-only cells" in readme


def test_the_book_never_publishes_the_instructor_pages():
    book = _load("book")
    assert "instructor" in book.PRIVATE_FOLDERS
    for chapter in book.chapters(ROOT):
        assert all("/" not in name for name in chapter.notebooks), chapter.notebooks
    link = "[page](chapters/01_bert/instructor/README.md)"
    assert book.rewrite_links(link, ".", {"index.md"}) == "`page`"


@needs_nbgrader
# nbgrader 0.9's own Gradebook.add_submission under SQLAlchemy 2 (its autoflush), not ours.
@pytest.mark.filterwarnings("ignore:Object of type <Submitted.* not in session")
def test_gradebook_table_one_row_per_student_one_column_per_graded_cell(tmp_path, monkeypatch):
    """A gradebook built with nbgrader's API (no autograde run): two graded cells, three
    students, one of them without a submission and one with a manual grade that overrides."""
    # nbgrader runs the `alembic` script of its own environment (found here even if the
    # environment was not activated)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    monkeypatch.setenv("PATH", path)
    from nbgrader.api import Gradebook

    db = tmp_path / "gradebook.db"
    with Gradebook(f"sqlite:///{db}") as gradebook:
        gradebook.add_assignment("01_bert")
        gradebook.add_notebook("07_exercises", "01_bert")
        for name in ("ex10_check", "ex2_check"):
            gradebook.add_grade_cell(name, "07_exercises", "01_bert", max_score=1, cell_type="code")
        for student in ("ada", "bob", "cy"):
            gradebook.add_student(student)
        for student, scores in {"ada": (1.0, 1.0), "bob": (0.0, 1.0)}.items():
            gradebook.add_submission("01_bert", student)
            for name, score in zip(("ex2_check", "ex10_check"), scores):
                gradebook.find_grade(name, "07_exercises", "01_bert", student).auto_score = score
        gradebook.find_grade("ex2_check", "07_exercises", "01_bert", "bob").manual_score = 0.5
        gradebook.db.commit()

    out = tmp_path / "table.csv"
    assert table.main([str(db), "--assignment", "01_bert", "-o", str(out)]) == 0
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows == [
        [
            "student_id",
            "01_bert/07_exercises/ex2_check",
            "01_bert/07_exercises/ex10_check",
            "total",
            "max_score",
        ],
        ["(max)", "1", "1", "2", "2"],
        ["ada", "1", "1", "2", "2"],
        ["bob", "0.5", "1", "1.5", "2"],
        ["cy", "", "", "0", "2"],
    ]
    assert table.main([str(db), "--assignment", "02_roberta"]) == 2


def test_gradebook_table_without_a_database_says_so_in_one_line(tmp_path):
    missing = tmp_path / "gradebook.db"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gradebook_table.py"), str(missing)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no gradebook at" in done.stderr
    assert "nbgrader autograde" in done.stderr
    assert not missing.exists(), "a missing gradebook is not created"
