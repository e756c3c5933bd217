"""The instant checks of the lessons' "Build it yourself" cells.

A lesson's build cell is the learner's: a stub (signature, docstring, `raise NotImplementedError`)
that they fill in. The cell after it calls a `check_*` function built on `build_check`, which runs
the learner's code against the library on fresh inputs and prints one or two lines:

    ✓ Correct! ...                                  -> the rest of the notebook uses the learner's
    ✗ <what is wrong, with the numbers>             -> ... uses the library's version
    · Not written yet: <what to write>              -> ... uses the library's version

It never raises, so "Run All" goes on for a learner who skips a cell (issue #38): the check returns
the object the rest of the notebook should use, and the lesson assigns it back:

    from course_lib.exercises.lessons_bert import check_position_ids
    my_position_ids = check_position_ids(my_position_ids)

where `check_position_ids = BuildCheck(probe, fallback=..., fallback_name=..., todo=...)`.

A probe is a function `probe(candidate)` that raises `ExerciseError` (use `expect` and
`run_learner_code` from `course_lib.exercises.core`) with a message naming the first mistake it
finds, and returns a short success message (or None) when the candidate is right.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from course_lib.exercises.core import ExerciseError, NotWrittenYet

T = TypeVar("T")

FALLBACK = "The rest of this notebook uses the library's `{fallback}` until yours passes."


class BuildCheck:
    """The check of one build cell: `probe` finds the first mistake, `fallback` (the library's
    version, named `fallback_name`) stands in when the learner's is missing or wrong, and `todo`
    says in a sentence what to write (shown while the cell is still the stub).

    Calling it prints the verdict and returns what the rest of the notebook should use;
    `stub_output(name)` is the exact text it prints for an unwritten stub called `name` (the
    lesson copies carry it as the check cell's committed output)."""

    def __init__(
        self,
        probe: Callable[[Any], str | None],
        *,
        fallback: Any,
        fallback_name: str,
        todo: str,
    ) -> None:
        self.probe = probe
        self.fallback = fallback
        self.fallback_name = fallback_name
        self.todo = todo

    def stub_output(self, name: str) -> str:
        """What the check prints when `name` is still the stub."""
        return f"· Not written yet: `{name}` — {self.todo}\n{self._fallback_line()}\n"

    def _fallback_line(self) -> str:
        return FALLBACK.format(fallback=self.fallback_name)

    def __call__(self, candidate: T) -> T:
        """Run the probe on `candidate`; print one verdict (and, unless it passed, where the
        notebook goes on from); return `candidate` if it passed, else the library's fallback."""
        name = getattr(candidate, "__name__", type(candidate).__name__)
        try:
            with _own_random_state():
                message = self.probe(candidate)
        except NotWrittenYet:
            print(self.stub_output(name), end="")
            return self.fallback
        except ExerciseError as err:
            print(f"✗ {err}")
            print(self._fallback_line())
            return self.fallback
        except Exception as err:  # what the learner's code returned broke the probe itself
            print(
                f"✗ checking `{name}` stopped at {type(err).__name__}: {err} "
                "(compare what it returns with its docstring)"
            )
            print(self._fallback_line())
            return self.fallback
        print(f"✓ Correct! {message or ''}".rstrip())
        return candidate


@contextlib.contextmanager
def _own_random_state() -> Iterator[None]:
    """torch's and Python's global random state saved and restored around a probe: a check draws
    fresh inputs and builds modules, and the cells after it must draw the same numbers as without
    it (the notebook's printed results stay the same)."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(state)


def is_stub_output(text: str) -> bool:
    """True when `text` (a check cell's printed output) is the verdict on an unwritten stub."""
    return text.startswith("· Not written yet:")
