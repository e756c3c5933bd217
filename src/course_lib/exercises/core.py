"""Shared machinery for the exercise checkers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ExerciseError(AssertionError):
    """The learner's answer is not right yet; the message says what to look at."""


def run_learner_code(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function, turning an unfinished stub into a friendly message."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise ExerciseError(
            f"`{getattr(fn, '__name__', fn)}` is not implemented yet: replace "
            f"`raise NotImplementedError()` with your code."
        ) from None
    except ExerciseError:
        raise
    except Exception as err:  # a crash in learner code is feedback too
        raise ExerciseError(
            f"`{getattr(fn, '__name__', fn)}` raised {type(err).__name__}: {err}"
        ) from err


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ExerciseError(message)


def passed(message: str) -> None:
    print(f"Correct! {message}")
