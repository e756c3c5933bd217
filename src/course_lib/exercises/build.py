"""The instant checks of the lessons' "Build it yourself" cells.

A lesson's build cell is the learner's: a stub (signature, docstring, `raise NotImplementedError`)
that they fill in. The cell after it calls a `check_*` function built on `build_check`, which runs
the learner's code against the library on fresh inputs and prints one or two lines:

    ✓ Correct! ...                                  -> the rest of the notebook uses the learner's
    ✗ <what is wrong, with the numbers>             -> ... uses the library's version
    · Not written yet: <what to write>              -> ... uses the library's version

It never raises, so "Run All" goes on for a learner who skips a cell (issue #38): the check returns
the object the rest of the notebook should use, and the lesson assigns it back:

    my_position_ids = check_position_ids(my_position_ids)

A probe is a function `probe(candidate)` that raises `ExerciseError` (use `expect` and
`run_learner_code` from `course_lib.exercises.core`) with a message naming the first mistake it
finds, and returns a short success message (or None) when the candidate is right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from course_lib.exercises.core import ExerciseError, NotWrittenYet

T = TypeVar("T")

FALLBACK = "The rest of this notebook uses the library's `{fallback}` until yours passes."


def build_check(
    candidate: T,
    probe: Callable[[Any], str | None],
    *,
    fallback: T,
    fallback_name: str,
    todo: str,
) -> T:
    """Run `probe(candidate)`; print one verdict line (plus where the notebook goes on from) and
    return `candidate` when it passes, else `fallback` (the library's version of the same thing).

    `todo` says in a sentence what to write; it is shown when the candidate is still the stub."""
    name = getattr(candidate, "__name__", type(candidate).__name__)
    try:
        message = probe(candidate)
    except NotWrittenYet:
        print(f"· Not written yet: `{name}` — {todo}")
        print(FALLBACK.format(fallback=fallback_name))
        return fallback
    except ExerciseError as err:
        print(f"✗ {err}")
        print(FALLBACK.format(fallback=fallback_name))
        return fallback
    print(f"✓ Correct! {message or ''}".rstrip())
    return candidate


def is_stub_output(text: str) -> bool:
    """True when `text` (a check cell's printed output) is the verdict on an unwritten stub."""
    return text.startswith("· Not written yet:")
