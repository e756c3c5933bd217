"""Device and precision selection: CUDA > MPS > CPU, and bf16/fp16 autocast only where it pays.

Everything here is detected, never assumed: a laptop without bf16 units would run bf16 autocast
*slower* than fp32 (emulated), while CPUs with AVX512-BF16 or AMX run it natively.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import torch

DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def select_device(preference: str = "auto") -> torch.device:
    """The device to train on: the requested one, or the fastest available (CUDA > MPS > CPU)."""
    if preference not in DEVICES and not preference.startswith("cuda:"):
        raise ValueError(f"device={preference!r} is invalid: choose one of {DEVICES} or 'cuda:N'.")
    if preference == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if preference.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device={preference!r} was requested but torch.cuda.is_available() is False "
            "(no NVIDIA GPU, or a CPU-only torch build); use --device cpu or auto."
        )
    if preference == "mps" and not _mps_available():
        raise ValueError(
            "device='mps' was requested but torch.backends.mps.is_available() is False "
            "(needs Apple silicon and macOS 12.3+); use --device cpu or auto."
        )
    return torch.device(preference)


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The feature flags of the first CPU in /proc/cpuinfo (empty where there is no such file)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@functools.lru_cache(maxsize=1)
def cpu_supports_bf16() -> bool:
    """True if this CPU computes bf16 matmuls natively (AVX512-BF16 or AMX), so autocast helps.

    Reads the CPU flags (Linux) and falls back to oneDNN's own check elsewhere; cached, so it
    costs one file read per process.
    """
    flags = cpu_flags()
    if flags:
        return any(flag in flags for flag in _CPU_BF16_FLAGS)
    try:  # macOS/Windows: no /proc; oneDNN knows (private op, hence the guard).
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def select_precision(device: torch.device | str, preference: str = "auto") -> str:
    """'fp32', 'bf16' or 'fp16' for `device`: the requested one if the device can, else the best.

    auto: bf16 on CUDA GPUs that support it (Ampere and newer), fp16 on older GPUs, bf16 on CPUs
    with native bf16 units, fp32 otherwise (including MPS, where autocast support is partial).
    """
    if preference not in PRECISIONS:
        raise ValueError(f"precision={preference!r} is invalid: choose one of {PRECISIONS}.")
    kind = torch.device(device).type
    if preference == "auto":
        if kind == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        if kind == "cpu" and cpu_supports_bf16():
            return "bf16"
        return "fp32"
    if preference == "fp16" and kind == "cpu":
        raise ValueError(
            "precision='fp16' is not supported on CPU (no fast fp16 matmuls, and it needs loss "
            "scaling); use bf16 or fp32."
        )
    if preference == "bf16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(
            "precision='bf16' needs a GPU with bf16 support (Ampere or newer); use fp16 or fp32."
        )
    return preference


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a precision name, None for fp32 (no autocast)."""
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@contextlib.contextmanager
def autocast(device: torch.device | str, precision: str) -> Iterator[None]:
    """Mixed-precision context for the forward pass; a no-op for fp32.

    Weights and optimizer state stay fp32; only the matmuls inside run in bf16/fp16.
    """
    dtype = autocast_dtype(precision)
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=torch.device(device).type, dtype=dtype):
        yield


def needs_grad_scaler(device: torch.device | str, precision: str) -> bool:
    """fp16 gradients underflow without loss scaling; bf16 has fp32's range and does not need it."""
    return precision == "fp16" and torch.device(device).type == "cuda"
