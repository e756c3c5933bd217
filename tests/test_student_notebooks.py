"""Instructor/student workflow: the lesson sequence holds stub copies (no answers), the solved
masters sit in chapters/<ch>/instructor/, the copies are current, nbval runs the masters but not
the stubs, and every checker rejects its untouched stub."""

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student_notebooks as msn  # noqa: E402

MASTERS = msn.master_notebooks()
IDS = [f"{p.parent.parent.name}/{p.name}" for p in MASTERS]


def solution_lines(master: Path) -> list[str]:
    """The non-trivial lines inside the master's solution regions that appear nowhere else in it
    (an exercise's text may quote an API call the answer uses)."""
    cells = nbformat.read(master, as_version=4).cells
    elsewhere = "\n".join(msn.stub_source(c.source) for c in cells)
    lines = []
    for cell in cells:
        for region in msn.REGION.finditer(cell.source):
            body = msn.strip_markers(region.group(0))
            lines += [
                ln.strip()
                for ln in body.splitlines()
                if len(ln.strip()) > 12 and ln.strip() not in elsewhere
            ]
    assert lines, f"{master.name}: no solution lines found"
    return lines


def test_there_are_exercise_notebooks_one_per_chapter_at_least():
    assert {p.parent.parent.name for p in MASTERS} == {
        "01_bert",
        "02_roberta",
        "03_albert",
        "04_deberta_distil",
        "05_modern_encoders",
    }
    assert len(MASTERS) == 6


def test_stub_replaces_only_the_region_and_keeps_indentation():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\nprint(2)\n"
    stubbed = msn.stub_source(source)
    assert (
        stubbed
        == "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\nprint(2)\n"
    )
    assert msn.strip_markers(source) == "def f(x):\n    y = 1\n    return x + y\n\nprint(2)\n"


def test_committed_student_notebooks_are_current():
    assert msn.main(["--check"]) == 0


def test_check_reports_a_stale_copy(tmp_path, monkeypatch, capsys):
    """--check fails (and names the file) when a copy no longer matches its master."""
    chapter = tmp_path / "chapters" / "09_x"
    (chapter / "instructor").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                metadata={"nbgrader": {"solution": True, "grade": False, "locked": False}},
            )
        ]
    )
    nbformat.write(nb, chapter / "instructor" / "01_exercises.ipynb")
    monkeypatch.setattr(msn, "ROOT", tmp_path)
    assert msn.main(["--check"]) == 1
    assert "chapters/09_x/01_exercises.ipynb" in capsys.readouterr().out
    assert msn.main([]) == 0 and msn.main(["--check"]) == 0
    (chapter / "01_exercises.ipynb").write_text("{}", encoding="utf-8")
    assert msn.main(["--check"]) == 1


def test_the_lesson_sequence_holds_no_answers():
    """No notebook a student opens in chapters/<ch>/ contains a solution, a marker or the
    instructor note; the masters are only under instructor/."""
    for notebook in sorted(ROOT.glob("chapters/*/*.ipynb")):
        text = notebook.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text, notebook
        assert "master copy" not in text.lower(), notebook
    for master in MASTERS:
        student = msn.student_path(master)
        assert student.parent == master.parent.parent and student.exists()
        text = student.read_text(encoding="utf-8")
        leaked = [ln for ln in solution_lines(master) if ln in text]
        assert not leaked, f"{student.name} contains answer lines: {leaked[:3]}"
        nb = nbformat.read(student, as_version=4)
        assert not any("instructor" in c.metadata.get("tags", []) for c in nb.cells)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert not list(ROOT.glob("chapters/*/student")), "the old student/ folders are gone"


def test_solutions_view_has_the_answers_without_markers():
    for master in MASTERS:
        text = msn.solutions_path(master).read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert all(line in text for line in solution_lines(master))


def test_nbval_runs_the_masters_and_not_the_stub_copies():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    ignored = {Path(p).resolve() for p in root_conftest.collect_ignore}
    for master in MASTERS:
        assert msn.student_path(master).resolve() in ignored
        assert master.resolve() not in ignored
    for pattern in root_conftest.collect_ignore_glob:
        assert not any(master.relative_to(ROOT).match(pattern) for master in MASTERS)


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_masters_carry_nbgrader_metadata(master):
    nb = nbformat.read(master, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader")
        if "### BEGIN SOLUTION" in cell.source:
            assert meta and meta["solution"] and not meta["grade"], cell.source[:80]
        elif msn.CHECK_CALL.search(cell.source) and "import" not in cell.source:
            assert meta and meta["grade"] and meta["locked"], cell.source[:80]


@pytest.mark.parametrize("master", MASTERS, ids=IDS)
def test_every_checker_rejects_its_untouched_stub(master, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(msn.student_path(master), as_version=4)
    monkeypatch.setenv("COURSE_FAST", "1")
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(master.parent.parent)}},
    ).execute()
    check_cells = [
        c
        for c in nb.cells
        if c.cell_type == "code" and msn.CHECK_CALL.search(c.source) and "import" not in c.source
    ]
    assert check_cells, f"{master.name} has no check_ cells"
    for cell in check_cells:
        assert "raises-exception" in cell.metadata.get("tags", []), cell.source
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"this check passed on an untouched stub:\n{cell.source}"
        # NotWrittenYet is the ExerciseError an unwritten stub raises (core.run_learner_code)
        assert errors[0].ename in ("ExerciseError", "NotWrittenYet"), (
            f"failed with {errors[0].ename}, not the checker:\n{cell.source}"
        )
        # the message only: one line, no traceback into course code
        assert len(errors[0].traceback) == 1, errors[0].traceback
        assert "not implemented yet" in errors[0].traceback[0]
        assert "course_lib" not in "".join(errors[0].traceback)
    # and nothing else in the notebook broke
    others = [c for c in nb.cells if c.cell_type == "code" and c not in check_cells]
    for cell in others:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
