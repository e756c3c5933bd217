"""Repository-wide pytest setup: notebooks run in fast mode; generated student copies are not run
by nbval (their exercises are stubs on purpose; tests/test_student_notebooks.py checks them)."""

import os

# Kernels started by nbval inherit this environment.
os.environ.setdefault("COURSE_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TQDM_MININTERVAL", "5")

collect_ignore_glob = ["chapters/*/student/*", "experiments/*", "benchmarks/*"]
