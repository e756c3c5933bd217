"""The suite never reads or writes the folder it is started from: a newcomer who ran the README's
command 1 has `runs/tiny/checkpoint` in the repository root, and command 2 must still pass."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from training_helpers import tiny_mlm

from course_lib.training.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones included) with the SHA-256 of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_each_test_runs_in_an_empty_folder_of_its_own(tmp_path):
    here = Path.cwd()
    assert here != ROOT and ROOT not in here.parents
    assert here != tmp_path and not any(here.iterdir())


def test_a_leftover_run_in_the_starting_folder_changes_no_result(tmp_path):
    """The two tests that failed for a newcomer (a missing corpus; another family's checkpoint)
    and the command line's end-to-end run pass when pytest starts in a folder holding a finished
    `runs/tiny` and a cache folder, and leave every byte of it as it was."""
    start = tmp_path / "newcomer"
    save_checkpoint(start / "runs" / "tiny" / "checkpoint", tiny_mlm(), state={"step": 3000})
    (start / ".course_cache").mkdir()
    (start / ".course_cache" / "corpus.json").write_text("{}")
    before = snapshot(start)
    tests = ROOT / "tests" / "test_cli.py"
    selection = "missing_corpus or another_family or end_to_end or unknown_family"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tests), "-k", selection, "-q", "-n", "0"]
        + ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-p", "no:cacheprovider"]
        + ["--basetemp", str(tmp_path / "basetemp")],
        cwd=start,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\b4 passed", proc.stdout), proc.stdout[-1000:]
    assert snapshot(start) == before
