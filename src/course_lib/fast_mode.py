"""Fast mode: CI and impatient learners set COURSE_FAST=1 to shrink every notebook's workload.

Committed notebook outputs come from full mode; nbval runs the same notebooks in fast mode.
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")


def is_fast() -> bool:
    """True when the environment variable COURSE_FAST is set to anything but '', '0' or 'false'."""
    return os.environ.get("COURSE_FAST", "0").strip().lower() not in ("", "0", "false", "no")


def pick(full: T, fast: T) -> T:
    """`full` normally, `fast` in fast mode: `steps = pick(full=2000, fast=40)`."""
    return fast if is_fast() else full
