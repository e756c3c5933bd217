"""Checkpoints as safetensors + JSON: everything needed to resume a run bit for bit, nothing pickled.

A checkpoint is a directory:

    model.safetensors      the weights (tied tensors stored once)
    optimizer.safetensors  the optimizer's per-parameter tensors (AdamW: exp_avg, exp_avg_sq, step)
    trainer_state.json     plain data: model class and config, optimizer hyper-parameters,
                           schedule, step, data position, RNG states, metrics history

`torch.load` unpickles, and unpickling runs whatever code the file names, so a downloaded
checkpoint could take over the machine; safetensors and JSON can only ever hold data.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import random
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

FORMAT_VERSION = 1
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
TOKENIZER_FILE = "tokenizer.json"
# Everything save_checkpoint writes into a checkpoint directory, and so all it may ever remove.
CHECKPOINT_FILES = frozenset({MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, TOKENIZER_FILE})


# Tensor-name prefixes that a later version of a model renamed: (old, new). A checkpoint saved
# before the rename loads into today's model: ALBERT's SOP head was stored as `nsp_head`, the
# last linear of a classification head as `classifier.classifier`.
RENAMED_PREFIXES = (
    ("nsp_head.", "sop_head."),
    ("classifier.classifier.", "classifier.out_proj."),
    ("classifier.pre_classifier.", "classifier.dense."),  # DistilBERT, before one shared head
)


class CheckpointError(ValueError):
    """A checkpoint directory that is missing, damaged or does not fit: one line naming the file
    and the fix."""


# A write that failed because the disk (or a quota, or a file-size limit) has no room.
DISK_FULL = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file-size limit was reached"}
if hasattr(errno, "EDQUOT"):
    DISK_FULL[errno.EDQUOT] = "the disk quota is used up"


class WriteFailed(OSError):
    """A save that could not be completed (disk full, file-size limit, no permission): one line
    naming what was being written, why, and that what existed before is intact."""


def write_failure(err: BaseException) -> tuple[int | None, str] | None:
    """(errno, why in words) when `err` is a failed write (an OSError, or safetensors' or the
    tokenizers library's error wrapping one); None for anything else."""
    if isinstance(err, OSError):
        code, text = err.errno, err.strerror or str(err)
    else:
        text = str(err)
        kind = type(err).__name__
        if kind != "SafetensorError" and "os error" not in text:
            return None
        code = None
        found = text.rsplit("(os error ", 1)
        if len(found) == 2 and found[1].split(")")[0].isdigit():
            code = int(found[1].split(")")[0])
        text = os.strerror(code) if code is not None else _short(err)
    if code in DISK_FULL:
        return code, f"{DISK_FULL[code]} ({text})"
    return code, text


def write_error(err: BaseException, target: Path, kept: str) -> BaseException:
    """`err` (a failed write into `target`) as one WriteFailed line naming the fix, or `err`
    itself when it is not a failed write. `kept` says what is intact ('the previous
    checkpoint is intact')."""
    found = write_failure(err)
    if found is None:
        return err
    code, why = found
    fix = {errno.EFBIG: "raise the file-size limit (ulimit -f) or free space, and rerun"}.get(
        code, "free space and rerun" if code in DISK_FULL else "fix that and rerun"
    )
    return WriteFailed(code, f"{why} while writing {target}; {fix} — {kept}")


# --- RNG states: bytes to base64 so the JSON file stays plain text -------------------------------


def _b64(tensor: torch.Tensor) -> str:
    return base64.b64encode(tensor.cpu().numpy().tobytes()).decode("ascii")


def _unb64(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8).clone()


def get_rng_state() -> dict[str, Any]:
    """Python, NumPy, torch (and CUDA) RNG states as JSON-ready data."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `get_rng_state` returned, so dropout draws continue where they left off."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(_unb64(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(s) for s in state["cuda"]])


# --- optimizer state: tensors to safetensors, everything else to JSON ----------------------------


def _split_optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, param_state in sd["state"].items():
        for key, value in param_state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{key}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(index), {})[key] = value
    groups = []
    for group in sd["param_groups"]:
        plain = {}
        for key, value in group.items():
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:
                    raise TypeError(f"optimizer param_group[{key!r}] is a tensor; cannot save it.")
                value = value.item()
            plain[key] = list(value) if isinstance(value, tuple) else value
        groups.append(plain)
    return tensors, {"param_groups": groups, "scalars": scalars}


def _join_optimizer_state(tensors: dict[str, torch.Tensor], plain: dict) -> dict:
    state: dict[int, dict[str, Any]] = {}
    for name, tensor in tensors.items():
        _, index, key = name.split(".", 2)
        state.setdefault(int(index), {})[key] = tensor
    for index, values in plain["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    groups = []
    for group in plain["param_groups"]:
        group = dict(group)
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


# --- save / load ----------------------------------------------------------------------------------


def _model_config(model: nn.Module) -> dict[str, Any] | None:
    config = getattr(model, "config", None)
    return config.to_dict() if config is not None and hasattr(config, "to_dict") else None


# Models made of two models (ELECTRA's generator + discriminator), rebuilt from two configs: the
# class name -> the attribute whose config is stored beside the main one, as "<attribute>_config".
PAIRED_MODELS = {"ElectraPretrainer": "generator"}


def paired_configs(model: nn.Module) -> dict[str, Any]:
    """{"generator_config": ...} for a model in PAIRED_MODELS, else {}."""
    part = PAIRED_MODELS.get(type(model).__name__)
    return {f"{part}_config": _model_config(getattr(model, part))} if part else {}


def _build_model(name: str, config: Any, state: dict[str, Any], directory: Path) -> nn.Module:
    """A fresh model of class `name` for `config` (and, for a paired model, its stored second
    config)."""
    from course_lib.models import MODEL_CLASSES, config_from_dict

    if name not in PAIRED_MODELS:
        return MODEL_CLASSES[name](config)
    from course_lib.objectives.rtd import ElectraPretrainer

    key = f"{PAIRED_MODELS[name]}_config"
    try:
        second = config_from_dict(state[key])
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(
            f"{directory / STATE_FILE} holds {'no' if key not in state else 'an invalid'} {key} "
            f"({_short(err)}), so the {name} cannot be rebuilt; use a complete checkpoint "
            "written by course pretrain."
        ) from err
    return ElectraPretrainer.from_config(config, second)


def _tmp_name(directory: Path, kind: str) -> Path:
    """A sibling only this process uses: `.<name>.<kind>-<pid>` (a counter if it exists)."""
    base = directory.with_name(f".{directory.name}.{kind}-{os.getpid()}")
    candidate, n = base, 0
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _is_checkpoint(directory: Path) -> bool:
    """A complete checkpoint: its state file (written last) parses and the weights exist."""
    try:
        state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(state, dict) and "format_version" in state and (directory / MODEL_FILE).is_file()
    )


def _remove_checkpoint(directory: Path) -> None:
    """Delete a checkpoint directory this library wrote: its own files only, then the folder if
    it is empty (anything else found there is left in place). A symbolic link is never followed:
    what it points to is not the library's to delete."""
    if directory.is_symlink() or not directory.is_dir():
        return
    for name in CHECKPOINT_FILES:
        path = directory / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
    try:
        directory.rmdir()
    except OSError:
        pass


def check_checkpoint_target(directory: str | Path) -> None:
    """Raise CheckpointError unless `directory` can take a checkpoint without losing a user file:
    it must be absent, empty, or a course checkpoint holding nothing but checkpoint files."""
    directory = Path(directory)
    if directory.is_symlink():
        raise CheckpointError(
            f"{directory} is a symbolic link (to {os.readlink(directory)}); a save replaces the "
            "checkpoint folder, so it never writes through a link: copy the linked checkpoint "
            "(cp -r) or save somewhere else (nothing was changed)."
        )
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(
            f"{directory} is a file, not a checkpoint directory; pass a folder path (nothing "
            "was changed)."
        )
    if not directory.is_dir():
        return
    entries = sorted(p.name for p in directory.iterdir())
    if not entries:
        return
    foreign = [name for name in entries if name not in CHECKPOINT_FILES]
    if foreign or not (directory / STATE_FILE).is_file():
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        what = f"it holds {shown}" if foreign else f"it has no {STATE_FILE}"
        raise CheckpointError(
            f"{directory} exists and is not a course checkpoint ({what}); a checkpoint save would "
            "replace the folder, so choose a new or empty folder (nothing was changed)."
        )


def recover_checkpoint(directory: str | Path) -> Path | None:
    """After a crash between the two renames of a save, put the newest complete checkpoint back.

    A save writes `.<name>.tmp-<pid>`, renames the old `<name>` to `.<name>.old-<pid>` and the
    new one to `<name>`. If `<name>` is missing, the complete `.tmp` (the newer) or else the
    `.old` sibling is renamed back to `<name>`; returns the directory if it recovered one.
    """
    directory = Path(directory)
    if directory.exists() or directory.is_symlink() or not directory.parent.is_dir():
        return None
    siblings = [
        p
        for p in directory.parent.glob(f".{directory.name}.*-*")
        if p.is_dir() and not p.is_symlink()  # a link is not a save's temporary: never moved
    ]

    def newest(kind: str) -> Path | None:
        found = [p for p in siblings if p.name.startswith(f".{directory.name}.{kind}-")]
        found = [p for p in found if _is_checkpoint(p)]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None

    source = newest("tmp") or newest("old")
    if source is None:
        return None
    source.rename(directory)
    if source.name.startswith(f".{directory.name}.tmp-"):
        older = newest("old")  # the save had finished writing: its previous checkpoint goes
        if older is not None:
            _remove_checkpoint(older)
    warnings.warn(
        f"recovered checkpoint {directory} from {source.name} (a save was interrupted between "
        "its two renames)",
        stacklevel=2,
    )
    return directory


def _tokenizer_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    state: dict[str, Any] | None = None,
    tokenizer: Any | None = None,
) -> Path:
    """Write a checkpoint directory atomically: a crash mid-save leaves the previous one intact.

    `state` is the trainer's plain-data state (step, schedule, data position, history...);
    RNG states are added here so every checkpoint can resume bit for bit. An existing folder
    that is not a course checkpoint, or a symbolic link, is refused (CheckpointError), never
    replaced. A write that fails (a full disk) raises WriteFailed naming the file; the previous
    checkpoint is intact.
    """
    directory = Path(directory)
    recover_checkpoint(directory)
    check_checkpoint_target(directory)
    exists = (directory / STATE_FILE).is_file()
    kept = "the previous checkpoint is intact" if exists else "nothing was saved"
    tmp = _tmp_name(directory, "tmp")
    writing = directory
    try:
        tmp.mkdir(parents=True)
    except OSError as err:
        raise write_error(err, tmp, kept) from err
    try:
        writing = directory / MODEL_FILE
        save_model(model, str(tmp / MODEL_FILE))
        payload: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "model_class": type(model).__name__,
            "config": _model_config(model),
            "rng": get_rng_state(),
            # ELECTRA's pretrainer: `config` is the discriminator's; the generator's is needed too.
            **paired_configs(model),
            **(state or {}),
        }
        if optimizer is not None:
            tensors, plain = _split_optimizer_state(optimizer)
            writing = directory / OPTIMIZER_FILE
            save_file(tensors, str(tmp / OPTIMIZER_FILE))
            payload["optimizer"] = plain
        if tokenizer is not None:
            writing = directory / TOKENIZER_FILE
            tokenizer.save(str(tmp / TOKENIZER_FILE))
            payload["tokenizer"] = {
                "sha256": _tokenizer_digest(tmp / TOKENIZER_FILE),
                "vocab_size": getattr(tokenizer, "vocab_size", None),
                "family": getattr(tokenizer, "family", None),
            }
        # The state file is written last: a directory with a parsable one is complete.
        writing = directory / STATE_FILE
        (tmp / STATE_FILE).write_text(json.dumps(payload, indent=1, allow_nan=True))
    except BaseException as err:
        _remove_checkpoint(tmp)  # our own half-written folder
        failed = write_error(err, writing, kept)
        if failed is err:
            raise
        raise failed from err
    # Swap in the new directory; the old one is removed only after the new one is in place.
    old = None
    if directory.is_dir():
        old = _tmp_name(directory, "old")
        directory.rename(old)
    tmp.rename(directory)
    if old is not None:
        _remove_checkpoint(old)
    _remove_stale_temporaries(directory)
    return directory


def _remove_stale_temporaries(directory: Path) -> None:
    """Folders `.<name>.tmp-<pid>` / `.<name>.old-<pid>` left by a save that was killed (its
    process is gone): their checkpoint files are removed, anything else in them is kept."""
    if os.name != "posix":  # os.kill(pid, 0) only probes on POSIX
        return
    for path in directory.parent.glob(f".{directory.name}.*-*"):
        kind, _, rest = path.name[len(directory.name) + 2 :].partition("-")
        pid = rest.split("-")[0]
        if kind not in ("tmp", "old") or not pid.isdigit() or not path.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # that process still runs (perhaps saving right now)
        except ProcessLookupError:
            _remove_checkpoint(path)
        except (PermissionError, OverflowError, OSError):
            continue


def read_state(directory: str | Path) -> dict[str, Any]:
    """The JSON part of a checkpoint, with a clear error if the directory is not a checkpoint."""
    directory = Path(directory)
    recover_checkpoint(directory)
    path = directory / STATE_FILE
    if not path.is_file():
        legacy = [
            p.name
            for p in (directory.with_name(directory.name + s) for s in (".tmp", ".old"))
            if _is_checkpoint(p)
        ]
        if not directory.exists() and legacy:
            raise FileNotFoundError(
                f"{directory} does not exist, but {' and '.join(legacy)} beside it hold a complete "
                f"checkpoint (a save was interrupted); rename {legacy[0]} to {directory.name} to "
                "use it."
            )
        raise FileNotFoundError(
            f"{directory} is not a checkpoint: {STATE_FILE} is missing (a checkpoint directory "
            f"holds {MODEL_FILE} and {STATE_FILE}; pass the directory that `course pretrain` wrote)."
        )
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CheckpointError(
            f"{path} is damaged ({_short(err)}); resume from another checkpoint or start a new run."
        ) from err
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{path} holds a JSON {type(state).__name__}, not the object course pretrain writes; "
            "the checkpoint is damaged: resume from another checkpoint or start a new run."
        )
    return state


def _short(err: BaseException) -> str:
    """The first line of an exception's message, shortened: for one-line errors."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def load_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load weights (and optimizer state, RNG states) into existing objects; return the JSON state.

    The model must have the same architecture; the config stored in the checkpoint is checked
    first so a mismatch names the differing fields instead of listing missing tensors. A damaged
    or missing file raises CheckpointError (a ValueError) naming the file.
    """
    directory = Path(directory)
    state = read_state(directory)
    saved_config, config = state.get("config"), _model_config(model)
    if saved_config is not None and config is not None and saved_config != config:
        if not isinstance(saved_config, dict):
            raise CheckpointError(
                f"{directory / STATE_FILE} holds a config of type {type(saved_config).__name__}; "
                "the checkpoint is damaged: resume from another checkpoint or start a new run."
            )
        diff = sorted(
            k for k in set(saved_config) | set(config) if saved_config.get(k) != config.get(k)
        )
        details = ", ".join(f"{k}: {saved_config.get(k)!r} vs {config.get(k)!r}" for k in diff)
        raise ValueError(
            f"checkpoint {directory} was saved from a different config ({details}); load it into "
            "a model built from its own config (load_pretrained does that), or resume with the "
            "recipe it was trained with."
        )
    device = next(model.parameters()).device
    weights = directory / MODEL_FILE
    try:
        missing, unexpected = _load_weights(model, weights, str(device))
    except Exception as err:  # truncated, empty, missing or not safetensors; shapes that differ
        raise _file_error(weights, err, "the weights") from err
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {directory} does not match {type(model).__name__}: "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}."
        )
    if optimizer is not None:
        if not isinstance(state.get("optimizer"), dict):
            raise ValueError(
                f"checkpoint {directory} holds no optimizer state (saved for inference)."
            )
        path = directory / OPTIMIZER_FILE
        try:
            tensors = load_file(str(path), device=str(device))
            saved = _join_optimizer_state(tensors, state["optimizer"])
            # Implementation switches follow this machine, not the one that saved (a fused
            # kernel may exist on the GPU that wrote the checkpoint but not here).
            for group, current in zip(saved["param_groups"], optimizer.param_groups):
                for key in ("fused", "foreach", "capturable", "differentiable"):
                    if key in current:
                        group[key] = current[key]
            optimizer.load_state_dict(saved)
        except Exception as err:
            raise _file_error(path, err, "the optimizer state") from err
    if restore_rng and "rng" in state:
        try:
            set_rng_state(state["rng"])
        except Exception as err:
            raise CheckpointError(
                f"{directory / STATE_FILE} holds damaged RNG states ({_short(err)}); resume from "
                "another checkpoint or start a new run."
            ) from err
    return state


def migrate_keys(names: list[str], model_names: set[str]) -> dict[str, str]:
    """{stored name: today's name} for the stored tensors that an old version saved under a name
    `RENAMED_PREFIXES` renamed, where the model has the new name and not the old one."""
    renames = {}
    for old, new in RENAMED_PREFIXES:
        for name in names:
            moved = new + name[len(old) :]
            if name.startswith(old) and name not in model_names and moved in model_names:
                renames[name] = moved
    return renames


def _load_weights(model: nn.Module, path: Path, device: str) -> tuple[list[str], list[str]]:
    """safetensors' load_model (tied tensors are stored once), after renaming old tensor names:
    then the renamed file is written to a temporary directory and loaded from there."""
    with safe_open(str(path), framework="pt") as f:
        renames = migrate_keys(list(f.keys()), set(model.state_dict()))
    if not renames:
        return load_model(model, str(path), strict=False, device=device)
    tensors = load_file(str(path), device=device)
    with tempfile.TemporaryDirectory() as tmp:
        save_file({renames.get(k, k): v for k, v in tensors.items()}, f"{tmp}/{MODEL_FILE}")
        return load_model(model, f"{tmp}/{MODEL_FILE}", strict=False, device=device)


def _file_error(path: Path, err: BaseException, what: str) -> CheckpointError:
    """One line for a checkpoint file that cannot be read: which file, why, and what to do."""
    if not path.exists():
        why = "it is missing"
    elif path.stat().st_size == 0:
        why = "it is empty"
    elif "size mismatch" in str(err) or "shape" in str(err).lower():
        why = f"its tensors do not fit the config in {STATE_FILE} ({_short(err)})"
    else:
        why = f"it is damaged or truncated ({_short(err)})"
    return CheckpointError(
        f"cannot load {what} from {path}: {why}; resume from another checkpoint or start a new run."
    )


def load_pretrained(directory: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild the model a checkpoint was saved from (class + config) and load its weights."""
    from course_lib.models import MODEL_CLASSES, config_from_dict

    directory = Path(directory)
    state = read_state(directory)
    name, config_dict = state.get("model_class"), state.get("config")
    if not isinstance(config_dict, dict):
        raise CheckpointError(
            f"{directory / STATE_FILE} has no model config (the 'config' entry is "
            f"{'missing' if config_dict is None else 'not an object'}), so the model cannot be "
            "rebuilt; use a complete checkpoint written by course pretrain."
        )
    if not isinstance(name, str) or (name not in MODEL_CLASSES and name not in PAIRED_MODELS):
        raise CheckpointError(
            f"checkpoint {directory} holds model class {name!r}, which course_lib does not know; "
            f"known classes: {sorted(MODEL_CLASSES)}."
        )
    try:
        config = config_from_dict(config_dict)
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(
            f"{directory / STATE_FILE} holds an invalid model config ({_short(err)}); use a "
            "complete checkpoint written by course pretrain."
        ) from err
    model = _build_model(name, config, state, directory).to(device)
    load_checkpoint(directory, model, restore_rng=False)
    return model.eval()


def load_tokenizer(directory: str | Path, state: dict[str, Any] | None = None) -> Any:
    """The checkpoint's tokenizer.json, refused unless it is the tokenizer the model was trained
    with: same file (its hash is stored at save time), vocabulary size and tokenizer family."""
    from course_lib.tokenization import CourseTokenizer, canonical_family

    directory = Path(directory)
    state = read_state(directory) if state is None else state
    path = directory / TOKENIZER_FILE
    fix = "copy back the tokenizer.json that was saved with this checkpoint"
    if not path.is_file():
        raise CheckpointError(f"{path} is missing; {fix}, or use another checkpoint.")
    try:
        tokenizer = CourseTokenizer.load(path)
    except Exception as err:  # the tokenizers library raises its own Exception on bad JSON
        raise CheckpointError(f"{path} cannot be read ({_short(err)}); {fix}.") from err
    saved = state.get("tokenizer") if isinstance(state.get("tokenizer"), dict) else {}
    if saved.get("sha256") and saved["sha256"] != _tokenizer_digest(path):
        raise CheckpointError(
            f"{path} is not the tokenizer this model was trained with (its contents changed "
            f"since the save); {fix}."
        )
    config = state.get("config") if isinstance(state.get("config"), dict) else {}
    model_type = config.get("model_type")
    try:
        expected = canonical_family(model_type) if isinstance(model_type, str) else None
    except ValueError:
        expected = None
    if expected is not None and tokenizer.family != expected:
        raise CheckpointError(
            f"{path} is a {tokenizer.family} tokenizer but a {model_type} model needs a "
            f"{expected} one: it is another family's tokenizer; {fix}."
        )
    vocab_size = config.get("vocab_size")
    if vocab_size is not None and tokenizer.vocab_size != vocab_size:
        raise CheckpointError(
            f"{path} has {tokenizer.vocab_size} entries but the model was trained with "
            f"{vocab_size}: it is another run's tokenizer; {fix}."
        )
    return tokenizer
