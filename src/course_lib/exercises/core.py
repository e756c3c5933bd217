"""Shared machinery for the exercise checkers."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from course_lib.labels import IGNORE_INDEX

_LIBRARY = Path(__file__).resolve().parents[1]  # src/course_lib
_Config = TypeVar("_Config")

# The letters of the papers' parameter formulas and the config fields they stand for.
PAPER_LETTERS = {
    "V": "vocab_size",
    "E": "embedding_size",
    "H": "hidden_size",
    "L": "num_hidden_layers",
    "I": "intermediate_size",
    "P": "max_position_embeddings",
    "T": "type_vocab_size",
}


class ExerciseError(AssertionError):
    """The learner's answer is not right yet; the message says what to look at.

    In Jupyter a failure shows as one line, `ExerciseError: <message>`, with no traceback into
    the checker (whose source would give the answer away); `str(err)` is the plain message for
    scripts and tests.
    """

    def _render_traceback_(self) -> list[str]:
        """IPython calls this instead of formatting a traceback: the message only."""
        return [f"{type(self).__name__}: {self}"]


def _where_in_learner_code(err: BaseException) -> str:
    """' (line N: `source`)' for the deepest frame of `err` outside the library and installed
    packages, i.e. the learner's own line; '' when there is none."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if not Path(f.filename).resolve().is_relative_to(_LIBRARY)
        and "site-packages" not in f.filename
        and "/lib/python" not in f.filename
    ]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f" (line {frame.lineno} of your code{code})"


def run_learner_code(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function, turning an unfinished stub or a crash into one clear line."""
    name = getattr(fn, "__name__", fn)
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise ExerciseError(
            f"`{name}` is not implemented yet: replace `raise NotImplementedError()` with your code."
        ) from None
    except ExerciseError:
        raise
    except Exception as err:  # a crash in learner code is feedback too
        raise ExerciseError(
            f"`{name}` raised {type(err).__name__}: {err}{_where_in_learner_code(err)}"
        ) from err


def expect(condition: bool, message: str) -> None:
    """Raise ExerciseError(message) unless `condition` holds."""
    if not condition:
        raise ExerciseError(message)


def config_from_letters(config_class: Callable[..., _Config], **fields: Any) -> _Config:
    """A config from the papers' letters (V=vocabulary, H=hidden size, ...) and other fields."""
    return config_class(**{PAPER_LETTERS.get(name, name): v for name, v in fields.items()})


def expect_ignore_index_in_labels_only(
    inputs: Any, labels: Any, swapped: str, never: str, in_inputs: str
) -> None:
    """The first checks of a masking exercise: labels hold -100 somewhere, the inputs nowhere.

    The message is `swapped` when only the inputs hold -100, `never` when neither does, and
    `in_inputs` when both do."""
    if not (labels == IGNORE_INDEX).any():
        raise ExerciseError(swapped if (inputs == IGNORE_INDEX).any() else never)
    expect(not (inputs == IGNORE_INDEX).any(), in_inputs)


def expect_tensor(value: Any, name: str) -> torch.Tensor:
    """`value` itself if it is a tensor; else the message that `name` must return one."""
    expect(
        isinstance(value, torch.Tensor),
        f"`{name}` must return a torch.Tensor, got {type(value).__name__}.",
    )
    return value


def expect_keep_mask(got: Any, batch: int, length: int) -> None:
    """The first checks of an attention-mask exercise, with one message per way to miss: a
    tensor of shape (batch, length, length), one [query, key] matrix per sequence, of dtype bool
    (True = the query may attend the key)."""
    expect(isinstance(got, torch.Tensor), f"return a tensor, got {type(got).__name__}.")
    expect(
        tuple(got.shape) == (batch, length, length),
        f"return one entry per (query, key) pair of each sequence: expected (B, T, T) = "
        f"{(batch, length, length)}, got {tuple(got.shape)}.",
    )
    expect(
        got.dtype == torch.bool,
        f"return a bool tensor (a boolean keep-mask: True = may attend), got dtype {got.dtype}.",
    )


def passed(message: str) -> None:
    print(f"Correct! {message}")
