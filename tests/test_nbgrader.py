"""The exercise masters are nbgrader source notebooks. Their cell metadata follows nbgrader's
schema (version 3); `nbgrader generate_assignment` releases exactly the student copies committed
in the lesson sequence (the same cells, sources and locks; only nbgrader's checksums and our
`raises-exception` tags differ); `nbgrader autograde` gives a solved submission full marks, the
untouched stub zero, and grades each exercise on its own even when a student edits a test cell.
The course directory is the graded version: hidden tests (other inputs, and no call to the
library's own implementation) catch what the visible checks cannot, a deleted check cell is put
back at grading, every release runs to its end untouched, and feedback names the mistake.
The nbgrader tests are skipped, with the reason, where nbgrader is not installed (the `classroom`
extra installs it)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student_notebooks as msn  # noqa: E402

MASTERS = msn.master_notebooks()
IDS = [f"{p.parent.parent.name}/{p.name}" for p in MASTERS]
needs_nbgrader = pytest.mark.skipif(
    importlib.util.find_spec("nbgrader") is None,
    reason='nbgrader is not installed (pip install -e ".[classroom]")',
)
SCHEMA_KEYS = {"schema_version", "grade", "grade_id", "locked", "solution", "task"}


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_master_cells_carry_nbgrader_v3_metadata(master):
    """Every cell but the instructor note is an nbgrader cell: answers are solution cells (one
    region each), each check is a locked test cell worth points, everything else is read-only."""
    cells = nbformat.read(master, as_version=4).cells
    ids, points = [], 0
    for cell in cells:
        if msn.INSTRUCTOR_TAG in cell.metadata.get("tags", []):
            assert "nbgrader" not in cell.metadata, cell.source[:80]
            continue
        meta = cell.metadata.get("nbgrader")
        assert meta, f"no nbgrader metadata on:\n{cell.source[:200]}"
        assert set(meta) - {"points"} == SCHEMA_KEYS, meta
        assert meta["schema_version"] == 3 and meta["task"] is False
        assert re.fullmatch(r"[a-zA-Z0-9_\-]+", meta["grade_id"]), meta["grade_id"]
        ids.append(meta["grade_id"])
        if msn.is_check_cell(cell):
            assert (meta["grade"], meta["solution"], meta["locked"]) == (True, False, True)
            assert meta["points"] > 0
            points += meta["points"]
        elif msn.BEGIN in cell.source:
            assert cell.cell_type == "code"
            assert (meta["grade"], meta["solution"], meta["locked"]) == (False, True, False)
            assert cell.source.count(msn.BEGIN) == 1 == cell.source.count(msn.END)
            assert "points" not in meta
        else:
            assert (meta["grade"], meta["solution"], meta["locked"]) == (False, False, True)
            assert "points" not in meta
    assert len(ids) == len(set(ids)), "duplicate grade_id"
    checks = [c for c in cells if msn.is_check_cell(c)]
    solutions = [c for c in cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert points == len(checks) == len(solutions) >= 4


def test_the_tool_refuses_what_nbgrader_refuses():
    """A region in a cell not marked as a solution, a nested and an unclosed region stop the tool
    (nbgrader stops on them too); a solution cell without a region becomes the stub entirely."""

    def notebook(source, solution):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {
            "grade": False,
            "grade_id": "a",
            "locked": False,
            "schema_version": 3,
            "solution": solution,
            "task": False,
        }
        return nbformat.v4.new_notebook(cells=[cell])

    region = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    with pytest.raises(msn.MasterError, match="not marked as a solution"):
        msn.student_version(notebook(region, solution=False))
    with pytest.raises(msn.MasterError, match="inside another"):
        msn.stub_source("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION")
    with pytest.raises(msn.MasterError, match="without"):
        msn.stub_source("x = 1\n### BEGIN SOLUTION\nx = 2")
    with pytest.raises(msn.MasterError, match="without its"):
        msn.student_version(notebook("x = 1\n### BEGIN SOLUTION\nx = 2", solution=True))
    whole = msn.student_version(notebook("x = 42", solution=True))
    assert whole.cells[0].source == "# YOUR CODE HERE\nraise NotImplementedError()"
    assert msn.student_version(notebook(region, solution=True)).cells[0].source == (
        "def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    )


def test_a_bad_master_stops_the_tool_with_one_line(tmp_path, monkeypatch, capsys):
    """The instructor's mistake (an answer in a cell not marked as a solution) is named in one
    line with the fix, before any student copy is written."""
    instructor = tmp_path / "chapters" / "09_x" / "instructor"
    instructor.mkdir(parents=True)
    cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), instructor / "01_exercises.ipynb")
    monkeypatch.setattr(msn, "ROOT", tmp_path)
    assert msn.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "chapters/09_x/instructor/01_exercises.ipynb" in out
    assert "nbgrader.solution to true" in out and cell.id in out
    assert not (tmp_path / "chapters" / "09_x" / "01_exercises.ipynb").exists()


def test_nbgrader_course_layout_never_overwrites(tmp_path, capsys):
    """--nbgrader-course writes the graded masters to source/<chapter>/ and the config next to
    them; run again it is a no-op, and a file that differs stops it before anything is written."""
    course = tmp_path / "course"
    assert msn.main(["--nbgrader-course", str(course)]) == 0
    for master in MASTERS:
        copy = course / "source" / master.parent.parent.name / master.name
        graded = msn.graded_master(master, nbformat.read(master, as_version=4))
        assert copy.read_text(encoding="utf-8") == nbformat.writes(graded) + "\n"
    assert (course / "nbgrader_config.py").read_bytes() == msn.NBGRADER_CONFIG.read_bytes()
    assert msn.main(["--nbgrader-course", str(course)]) == 0
    edited = course / "source" / MASTERS[0].parent.parent.name / MASTERS[0].name
    edited.write_text("my edits", encoding="utf-8")
    (course / "nbgrader_config.py").unlink()
    capsys.readouterr()
    assert msn.main(["--nbgrader-course", str(course)]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "exists and differs" in out and str(edited) in out
    assert edited.read_text(encoding="utf-8") == "my edits"
    assert not (course / "nbgrader_config.py").exists(), "nothing is written after a refusal"


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_graded_masters_are_classroom_ready(master):
    """The graded source starts with the install cell, points to no solutions view, names lesson
    notebooks and repository folders as parts of the public course, tags every check cell
    `raises-exception`, and keeps the master's answers and hidden tests (nbgrader clears them);
    every check cell has hidden tests, among them the test that the answer is the learner's own."""
    nb = nbformat.read(master, as_version=4)
    graded = msn.graded_master(master, nb)
    assert graded.cells[0].metadata["nbgrader"]["grade_id"] == msn.INSTALL_ID
    assert "pip install" in graded.cells[0].source
    text = "\n".join(
        c.source for c in graded.cells if msn.INSTRUCTOR_TAG not in c.metadata.get("tags", [])
    )
    assert "solutions/" not in text and "instructor/" not in text
    assert not re.search(r"`(experiments|tests)/[^`]*`(?! \(in the)", text)
    for mention in msn.LESSON_NOTEBOOKS.finditer(text):
        assert text[mention.end(1) :].startswith(" of the course's chapter"), mention.group(0)
    checks = [c for c in graded.cells if msn.is_check_cell(c)]
    assert checks and all("raises-exception" in c.metadata["tags"] for c in checks)
    for cell in checks:
        assert msn.BEGIN_HIDDEN in cell.source and "check_own_work(" in cell.source, cell.source
    student = msn.student_version(nb)
    assert not any(
        msn.BEGIN_HIDDEN in c.source or "check_own_work(" in c.source for c in student.cells
    )


@needs_nbgrader
@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_nbgrader_validates_the_masters_and_stubs_them_like_the_tool(master):
    from nbgrader.nbgraderformat import MetadataValidator
    from nbgrader.preprocessors import ClearSolutions

    nb = nbformat.read(master, as_version=4)
    MetadataValidator().validate_nb(nb)
    clear = ClearSolutions()
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solution_cells
    for cell in solution_cells:
        theirs = nbformat.from_dict(cell)
        assert clear._replace_solution_region(theirs, "python")
        assert msn.stub_source(cell.source) == theirs.source


def nbgrader(course: Path, *args: str) -> str:
    """Run one nbgrader command in `course`; its output, or a failure showing the output."""
    env = dict(os.environ, COURSE_FAST="1")
    # nbgrader runs the `alembic` script of its own environment
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{out[-4000:]}"
    assert "[ERROR]" not in out and "| ERROR]" not in out, out[-4000:]
    return out


def comparable(nb: nbformat.NotebookNode) -> list[tuple]:
    """Each cell as nbgrader and the tool must agree on it: id, type, source and metadata, less
    what only one of them adds (nbgrader's checksum and cell type, our raises-exception tag)."""
    rows = []
    for cell in nb.cells:
        meta = json.loads(json.dumps(cell.metadata))
        for key in ("checksum", "cell_type"):
            meta.get("nbgrader", {}).pop(key, None)
        tags = [t for t in meta.pop("tags", []) if t != "raises-exception"]
        if tags:
            meta["tags"] = tags
        rows.append((cell.get("id"), cell.cell_type, cell.source, meta))
    return rows


# chapter 01's answers as three students hand them in (see the test below)
VISIBLE_ONLY_ATTENTION = """def attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)  # the visible check's head_dim only
    probs = (scores + mask).softmax(dim=-1)
    return probs @ v, probs"""
LIBRARY_PARAMETERS = """def bert_parameters(V, H, L, I, P, T):  # noqa: E741
    from course_lib import BertConfig, count_parameters

    config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, intermediate_size=I,
                        max_position_embeddings=P, type_vocab_size=T, num_attention_heads=1)
    return count_parameters(config, "BertModel")["total"]"""


def test_the_tricky_answers_pass_their_visible_checks(capsys):
    """The two answers the graded run must catch do pass the checks students see: only the
    hidden tests tell them apart from a right answer."""
    import math

    import torch  # noqa: F401 (the answers' namespace)

    from course_lib.exercises.bert import check_attention, check_parameter_formula

    namespace = {"math": math, "torch": torch}
    exec(VISIBLE_ONLY_ATTENTION, namespace)
    exec(LIBRARY_PARAMETERS, namespace)
    check_attention(namespace["attention"])
    check_parameter_formula(namespace["bert_parameters"])
    assert capsys.readouterr().out.count("Correct!") == 2


@needs_nbgrader
@pytest.mark.slow
def test_nbgrader_generates_the_student_copies_and_autogrades(tmp_path, monkeypatch):
    """One graded course for the module's slow checks: every release is the lesson-path copy of
    the graded master (no solutions pointer, no hidden test, an install cell first) and runs to
    its last cell untouched; chapter 01 is autograded for four students and one gets feedback."""
    from nbclient import NotebookClient
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    assert msn.main(["--nbgrader-course", str(course)]) == 0
    nbgrader(course, "generate_assignment", "*")
    for master in MASTERS:
        released = course / "release" / master.parent.parent.name / master.name
        graded = msn.graded_master(master, nbformat.read(master, as_version=4))
        ours = msn.student_version(graded)
        theirs = nbformat.read(released, as_version=4)
        assert comparable(theirs) == comparable(ours), master
        assert theirs.metadata == ours.metadata
        text = released.read_text(encoding="utf-8")
        for leak in (
            "solutions/",
            "instructor",
            "HIDDEN TESTS",
            "check_own_work(",
            "BEGIN SOLUTION",
        ):
            assert leak not in text, (master.name, leak)
        assert theirs.cells[0].metadata["nbgrader"]["grade_id"] == msn.INSTALL_ID
        checks = [c for c in theirs.cells if msn.is_check_cell(c)]
        assert all("raises-exception" in c.metadata.get("tags", []) for c in checks)
        # "Run All" on the untouched release: every check fails, and the run still reaches the end
        monkeypatch.setenv("COURSE_FAST", "1")
        NotebookClient(theirs, timeout=300, kernel_name="python3").execute(cwd=str(released.parent))
        code = [c for c in theirs.cells if c.cell_type == "code"]
        assert code[-1].execution_count is not None, master
        assert all(any(o.output_type == "error" for o in c.outputs) for c in checks)

    # four students hand in chapter 01: solved, untouched (nbgrader's release), and two with
    # mistakes a visible check cannot catch or a test cell edited away (see `tricky` below)
    assignment, master = "01_bert", ROOT / "chapters/01_bert/instructor/07_exercises.ipynb"
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nbformat.read(master, as_version=4).cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    release = course / "release" / assignment / master.name
    solved = nbformat.read(release, as_version=4)
    for cell in solved.cells:
        cell.source = answers.get(cell.metadata["nbgrader"]["grade_id"], cell.source)
    partial = nbformat.read(msn.student_path(master), as_version=4)
    for cell in partial.cells:
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if grade_id == "ex1_answer":
            cell.source = answers[grade_id]
        elif grade_id == "ex2_check":
            cell.source = "pass"
    # tricky: 1 right; 2 passes only the visible check; 3 right with its check cell deleted;
    # 4 calls the library; 5 right with its check replaced by `pass`; 6 untouched
    tricky = nbformat.read(release, as_version=4)
    tricky_answers = answers | {
        "ex2_answer": VISIBLE_ONLY_ATTENTION,
        "ex4_answer": LIBRARY_PARAMETERS,
        "ex6_answer": None,
    }
    for cell in tricky.cells:
        answer = tricky_answers.get(cell.metadata["nbgrader"]["grade_id"])
        cell.source = answer or cell.source
        if cell.metadata["nbgrader"]["grade_id"] == "ex5_check":
            cell.source = "pass"
    tricky.cells = [c for c in tricky.cells if c.metadata["nbgrader"]["grade_id"] != "ex3_check"]
    submissions = {
        "solved": solved,
        "untouched": nbformat.read(release, as_version=4),
        "partial": partial,
        "tricky": tricky,
    }
    for student, nb in submissions.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / master.name)
    nbgrader(course, "autograde", assignment, "--create")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {}
        for student in submissions:
            graded = gradebook.find_submission_notebook(master.stem, assignment, student)
            assert graded.max_score == 6
            scores[student] = {g.name: g.auto_score for g in graded.grades}
    assert scores["solved"] == {f"ex{i}_check": 1.0 for i in range(1, 7)}
    assert scores["untouched"] == {f"ex{i}_check": 0.0 for i in range(1, 7)}
    assert scores["partial"] == {"ex1_check": 1.0} | {f"ex{i}_check": 0.0 for i in range(2, 7)}
    assert scores["tricky"] == {
        "ex1_check": 1.0,
        "ex2_check": 0.0,  # passes the visible check, fails the hidden one (head_dim 16)
        "ex3_check": 1.0,  # the deleted check cell is put back and scored
        "ex4_check": 0.0,  # calls count_parameters
        "ex5_check": 1.0,
        "ex6_check": 0.0,
    }

    nbgrader(course, "generate_feedback", assignment, "--student", "tricky")
    html = (course / "feedback" / "tricky" / assignment / f"{master.stem}.html").read_text(
        encoding="utf-8"
    )
    assert "head_dim 16" in html  # the hidden test's message names the mistake
    assert "ready-made implementation" in html and "course_lib.counting" in html
    assert "was missing from the submission" in html
    assert "not implemented yet" in html or "NotImplementedError" in html
