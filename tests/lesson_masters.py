"""The master's answer to a lesson build cell, for tests/test_lesson_checks_*.py: the source of
the build cell (tagged `build`) that defines a name, exec'd in a fresh namespace."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def _answers(master: Path) -> dict[str, str]:
    """{name: source} of the build cells of `master`, as the generator reads them."""
    from make_student_notebooks import build_answers  # tools/ is on sys.path above

    return build_answers(master)


def master_answer(chapter: str, notebook: str, name: str, **namespace: Any) -> Any:
    """The object `name` as the master notebook's build cell defines it (its answer region in),
    exec'd with torch, nn, F, math and `namespace` available."""
    master = ROOT / "chapters" / chapter / "instructor" / notebook
    source = _answers(master)[name]
    scope: dict[str, Any] = {"torch": torch, "nn": nn, "F": F, "math": math, **namespace}
    exec(compile(source, f"{master.name}:{name}", "exec"), scope)
    return scope[name]
