"""Shared machinery for the exercise checkers."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
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
        return [f"ExerciseError: {self}"]  # subclasses too: the learner sees one kind of failure


class NotWrittenYet(ExerciseError):
    """The learner's function is still the stub: calling it raised NotImplementedError."""


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
        raise NotWrittenYet(
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


@contextlib.contextmanager
def at_edge(description: str) -> Iterator[None]:
    """Run a check on an edge case (a batch of one, left padding, a tiny vocabulary...): a
    failure inside says which edge it is, `description: <message>`, so an answer right only at
    the typical sizes learns where it breaks."""
    try:
        yield
    except NotWrittenYet:
        raise
    except ExerciseError as err:
        raise ExerciseError(f"{description}: {err}") from err


def expect_unchanged(before: torch.Tensor, after: Any, name: str, fn: str) -> None:
    """The learner's function must leave its input `name` as it was (the caller still uses it):
    `before` is a copy taken before the call, `after` the tensor that was passed."""
    if isinstance(after, torch.Tensor) and after.shape == before.shape:
        changed = int((after != before).sum())
        expect(
            changed == 0,
            f"`{fn}` modified its input `{name}` in place ({changed} entries changed): the caller "
            f"still needs the original. Work on a copy ({name}.clone()) and return new tensors.",
        )


def passed(message: str) -> None:
    print(f"Correct! {message}")


# ----- graded use: the answer must be the learner's own work -------------------------------------

_SITE = ("site-packages", "/lib/python", "<frozen")
_EXERCISES = Path(__file__).resolve().parent


def _is_learner_code(code: Any) -> bool:
    """Code the learner wrote (a notebook cell), not the library, an installed package or Python."""
    name = code.co_filename
    return not (name.startswith(str(_LIBRARY)) or any(part in name for part in _SITE))


def _resolve(spec: Any) -> list[Any]:
    """The objects `spec` names: itself, or 'module' / 'module:attr.attr' imported by name."""
    if not isinstance(spec, str):
        return [spec]
    module_name, _, attrs = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in filter(None, attrs.split(".")):
        obj = getattr(obj, attr)
    return [obj]


def _forbidden_codes(specs: Sequence[Any]) -> tuple[dict[Any, str], dict[str, str], dict[int, str]]:
    """What calling counts as using the library's implementation, by kind: Python code objects
    (functions, the methods of classes), whole module files, and C functions (by id)."""
    codes: dict[Any, str] = {}
    files: dict[str, str] = {}
    builtins: dict[int, str] = {}
    for spec in specs:
        for obj in _resolve(spec):
            label = f"{getattr(obj, '__module__', '') or ''}.{getattr(obj, '__qualname__', '')}"
            if isinstance(obj, types.ModuleType):
                files[obj.__file__] = files[str(Path(obj.__file__).resolve())] = obj.__name__
            elif isinstance(obj, type):
                for member in vars(obj).values():
                    fn = getattr(member, "__func__", member)
                    if isinstance(fn, types.FunctionType):
                        codes[fn.__code__] = label
            elif isinstance(getattr(obj, "__func__", obj), types.FunctionType):
                codes[getattr(obj, "__func__", obj).__code__] = label
            else:
                builtins[id(obj)] = label.strip(".") or repr(obj)
    # the checkers' own module-level functions (their references among them) are never allowed
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("course_lib.exercises."):
            for name, fn in vars(module).items():
                if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
                    codes.setdefault(fn.__code__, f"{module.__name__}.{name}")
    return codes, files, builtins


def library_calls(fn: Callable[..., Any], specs: Sequence[Any]) -> tuple[Callable, list[str]]:
    """`fn` wrapped so that, while it runs, every call its own code (a notebook cell, not the
    library) makes into one of `specs` is recorded by name in the returned list.

    `specs` are functions, classes (any of their methods), modules (anything defined in them),
    C functions such as `torch.nn.functional.scaled_dot_product_attention`, or such objects
    named as 'module' or 'module:attr'. The module-level functions of the checkers themselves
    (whose references are answers) are always included. Only direct calls from the learner's
    code count: the library may use these internally in what the exercise hands in (a model, a
    score function)."""
    codes, files, builtins = _forbidden_codes(specs)
    found: list[str] = []

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            caller = frame.f_back
            if caller is None or not _is_learner_code(caller.f_code):
                return
            code = frame.f_code
            hit = codes.get(code) or files.get(code.co_filename)
            if hit and hit not in found:
                found.append(hit)
        elif event == "c_call" and _is_learner_code(frame.f_code):
            hit = builtins.get(id(arg))
            if hit and hit not in found:
                found.append(hit)

    @functools.wraps(fn)
    def watched(*args: Any, **kwargs: Any) -> Any:
        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setprofile(previous)

    return watched, found


def check_own_work(fn: Callable[..., Any], checker: Callable[..., Any], *forbidden: Any) -> None:
    """Run `checker(fn)` again while watching `fn`: if the answer calls the library's own
    implementation of what the exercise asks for (any of `forbidden`, or a checker's reference),
    it fails with the name of what it called, whatever the checker says.

    The checkers' visible checks cannot tell a hand-written answer from a call to
    `course_lib`'s version; graded notebooks run this as a hidden test."""
    watched, found = library_calls(fn, forbidden)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            checker(watched)
    except ExerciseError:
        if not found:
            raise
    if found:
        name = getattr(fn, "__name__", "your function")
        raise ExerciseError(
            f"`{name}` calls a ready-made implementation of what it should compute "
            f"({', '.join(found)}): write it yourself, as the exercise asks."
        )
