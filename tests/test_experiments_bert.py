"""Chapter 01's fine-tuning experiment: a --fast run completes and writes the results the
notebook reads (two-phase pretraining, paired runs per setting, a summary that matches the runs),
and the committed full results are complete and consistent with themselves."""

import importlib
import json
import statistics
import sys
from pathlib import Path

import pytest

from course_lib.stats import MIN_SEEDS

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "01_bert"
sys.path.insert(0, str(EXPERIMENTS))


def check_payload(payload: dict) -> None:
    module = importlib.import_module("finetune_comparison")
    seeds = payload["config"]["seeds"]
    settings = [s["key"] for s in payload["settings"]]
    assert settings == [s.key for s in module.SETTINGS]
    # every setting x seed x init exactly once, and the pretrained/random pairs share a seed
    keys = sorted((r["setting"], r["seed"], r["init"]) for r in payload["runs"])
    assert keys == sorted((k, s, i) for k in settings for s in seeds for i in module.INITS)
    lengths = [r["max_length"] for r in payload["pretraining"]["eval"]]
    assert lengths[0] == payload["config"]["max_length"] and lengths[-1] == 128
    steps = [r["step"] for r in payload["pretraining"]["eval"]]
    assert steps == sorted(steps) and steps[-1] == (
        payload["config"]["pretrain_steps"] + payload["config"]["long_steps"]
    )
    for setting in payload["settings"]:
        for metric, s in payload["summary"][setting["key"]].items():
            arm = {
                init: [
                    r[metric]
                    for r in payload["runs"]
                    if r["setting"] == setting["key"] and r["init"] == init
                ]
                for init in module.INITS
            }
            assert s["pretrained_mean"] == pytest.approx(statistics.fmean(arm["pretrained"]))
            assert s["random_mean"] == pytest.approx(statistics.fmean(arm["random"]))
            assert s["separated"] == (min(arm["pretrained"]) > max(arm["random"]))
            gaps = [p - r for p, r in zip(arm["pretrained"], arm["random"])]  # same seed order
            assert s["gap_mean"] == pytest.approx(statistics.fmean(gaps))
            if len(gaps) < MIN_SEEDS:  # a fast run's 2 seeds: too few for the rule
                assert s["verdict"].startswith(f"not judged: {len(gaps)} seeds")
            else:
                assert s["verdict"].startswith(
                    "beyond noise" if s["beyond_noise"] else "within noise"
                )


@pytest.mark.slow
def test_fast_run_writes_complete_results(tmp_path):
    module = importlib.import_module("finetune_comparison")
    payload = module.main(["--fast", "--out", str(tmp_path), "--threads", "1"])
    assert payload["fast"] is True
    assert json.loads((tmp_path / "finetune_comparison.json").read_text()) == json.loads(
        json.dumps(payload)
    )
    assert (tmp_path / "finetune_comparison.png").stat().st_size > 10_000
    check_payload(payload)
    # --restat recomputes the summary from the per-seed runs alone (no training)
    path = tmp_path / "finetune_comparison.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, "summary": {}}))
    module.main(["--restat", "--out", str(tmp_path)])
    assert json.loads(path.read_text())["summary"] == saved["summary"]


def test_committed_results_are_full_and_consistent():
    payload = json.loads((EXPERIMENTS / "results" / "finetune_comparison.json").read_text())
    assert payload["fast"] is False and len(payload["config"]["seeds"]) >= 3
    check_payload(payload)
