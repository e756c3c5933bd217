"""Repository-wide pytest setup: notebooks run in fast mode; the generated copies of exercise
masters are not run by nbval (their exercises are stubs on purpose; tests/test_student_notebooks.py
checks them), the solved exercise masters are. For a lesson master it is the other way round: the
untouched lesson copy is the learner's path (Run All must complete with the library's versions
standing in), so it runs here; the solved lesson masters run in CI's second step,
`.ci/lesson-masters` (naming a notebook on the command line runs it whatever is ignored here).

The suite runs in parallel (pytest-xdist, `-n auto --dist loadfile` in pyproject.toml: a notebook's
cells, and a module's shared fixtures, stay in one worker and in order). Each worker, and each
notebook kernel it starts, gets its share of the CPUs as threads: two workers with two OpenMP
threads each on two cores wait for each other at every op of a tiny model."""

import importlib.util
import os
from pathlib import Path


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
if _workers > 1:  # set before torch is imported here or in a kernel (both read it at start)
    _share = str(max(1, _cpus() // _workers))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ.setdefault(_name, _share)

# Kernels started by nbval inherit this environment.
os.environ.setdefault("COURSE_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TQDM_MININTERVAL", "5")

collect_ignore_glob = ["experiments/*", "benchmarks/*"]
# Which instructor/ notebook is which is read from its content by the generator's own helpers.
_spec = importlib.util.spec_from_file_location(
    "_make_student_notebooks", Path(__file__).parent / "tools" / "make_student_notebooks.py"
)
_msn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_msn)
# The student copy of each exercise master (chapters/<ch>/instructor/X.ipynb -> chapters/<ch>/X.ipynb)
# is all stubs; nbval runs the solved master instead. Each lesson master is left to
# .ci/lesson-masters; its lesson copy runs here.
collect_ignore = [str(_msn.student_path(master)) for master in _msn.master_notebooks()]
collect_ignore += [str(master) for master in _msn.lesson_masters()]
