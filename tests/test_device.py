"""Device and precision selection, including the CUDA paths (simulated: no GPU needed)."""

from __future__ import annotations

import pytest
import torch

from course_lib.training import device as dev


@pytest.fixture
def no_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dev, "_mps_available", lambda: False)


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch, no_accelerators):
    assert dev.select_device("auto") == torch.device("cpu")
    monkeypatch.setattr(dev, "_mps_available", lambda: True)
    assert dev.select_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dev.select_device("auto") == torch.device("cuda")
    assert dev.select_device("cpu") == torch.device("cpu")  # an explicit choice wins


def test_asking_for_a_missing_device_says_what_to_do(no_accelerators):
    with pytest.raises(ValueError, match="torch.cuda.is_available\\(\\) is False.*--device cpu"):
        dev.select_device("cuda")
    with pytest.raises(ValueError, match="mps"):
        dev.select_device("mps")
    with pytest.raises(ValueError, match="device='tpu' is invalid"):
        dev.select_device("tpu")


def test_auto_precision_on_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert dev.select_precision("cuda", "auto") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert dev.select_precision("cuda", "auto") == "fp16"  # pre-Ampere GPU
    assert dev.needs_grad_scaler("cuda", "fp16") and not dev.needs_grad_scaler("cuda", "bf16")
    with pytest.raises(ValueError, match="bf16.*Ampere"):
        dev.select_precision("cuda", "bf16")
    assert dev.select_precision("mps", "auto") == "fp32"


@pytest.mark.parametrize("has_bf16, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_precision_on_cpu_follows_the_hardware(monkeypatch, has_bf16, expected):
    monkeypatch.setattr(dev, "cpu_supports_bf16", lambda: has_bf16)
    assert dev.select_precision("cpu", "auto") == expected
    assert dev.select_precision("cpu", "fp32") == "fp32"
    with pytest.raises(ValueError, match="fp16.*not supported on CPU"):
        dev.select_precision("cpu", "fp16")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n\n")
    flags = dev.cpu_flags(cpuinfo)
    assert {"avx512_bf16", "amx_tile", "fpu"} <= flags and "amx_bf16" not in flags
    assert dev.cpu_flags(tmp_path / "missing") == frozenset()


def test_cpu_bf16_detection_is_cached_and_consistent_with_the_flags():
    flags = dev.cpu_flags()
    if flags:
        assert dev.cpu_supports_bf16() == bool({"avx512_bf16", "amx_bf16"} & flags)
    assert dev.cpu_supports_bf16.cache_info().currsize == 1


def test_autocast_runs_matmuls_in_bf16_on_cpu_and_not_in_fp32():
    a = torch.randn(4, 4)
    with dev.autocast("cpu", "bf16"):
        assert (a @ a).dtype == torch.bfloat16
    with dev.autocast("cpu", "fp32"):
        assert (a @ a).dtype == torch.float32
