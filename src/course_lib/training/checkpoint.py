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
import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

FORMAT_VERSION = 1
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"


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


def save_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    state: dict[str, Any] | None = None,
    tokenizer: Any | None = None,
) -> Path:
    """Write a checkpoint directory atomically: a crash mid-save leaves the previous one intact.

    `state` is the trainer's plain-data state (step, schedule, data position, history...);
    RNG states are added here so every checkpoint can resume bit for bit.
    """
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / MODEL_FILE))
    payload: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "model_class": type(model).__name__,
        "config": _model_config(model),
        "rng": get_rng_state(),
        **(state or {}),
    }
    if optimizer is not None:
        tensors, plain = _split_optimizer_state(optimizer)
        save_file(tensors, str(tmp / OPTIMIZER_FILE))
        payload["optimizer"] = plain
    if tokenizer is not None:
        tokenizer.save(str(tmp / "tokenizer.json"))
    (tmp / STATE_FILE).write_text(json.dumps(payload, indent=1, allow_nan=True))
    # Swap in the new directory; the old one is removed only after the new one is complete.
    old = directory.with_name(directory.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    if old.exists():
        shutil.rmtree(old)
    return directory


def read_state(directory: str | Path) -> dict[str, Any]:
    """The JSON part of a checkpoint, with a clear error if the directory is not a checkpoint."""
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory} is not a checkpoint: {STATE_FILE} is missing (a checkpoint directory "
            f"holds {MODEL_FILE} and {STATE_FILE}; pass the directory that `course pretrain` wrote)."
        )
    return json.loads(path.read_text())


def load_checkpoint(
    directory: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load weights (and optimizer state, RNG states) into existing objects; return the JSON state.

    The model must have the same architecture; the config stored in the checkpoint is checked
    first so a mismatch names the differing fields instead of listing missing tensors.
    """
    directory = Path(directory)
    state = read_state(directory)
    saved_config, config = state.get("config"), _model_config(model)
    if saved_config is not None and config is not None and saved_config != config:
        diff = sorted(
            k for k in set(saved_config) | set(config) if saved_config.get(k) != config.get(k)
        )
        details = ", ".join(f"{k}: {saved_config.get(k)!r} vs {config.get(k)!r}" for k in diff)
        raise ValueError(f"checkpoint {directory} was saved from a different config ({details}).")
    device = next(model.parameters()).device
    missing, unexpected = load_model(
        model, str(directory / MODEL_FILE), strict=False, device=str(device)
    )
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {directory} does not match {type(model).__name__}: "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}."
        )
    if optimizer is not None:
        if "optimizer" not in state:
            raise ValueError(
                f"checkpoint {directory} holds no optimizer state (saved for inference)."
            )
        tensors = load_file(str(directory / OPTIMIZER_FILE), device=str(device))
        saved = _join_optimizer_state(tensors, state["optimizer"])
        # Implementation switches follow this machine, not the one that saved (a fused kernel
        # may exist on the GPU that wrote the checkpoint but not here).
        for group, current in zip(saved["param_groups"], optimizer.param_groups):
            for key in ("fused", "foreach", "capturable", "differentiable"):
                if key in current:
                    group[key] = current[key]
        optimizer.load_state_dict(saved)
    if restore_rng and "rng" in state:
        set_rng_state(state["rng"])
    return state


def load_pretrained(directory: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild the model a checkpoint was saved from (class + config) and load its weights."""
    from course_lib.models import MODEL_CLASSES, config_from_dict

    state = read_state(directory)
    name, config_dict = state.get("model_class"), state.get("config")
    if name not in MODEL_CLASSES or config_dict is None:
        raise ValueError(
            f"checkpoint {directory} holds model class {name!r}, which course_lib does not know; "
            f"known classes: {sorted(MODEL_CLASSES)}."
        )
    config = config_from_dict(config_dict)
    model = MODEL_CLASSES[name](config).to(device)
    load_checkpoint(directory, model, restore_rng=False)
    return model.eval()
