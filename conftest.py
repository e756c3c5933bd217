"""Repository-wide pytest setup: notebooks run in fast mode; generated student copies are not run
by nbval (their exercises are stubs on purpose; tests/test_student_notebooks.py checks them)."""

import os
from pathlib import Path

# Kernels started by nbval inherit this environment.
os.environ.setdefault("COURSE_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TQDM_MININTERVAL", "5")

collect_ignore_glob = ["experiments/*", "benchmarks/*"]
# The student copy of each exercise master (chapters/<ch>/instructor/X.ipynb -> chapters/<ch>/X.ipynb)
# is all stubs; nbval runs the solved master instead.
collect_ignore = [
    str(master.parent.parent / master.name)
    for master in Path(__file__).parent.glob("chapters/*/instructor/*.ipynb")
]
