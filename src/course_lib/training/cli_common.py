"""What the `course` command's modules share: the one-line refusal and the checkpoint check.

course_lib.training.cli (pretrain, fill-mask, evaluate, detect) and
course_lib.training.export_cli (export, import) both raise UsageError and both check a checkpoint
folder before reading it. The two live here, imported by both, so that neither command module
imports the other at load time (cli registers export_cli's subcommands; export_cli imports
nothing from cli); course_lib.training.cli re-exports both names.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """A mistake in the command line: reported as one line, exit code 2."""


def checkpoint_state(path: str | Path, family: str | None, resume: bool = False) -> dict[str, Any]:
    """The JSON state of a checkpoint, checked to exist and (optionally) to be of `family`;
    with `resume`, also to hold what resuming needs."""
    from course_lib.training.checkpoint import CheckpointError, read_state
    from course_lib.training.recipes import FAMILIES

    path = Path(path)
    try:
        state = read_state(path)
    except (FileNotFoundError, CheckpointError) as err:
        if not path.exists() and "rename" not in str(err):  # not a recoverable interrupted save
            hint = "; run without --resume to start a new run" if resume else ""
            raise UsageError(f"checkpoint {str(path)!r} does not exist{hint}") from err
        raise UsageError(str(err).rstrip(".")) from err
    config = state.get("config")
    if not isinstance(config, dict):
        raise UsageError(
            f"{path / 'trainer_state.json'} has no model config, so the model cannot be rebuilt; "
            "use a complete checkpoint written by course pretrain"
        )
    model_type = config.get("model_type")
    if family is not None:
        expected = FAMILIES[family].config_cls().model_type
        if model_type != expected:
            raise UsageError(
                f"checkpoint {str(path)!r} holds a {model_type} model, not {family}; "
                f"use --family {model_type} or another checkpoint"
            )
    if not (path / "tokenizer.json").is_file():
        raise UsageError(
            f"checkpoint {str(path)!r} has no tokenizer.json; it was not written by course pretrain"
        )
    if resume:
        needed = {"training_config": dict, "step": int, "elapsed_s": (int, float), "data": dict}
        needed.update(history=list, optimizer=dict)
        for key, kind in needed.items():
            value = state.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                what = "no" if value is None else "a damaged"
                raise UsageError(
                    f"{path / 'trainer_state.json'} has {what} {key}, so the run cannot be "
                    "resumed (it was saved for inference or is damaged); start a new run with "
                    "another --output-dir, or use the checkpoint with fill-mask/evaluate"
                )
        run = state.get("run", {})
        if not isinstance(run, dict) or not isinstance(run.get("corpus", ""), str):
            raise UsageError(
                f"{path / 'trainer_state.json'} holds a damaged run entry (which corpus and "
                "recipe), so the run cannot be resumed; start a new run with another --output-dir"
            )
        for key in ("step", "elapsed_s"):
            if not (math.isfinite(state[key]) and state[key] >= 0):
                raise UsageError(
                    f"{path / 'trainer_state.json'} holds {key}={state[key]}, so the run cannot "
                    "be resumed (it is damaged); start a new run with another --output-dir"
                )
        try:
            from course_lib.training.engine import TrainingConfig

            TrainingConfig(**state["training_config"])
        except (TypeError, ValueError) as err:
            raise UsageError(
                f"{path / 'trainer_state.json'} holds an invalid training_config "
                f"({str(err).rstrip('.')}), so the run cannot be resumed; start a new run with "
                "another --output-dir"
            ) from err
    return state
