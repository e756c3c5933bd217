"""Lessons the learner writes (issue 38): a lesson master in chapters/<ch>/instructor/ (cells tagged
`build`, no nbgrader metadata) gives a lesson copy in the lesson sequence where every build cell is
a stub, its check cell's output is the check's verdict on that stub, and a closed "Show a
solution" cell follows; every other output is the master's. The copies are current, Run All of an
untouched copy completes with the library's versions standing in, and CI runs the masters."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book  # noqa: E402
import make_student_notebooks as msn  # noqa: E402

LESSON_MASTERS = msn.lesson_masters()
MASTER_IDS = [f"{p.parent.parent.name}/{p.name}" for p in LESSON_MASTERS]
# The lesson path: chapters/<ch>/NN_*.ipynb, labs notebooks included.
LESSON_PATH = sorted(ROOT.glob("chapters/*/[0-9][0-9]_*.ipynb"))
WITH_BUILD_CELLS = [
    p
    for p in LESSON_PATH
    if any(
        msn.BUILD_TAG in c.get("metadata", {}).get("tags", [])
        for c in json.loads(p.read_text(encoding="utf-8"))["cells"]
    )
]
COPY_IDS = [f"{p.parent.name}/{p.name}" for p in WITH_BUILD_CELLS]
FIRST_CHAPTERS = ("01_", "02_", "03_", "04_", "05_")
MIN_BUILD_CELLS = 40  # the bar across chapters 01-05


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.metadata.get("tags", [])


def stream_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def defined_names(source: str) -> list[str]:
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]


# ---------------------------------------------------------------- the committed notebooks


@pytest.mark.parametrize("master", LESSON_MASTERS, ids=MASTER_IDS)
def test_lesson_copy_and_solutions_are_current(master):
    for target, text in msn.outputs_for(master).items():
        where = target.relative_to(ROOT)
        assert target.exists(), f"{where} is missing: run python tools/make_student_notebooks.py"
        assert target.read_text(encoding="utf-8") == text, (
            f"{where} is out of date: run python tools/make_student_notebooks.py"
        )


@pytest.mark.parametrize("master", LESSON_MASTERS, ids=MASTER_IDS)
def test_every_master_build_cell_has_a_region_and_its_check(master):
    nb = nbformat.read(master, as_version=4)
    builds = msn.lesson_builds(nb)  # MasterError names the first cell that is not right
    tagged = [i for i, c in enumerate(nb.cells) if msn.BUILD_TAG in tags(c)]
    assert [b.build for b in builds] == tagged
    for b in builds:
        assert msn.CHECK_TAG in tags(nb.cells[b.check])
        assert nb.cells[b.build].source.count(msn.BEGIN) >= 1
    answers = msn.build_answers(master)
    assert len(answers) == len(builds), "two build cells define the same name"
    for name, answer in answers.items():
        assert msn.BEGIN not in answer and msn.END not in answer
        assert name in defined_names(answer)
        assert "NotImplementedError" not in answer, f"{name}: the master's answer is a stub"
    assert not [c for c in nb.cells if "nbgrader" in c.metadata]
    assert master not in msn.master_notebooks(), "a lesson master is not an exercise master"


@pytest.mark.parametrize("notebook", WITH_BUILD_CELLS, ids=COPY_IDS)
def test_every_build_cell_in_the_lesson_path_is_a_stub_with_its_check_and_a_closed_solution(
    notebook,
):
    master = notebook.parent / "instructor" / notebook.name
    assert master in LESSON_MASTERS, f"{notebook.name} has build cells but no lesson master"
    cells = nbformat.read(notebook, as_version=4).cells
    for index, build in enumerate(cells):
        if msn.BUILD_TAG not in tags(build):
            continue
        assert "raise NotImplementedError()" in build.source, build.source[:200]
        assert msn.BEGIN not in build.source and not build.outputs
        msn._stubs_inside_functions(build.source, f"{notebook.name} cell {index + 1}")
        check, details = cells[index + 1], cells[index + 2]
        assert check.cell_type == "code" and msn.CHECK_TAG in tags(check), check.source[:200]
        name = msn._built_name(build.source, check.source, f"{notebook.name} cell {index + 1}")
        verdict = msn.build_check_of(check.source, notebook.name).stub_output(name)
        assert stream_text(check) == verdict, f"{name}: the committed verdict is not the stub's"
        assert "Not written yet" in verdict and "library's" in verdict
        assert details.cell_type == "markdown"
        assert details.source.startswith(msn.SOLUTION_SUMMARY), details.source[:80]
        assert "<details open" not in details.source  # closed by default
        answer = book.solution_details_code(details.source)
        assert answer is not None and name in defined_names(answer)
        assert "NotImplementedError" not in answer


def test_at_least_forty_build_cells_across_chapters_01_to_05():
    count = sum(
        len(msn.lesson_builds(nbformat.read(m, as_version=4)))
        for m in LESSON_MASTERS
        if m.parent.parent.name.startswith(FIRST_CHAPTERS)
    )
    assert count >= MIN_BUILD_CELLS, f"{count} build cells in chapters 01-05"


def test_nbval_runs_the_lesson_copies_here_and_the_masters_in_ci_lesson_masters():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    ignored = {Path(p).resolve() for p in root_conftest.collect_ignore}
    for master in LESSON_MASTERS:
        assert master.resolve() in ignored
        assert msn.student_path(master).resolve() not in ignored
    for master in msn.master_notebooks():  # exercise masters: the other way round
        assert master.resolve() not in ignored
    listed = msn_stdout(["--lesson-masters"]).splitlines()
    assert listed == [m.relative_to(ROOT).as_posix() for m in LESSON_MASTERS]
    script = (ROOT / ".ci" / "lesson-masters").read_text(encoding="utf-8")
    code = [ln.strip() for ln in script.splitlines() if not ln.lstrip().startswith("#")]
    assert any("make_student_notebooks.py --lesson-masters" in ln for ln in code)
    assert any(ln.startswith("python -m pytest") and '"${masters[@]}"' in ln for ln in code)
    run = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    run = [ln for ln in run if ln and not ln.startswith("#")]
    calls = [i for i, ln in enumerate(run) if ln == "bash .ci/lesson-masters"]
    ruff = [i for i, ln in enumerate(run) if "ruff check" in ln]
    assert calls and ruff and calls[0] < ruff[0], ".ci/run must call .ci/lesson-masters"
    assert os.access(ROOT / ".ci" / "lesson-masters", os.X_OK)


def msn_stdout(argv: list[str]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert msn.main(argv) == 0
    return out.getvalue()


# ---------------------------------------------------------------- a synthetic lesson

CHECKS = """
from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import expect, run_learner_code


def _probe_double(candidate):
    for x in (3, 0, -2):
        got = run_learner_code(candidate, x)
        expect(got == 2 * x, f"{candidate.__name__}({x}): got {got}, expected {2 * x}")
    return "twice x, negatives included."


def double(x):
    return 2 * x


check_double = BuildCheck(
    _probe_double, fallback=double, fallback_name="double", todo="return twice x."
)
"""
ANSWER_BODY = "    return x + x\n"
BUILD = (
    "def my_double(x):\n"
    '    """Twice x (an int)."""\n'
    "    y = x\n"
    f"    {msn.BEGIN}\n{ANSWER_BODY}    {msn.END}\n"
)
CHECK = "from synthetic_checks import check_double\nmy_double = check_double(my_double)"


def synthetic_master() -> nbformat.NotebookNode:
    code, md, out = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell, nbformat.v4.new_output
    return nbformat.v4.new_notebook(
        cells=[
            md("# A lesson\n\n## Build it yourself: doubling"),
            md("Instructor note: the master copy.", metadata={"tags": ["instructor"]}),
            code(
                "print('before')",
                execution_count=1,
                outputs=[out("stream", name="stdout", text="before\n")],
            ),
            code(BUILD, execution_count=2, metadata={"tags": [msn.BUILD_TAG]}),
            code(
                CHECK,
                execution_count=3,
                metadata={"tags": [msn.CHECK_TAG]},
                outputs=[out("stream", name="stdout", text="✓ Correct! twice x.\n")],
            ),
            code(
                "my_double(21)",
                execution_count=4,
                outputs=[out("execute_result", data={"text/plain": "42"}, execution_count=4)],
            ),
            md("## Recap\n\nYou wrote `my_double`."),
        ]
    )


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course root in tmp_path with one lesson master and its checks module importable."""
    (tmp_path / "synthetic_checks.py").write_text(CHECKS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "synthetic_checks", raising=False)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    instructor = tmp_path / "chapters" / "09_x" / "instructor"
    instructor.mkdir(parents=True)
    nbformat.write(synthetic_master(), instructor / "01_lesson.ipynb")
    monkeypatch.setattr(msn, "ROOT", tmp_path)
    return instructor / "01_lesson.ipynb"


def test_a_lesson_master_round_trips_through_the_generator(course):
    master = course
    assert msn.lesson_masters() == [master] and msn.master_notebooks() == []
    assert msn.main(["--check"]) == 1
    assert msn.main([]) == 0 and msn.main(["--check"]) == 0
    before = nbformat.read(master, as_version=4)
    copy = nbformat.read(master.parent.parent / master.name, as_version=4)
    sources = [c.source for c in copy.cells]
    assert not any("master copy" in s for s in sources), "instructor cells are dropped"
    build = next(c for c in copy.cells if msn.BUILD_TAG in tags(c))
    assert build.source == (
        "def my_double(x):\n"
        '    """Twice x (an int)."""\n'
        "    y = x\n"
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()\n"
    )
    assert build.outputs == [] and build.execution_count is None
    at = copy.cells.index(build)
    check, details = copy.cells[at + 1], copy.cells[at + 2]
    import synthetic_checks

    assert stream_text(check) == synthetic_checks.check_double.stub_output("my_double")
    assert stream_text(check).startswith("· Not written yet: `my_double` — return twice x.")
    assert details.cell_type == "markdown"
    assert details.source == (
        "<details><summary>Show a solution</summary>\n\n```python\n"
        'def my_double(x):\n    """Twice x (an int)."""\n    y = x\n    return x + x\n'
        "```\n\n</details>"
    )
    assert book.solution_details_code(details.source) == msn.build_answers(master)["my_double"]
    # every other cell is the master's, outputs included
    kept = [
        c for c in before.cells if not {msn.BUILD_TAG, msn.CHECK_TAG, "instructor"} & set(tags(c))
    ]
    others = [c for c in copy.cells if c is not build and c is not check and c is not details]
    assert [(c.source, c.get("outputs")) for c in others] == [
        (c.source, c.get("outputs")) for c in kept
    ]
    solutions = (master.parent.parent / "solutions" / "01_lesson.md").read_text(encoding="utf-8")
    assert "return x + x" in solutions and msn.BEGIN not in solutions
    assert "## Build it yourself: doubling (`my_double`)" in solutions
    # the master changes -> the copy is stale and --check says so
    edited = synthetic_master()
    edited.cells[3].source = BUILD.replace("x + x", "2 * x")
    nbformat.write(edited, master)
    assert msn.main(["--check"]) == 1


def test_build_answers_gives_each_name_its_whole_cell(course):
    assert msn.build_answers(course) == {
        "my_double": 'def my_double(x):\n    """Twice x (an int)."""\n    y = x\n    return x + x'
    }


def test_lesson_masters_stay_out_of_the_graded_course(course, tmp_path):
    """An exercise master beside the lesson master: only it enters the nbgrader course."""
    exercise = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                f"def f():\n    {msn.BEGIN}\n    return 1\n    {msn.END}\n",
                metadata={"nbgrader": {"solution": True, "grade": False, "locked": False}},
            )
        ]
    )
    nbformat.write(exercise, course.parent / "05_exercises.ipynb")
    assert msn.master_notebooks() == [course.parent / "05_exercises.ipynb"]
    assert msn.lesson_masters() == [course]
    out = tmp_path / "graded"
    msn_stdout(["--nbgrader-course", str(out)])
    assert sorted(p.name for p in (out / "source" / "09_x").iterdir()) == ["05_exercises.ipynb"]
    import instructor_pages

    assert instructor_pages.master_notebooks(tmp_path) == [course.parent / "05_exercises.ipynb"]


def _broken(cells: list[nbformat.NotebookNode]) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=cells)


BUILD_CELL = nbformat.v4.new_code_cell(BUILD, metadata={"tags": [msn.BUILD_TAG]})
CHECK_CELL = nbformat.v4.new_code_cell(CHECK, metadata={"tags": [msn.CHECK_TAG]})


@pytest.mark.parametrize(
    "cells, message",
    [
        (
            [nbformat.v4.new_code_cell("def f():\n    return 1", metadata={"tags": ["build"]})],
            "without a solution region",
        ),
        ([BUILD_CELL], "must be followed by its check"),
        (
            [BUILD_CELL, nbformat.v4.new_code_cell("my_double(1)"), CHECK_CELL],
            "followed by its check",
        ),
        ([nbformat.v4.new_code_cell("x = 1"), CHECK_CELL], "must come right after"),
        (
            [
                nbformat.v4.new_code_cell(
                    f"{msn.BEGIN}\nx = 1\n{msn.END}", metadata={"tags": ["build"]}
                ),
                CHECK_CELL,
            ],
            "inside a function",
        ),
        (
            [
                nbformat.v4.new_code_cell(
                    f"class M:\n    {msn.BEGIN}\n    x = 1\n    {msn.END}\n",
                    metadata={"tags": ["build"]},
                ),
                CHECK_CELL,
            ],
            "inside a function",
        ),
        (
            [BUILD_CELL, nbformat.v4.new_code_cell(f"x = 1\n{msn.BEGIN}\nx = 2\n{msn.END}")],
            "followed by its check",
        ),
        (
            [
                nbformat.v4.new_code_cell("y = 1", metadata={"tags": ["build-check"]}),
            ],
            "must come right after",
        ),
        (
            [
                BUILD_CELL,
                nbformat.v4.new_code_cell("print(my_double)", metadata={"tags": ["build-check"]}),
            ],
            "must import its check",
        ),
    ],
    ids=[
        "no-region",
        "no-check",
        "check-not-next",
        "check-without-build",
        "top-level-region",
        "class-body-region",
        "region-outside-build",
        "lonely-check",
        "check-without-import",
    ],
)
def test_a_malformed_lesson_master_is_named_not_generated(course, cells, message):
    with pytest.raises(msn.MasterError, match=message):
        msn.lesson_version(_broken(cells))


def test_the_tool_names_the_master_and_writes_nothing(course, capsys):
    nbformat.write(_broken([BUILD_CELL]), course)
    assert msn.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "chapters/09_x/instructor/01_lesson.ipynb" in out
    assert "(nothing was written)" in out and "cell 1" in out
    assert not (course.parent.parent / course.name).exists()


def test_an_untouched_copy_runs_to_the_end_with_the_library_standing_in(course, monkeypatch):
    """Run All on the stub copy completes, prints the committed verdict and the later cell uses
    the library's version; with the solution pasted in, the check accepts it."""
    from nbclient import NotebookClient

    assert msn.main([]) == 0
    copy_path = course.parent.parent / course.name
    monkeypatch.setenv("COURSE_FAST", "1")

    def run(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
        NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(course.parent.parent)}},
        ).execute()  # raises CellExecutionError at the first cell that fails
        return nb

    committed = nbformat.read(copy_path, as_version=4)
    ran = run(nbformat.read(copy_path, as_version=4))
    check = next(i for i, c in enumerate(ran.cells) if msn.CHECK_TAG in tags(c))
    assert stream_text(ran.cells[check]) == stream_text(committed.cells[check])
    last = [c for c in ran.cells if c.cell_type == "code"][-1]
    assert last.outputs[0]["data"]["text/plain"] == "42"
    # the learner pastes the solution in: the check accepts it and the rest uses theirs
    solved = nbformat.read(copy_path, as_version=4)
    solved.cells[check - 1].source = book.solution_details_code(solved.cells[check + 1].source)
    assert stream_text(run(solved).cells[check]).startswith("✓ Correct!")


def test_a_wrong_answer_gets_the_checks_message_and_the_lesson_goes_on(course, capsys):
    import synthetic_checks

    def my_double(x):
        return abs(2 * x)  # right for x >= 0 only

    assert synthetic_checks.check_double(my_double) is synthetic_checks.double
    assert capsys.readouterr().out == (
        "✗ my_double(-2): got 4, expected -4\n"
        "The rest of this notebook uses the library's `double` until yours passes.\n"
    )


# ---------------------------------------------------------------- the book


def test_the_book_shows_the_stub_and_collapses_the_solution():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Build it yourself: doubling"),
            nbformat.v4.new_code_cell("import math  # given, to read"),
            nbformat.v4.new_code_cell(msn.stub_source(BUILD), metadata={"tags": ["build"]}),
            nbformat.v4.new_code_cell(CHECK, metadata={"tags": ["build-check"]}),
            nbformat.v4.new_markdown_cell(
                msn.SOLUTION_DETAILS.format(code="def my_double(x):\n    return x + x")
            ),
            nbformat.v4.new_code_cell("my_double(2)"),
        ]
    )
    notebook = nbformat.from_dict(nb)
    assert book.mark_solutions(notebook) == 1
    hidden = [c for c in notebook.cells if "hide-input" in c.get("metadata", {}).get("tags", [])]
    assert [c["source"] for c in hidden] == ["def my_double(x):\n    return x + x"]
    assert hidden[0]["cell_type"] == "code" and hidden[0]["outputs"] == []
    assert notebook.cells[2]["metadata"]["tags"] == ["build"], "the stub is shown"
    assert re.search(r"raise NotImplementedError", notebook.cells[2]["source"])


def test_a_check_never_stops_run_all_even_when_the_answer_breaks_its_probe(capsys):
    """An answer of the wrong type can break the probe itself (a tuple has no `.shape`): the
    check still prints one verdict and hands back the library's version."""
    from course_lib.exercises.build import BuildCheck
    from course_lib.exercises.core import run_learner_code

    def probe(candidate):
        return f"shape {tuple(run_learner_code(candidate, 2).shape)}"

    check = BuildCheck(probe, fallback=len, fallback_name="len", todo="return a tensor.")

    def my_thing(x):
        return (x, x)

    assert check(my_thing) is len
    assert capsys.readouterr().out == (
        "✗ checking `my_thing` stopped at AttributeError: 'tuple' object has no attribute "
        "'shape' (compare what it returns with its docstring)\n"
        "The rest of this notebook uses the library's `len` until yours passes.\n"
    )
