"""Smoke and consistency tests for experiments/05_modern_encoders/rtd_vs_mlm.py: --fast runs end
to end, the arms are paired and equal in FLOPs, and the committed results agree with their runs."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from course_lib.stats import compare

HERE = Path(__file__).resolve().parents[1] / "experiments" / "05_modern_encoders"
pytestmark = pytest.mark.usefixtures("one_thread")


def load():
    spec = importlib.util.spec_from_file_location("rtd_vs_mlm_exp", HERE / "rtd_vs_mlm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def check_consistent(results):
    """Summary numbers recomputed from the per-seed runs; equal compute between the arms."""
    runs = results["runs"]
    assert {r["arm"] for r in runs} == {"rtd", "mlm", "random"}
    for task, entry in results["summary"].items():
        if task == "pretrain_seconds":
            continue
        by_arm = {a: {r["seed"]: r[task] for r in runs if r["arm"] == a} for a in entry["arms"]}
        for arm, values in by_arm.items():
            assert entry["arms"][arm]["mean"] == pytest.approx(sum(values.values()) / len(values))
            assert all(0.0 <= v <= 1.0 for v in values.values())
        diff = compare(by_arm["rtd"], by_arm["mlm"])
        assert entry["rtd_minus_mlm"]["mean"] == pytest.approx(diff["mean"])
        assert entry["rtd_minus_mlm"]["p"] == pytest.approx(diff["p"])
    steps, cost = results["steps"], results["flops_per_step"]
    assert cost["rtd"] > cost["mlm"]  # the generator makes an RTD step dearer
    # equal FLOPs, up to rounding the MLM arm's steps
    assert abs(steps["mlm"] * cost["mlm"] - steps["rtd"] * cost["rtd"]) <= cost["mlm"] / 2
    for r in runs:
        if r["arm"] != "random":
            assert r["steps"] == steps[r["arm"]] and r["pretrain_seconds"] > 0


def test_fast_run(tmp_path):
    exp = load()
    exp.main(["--fast", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "rtd_vs_mlm.json").read_text())
    assert results["fast"] is True and "--fast" in results["command"]
    assert results["torch"] == torch.__version__
    assert (tmp_path / "rtd_vs_mlm.png").stat().st_size > 1000
    assert len(results["runs"]) == 3 * len(results["settings"]["seeds"])
    check_consistent(results)
    rtd = [r for r in results["runs"] if r["arm"] == "rtd"]
    assert all("train_disc_loss" in row for r in rtd for row in r["curve"])


def test_flops_count_by_hand():
    """One layer of width 8 (FFN 16, 4 tokens of context): 2 * (4 * 64 + 2 * 128) + 4 * 4 * 8."""
    exp = load()
    from course_lib.config import BertConfig

    config = BertConfig(
        hidden_size=8, num_attention_heads=2, intermediate_size=16, num_hidden_layers=1
    )
    assert exp.forward_flops_per_token(config, seq=4) == 2 * (4 * 64 + 2 * 128) + 4 * 4 * 8


def test_committed_results_are_consistent():
    path = HERE / "results" / "rtd_vs_mlm.json"
    results = json.loads(path.read_text())
    assert results["fast"] is False and len(results["settings"]["seeds"]) >= 5
    check_consistent(results)
