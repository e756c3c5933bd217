"""The master's answer to a lesson build cell, for tests/test_lesson_checks_*.py: the source of
the build cell (tagged `build`) that defines a name, exec'd in a fresh namespace."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def _answers(master: Path) -> dict[str, str]:
    """{name: source} of the build cells of `master` (the tool's build_answers when it has one)."""
    try:
        from make_student_notebooks import build_answers  # type: ignore[attr-defined]
    except ImportError:
        build_answers = None
    if build_answers is not None:
        return build_answers(master)
    nb = nbformat.read(master, as_version=4)
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "build" in cell.metadata.get("tags", []):
            for name in re.findall(r"^(?:def|class) (\w+)", cell.source, re.M):
                found[name] = cell.source
    return found


def master_answer(chapter: str, notebook: str, name: str, **namespace: Any) -> Any:
    """The object `name` as the master notebook's build cell defines it (its answer region in),
    exec'd with torch, nn, F, math and `namespace` available."""
    master = ROOT / "chapters" / chapter / "instructor" / notebook
    source = _answers(master)[name]
    scope: dict[str, Any] = {"torch": torch, "nn": nn, "F": F, "math": math, **namespace}
    exec(compile(source, f"{master.name}:{name}", "exec"), scope)
    return scope[name]
