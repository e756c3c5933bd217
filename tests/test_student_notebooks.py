"""Instructor/student workflow: student copies are current, and every checker rejects its stub."""

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student_notebooks as msn  # noqa: E402

MASTERS = msn.master_notebooks()


def test_there_are_exercise_notebooks():
    assert MASTERS, "no master notebook with ### BEGIN SOLUTION regions was found"


def test_stub_replaces_only_the_region_and_keeps_indentation():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\nprint(2)\n"
    stubbed = msn.stub_source(source)
    assert stubbed == "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\nprint(2)\n"


def test_committed_student_notebooks_are_current():
    assert msn.main(["--check"]) == 0


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_checker_rejects_its_untouched_stub(master, monkeypatch):
    from nbclient import NotebookClient

    student_path = master.parent / "student" / master.name
    nb = nbformat.read(student_path, as_version=4)
    monkeypatch.setenv("COURSE_FAST", "1")
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(master.parent)}}).execute()
    check_cells = [c for c in nb.cells if c.cell_type == "code" and "check_" in c.source and "import" not in c.source]
    assert check_cells, f"{master.name} has no check_ cells"
    for cell in check_cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert errors, f"this check passed on an untouched stub:\n{cell.source}"
        assert errors[0].ename == "ExerciseError", f"failed with {errors[0].ename}, not the checker:\n{cell.source}"
    # and nothing else in the notebook broke
    others = [c for c in nb.cells if c.cell_type == "code" and c not in check_cells]
    for cell in others:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
