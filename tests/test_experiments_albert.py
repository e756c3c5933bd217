"""Smoke tests for the chapter-03 experiment scripts: --fast runs end to end and writes
well-formed results (JSON with config, per-seed numbers, summary, provenance, and a plot)."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parents[1] / "experiments" / "03_albert"


def load(name):
    sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(f"albert_exp_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.usefixtures("one_thread")


def is_fraction(x):
    return isinstance(x, float) and 0.0 <= x <= 1.0


def check_provenance(results, name):
    assert results["experiment"] == name and results["fast"] is True
    assert results["command"].startswith(f"python experiments/03_albert/{name}.py")
    assert "--fast" in results["command"]
    assert results["torch"] == torch.__version__ and results["date"]
    assert results["data"]["tokenizer"] == "unigram"


def test_sop_vs_nsp_fast(tmp_path):
    exp = load("sop_vs_nsp")
    exp.main(["--fast", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "sop_vs_nsp.json").read_text())
    assert (tmp_path / "sop_vs_nsp.png").stat().st_size > 1000
    check_provenance(results, "sop_vs_nsp")
    seeds = results["settings"]["seeds"]
    assert len(results["runs"]) == 3 * len(seeds)
    assert {r["objective"] for r in results["runs"]} == {"none", "nsp", "sop"}
    for row in results["runs"]:
        assert set(row["probe"]) == {"nsp", "sop"}
        assert all(is_fraction(p["accuracy"]) for p in row["probe"].values())
        assert ("head_accuracy" in row) == (row["objective"] != "none")
        assert math.isfinite(row["eval_mlm_loss"])  # MLM is trained in every run by default
        assert all(is_fraction(p["train_accuracy"]) for p in row["probe"].values())
        if row["objective"] != "none":  # the trained head, on its own task and the other one
            assert set(row["head"]) == {"nsp", "sop"}
            assert row["head"][row["objective"]]["accuracy"] == row["head_accuracy"]
            for scores in row["head"].values():
                assert set(scores) == {"train_accuracy", "train_redraw_accuracy", "accuracy"}
                assert all(is_fraction(v) for v in scores.values())
    # Junction survival of the held-out pairs: always with the course's rule, rarely with
    # BERT's random ends at 32 tokens.
    for task, rules in results["data"]["junction"].items():
        assert rules["junction"]["junction_survival"] == 1.0
        assert rules["random"]["junction_survival"] < 0.5
        assert rules["junction"]["pairs"] >= results["data"]["pairs"][task]["held_out"]
    sop_entry = results["summary"]["sop"]
    cross = [r["head"]["nsp"]["accuracy"] for r in results["runs"] if r["objective"] == "sop"]
    assert sop_entry["heads"]["nsp"]["held_out"]["mean"] == pytest.approx(sum(cross) / len(cross))
    assert "head_nsp" in sop_entry["minus_majority"] and "heads" not in results["summary"]["none"]
    assert set(sop_entry["probes"]["sop"]) == {"train", "held_out"}
    for objective, entry in results["summary"].items():
        assert entry["probe_nsp"]["n"] == len(seeds) and entry["probe_nsp"]["std"] >= 0
        per_seed = [
            r["probe"]["nsp"]["accuracy"] for r in results["runs"] if r["objective"] == objective
        ]
        assert entry["probe_nsp"]["mean"] == pytest.approx(sum(per_seed) / len(per_seed))
        majority = results["data"]["majority_baseline"]["nsp"]
        assert entry["minus_majority"]["probe_nsp"]["per_seed"] == pytest.approx(
            [a - majority for a in per_seed]
        )
    # the topic-only reference is order-blind; both baselines are accuracies
    assert all(is_fraction(v) for v in results["overlap_baseline"].values())
    assert results["paper"]["sop"]["nsp"] == 78.9 and results["paper"]["nsp"]["sop"] == 52.0
    path = tmp_path / "sop_vs_nsp.json"  # --restat: the summary again, from the runs alone
    path.write_text(json.dumps({**results, "summary": {}}))
    exp.main(["--restat", "--no-plot", "--out", str(tmp_path)])
    assert json.loads(path.read_text())["summary"] == results["summary"]


def test_sop_vs_nsp_sentence_only_has_no_mlm_loss(tmp_path):
    exp = load("sop_vs_nsp")
    results = exp.main(
        ["--fast", "--out", str(tmp_path), "--sentence-only", "--seeds", "0", "--no-plot"]
    )
    losses = {r["objective"]: r["eval_mlm_loss"] for r in results["runs"]}
    assert losses["nsp"] is None and losses["sop"] is None  # MLM head never trained
    assert math.isfinite(losses["none"])
    assert not (tmp_path / "sop_vs_nsp.png").exists()


def test_sop_vs_nsp_pair_draws_objectives_and_init(tmp_path):
    """--set pair_draws=2 doubles the pretraining pairs; a subset of objectives runs (and plots)
    alone; initializer_range reaches the model config, whose default stays BERT's 0.02."""
    exp = load("sop_vs_nsp")
    base = exp.main(
        [
            "--fast",
            "--out",
            str(tmp_path / "a"),
            "--seeds",
            "0",
            "--no-plot",
            "--set",
            'objectives=["sop"]',
        ]
    )
    doubled = exp.main(
        [
            "--fast",
            "--out",
            str(tmp_path / "b"),
            "--seeds",
            "0",
            "--set",
            "pair_draws=2",
            'objectives=["sop"]',
            "initializer_range=0.1",
        ]
    )
    for task in ("nsp", "sop"):
        one, two = base["data"]["pairs"][task], doubled["data"]["pairs"][task]
        assert two["train"] > 1.5 * one["train"]
        assert two["held_out"] == one["held_out"]  # evaluation pairs do not change
    assert [r["objective"] for r in doubled["runs"]] == ["sop"]
    assert set(doubled["summary"]) == {"sop"}
    assert (tmp_path / "b" / "sop_vs_nsp.png").stat().st_size > 1000
    assert doubled["settings"]["initializer_range"] == 0.1
    common = sys.modules["common"]
    assert common.tiny_config(100).initializer_range == 0.02
    assert common.tiny_config(100, initializer_range=0.08).initializer_range == 0.08
    assert exp.FULL["initializer_range"] == 0.08 and exp.FULL["pair_draws"] == 10


def test_sharing_ablation_fast(tmp_path):
    exp = load("sharing_ablation")
    exp.main(["--fast", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "sharing_ablation.json").read_text())
    assert (tmp_path / "sharing_ablation.png").stat().st_size > 1000
    check_provenance(results, "sharing_ablation")
    seeds = results["settings"]["seeds"]
    summary = results["summary"]
    post_ln = {label for label, _, _ in exp.POST_LN_CONFIGS}
    assert set(summary) == {label for label, _, _ in exp.CONFIGS} | post_ln
    assert len(results["runs"]) == (len(exp.CONFIGS) + len(post_ln)) * len(seeds)
    # exact counts: sharing and a smaller E can only remove parameters
    assert summary["all, E=32"]["parameters"] < summary["attention, E=32"]["parameters"]
    assert summary["attention, E=32"]["parameters"] < summary["none, E=32"]["parameters"]
    assert summary["all, E=16"]["parameters"] < summary["all, E=64"]["parameters"]
    assert summary["all, E=32"]["loss_minus_all_E32"]["mean"] == 0.0
    assert summary["all, E=32"]["loss_minus_all_E32"]["beyond_noise"] is False
    for label, entry in summary.items():  # paired by seed against all, E=32
        mine = {r["seed"]: r["eval_mlm_loss"] for r in results["runs"] if r["config"] == label}
        ref = {r["seed"]: r["eval_mlm_loss"] for r in results["runs"] if r["config"] == "all, E=32"}
        assert entry["loss_minus_all_E32"]["per_seed"] == pytest.approx(
            [mine[s] - ref[s] for s in mine]
        )
    for entry in summary.values():
        assert math.isfinite(entry["eval_mlm_loss"]["mean"]) and entry["eval_mlm_loss"]["n"] == len(
            seeds
        )
    assert 0 < results["data"]["unigram_loss"] < math.log(results["data"]["vocab_size"]) + 1
    # the post-LN twins really are post-LN: no final LayerNorm (2H parameters fewer), and their
    # loss is also paired against the pre-LN twin trained on the same seeds, data and masks
    hidden = results["settings"]["hidden_size"]
    for label in post_ln:
        twin = exp.PRE_LN_TWIN[label]
        assert summary[label]["pre_layer_norm"] is False and summary[twin]["pre_layer_norm"]
        assert summary[twin]["parameters"] - summary[label]["parameters"] == 2 * hidden
        mine = {r["seed"]: r["eval_mlm_loss"] for r in results["runs"] if r["config"] == label}
        ref = {r["seed"]: r["eval_mlm_loss"] for r in results["runs"] if r["config"] == twin}
        assert summary[label]["loss_minus_pre_ln"]["per_seed"] == pytest.approx(
            [mine[s] - ref[s] for s in mine]
        )
    for row in results["runs"]:  # a logged training curve ending at the last step
        assert row["train_curve"][-1][0] == results["settings"]["steps"]
    # Figure-1 measurements: pre-LN and post-LN, one per seed, one value per applied layer
    assert set(results["depth"]) == set(exp.DEPTH_CONFIGS)
    layers = results["settings"]["num_hidden_layers"]
    for per_seed in results["depth"].values():
        assert len(per_seed) == len(seeds)
        for d in per_seed:
            assert len(d["l2"]) == len(d["cosine"]) == layers
            assert all(-1.0 <= c <= 1.0 for c in d["cosine"]) and all(x >= 0 for x in d["l2"])
    # the all-shared layer applied beyond the trained depth: its first steps ARE the trained depth
    assert set(results["depth_iterated"]) == {"all, E=32", "all, E=32, post-LN"}
    for label, per_seed in results["depth_iterated"].items():
        for it, d in zip(per_seed, results["depth"][label]):
            assert len(it["l2"]) == results["settings"]["iterate_layers"]
            assert it["l2"][:layers] == pytest.approx(d["l2"], rel=1e-4, abs=1e-6)
            assert it["cosine"][:layers] == pytest.approx(d["cosine"], rel=1e-4, abs=1e-6)
    # --restat recomputes the summary from the per-seed runs alone (no training)
    path = tmp_path / "sharing_ablation.json"
    path.write_text(json.dumps({**results, "summary": {}}))
    exp.main(["--restat", "--no-plot", "--out", str(tmp_path)])
    assert json.loads(path.read_text())["summary"] == results["summary"]


def test_sharing_ablation_settings_and_arm_selection(tmp_path):
    """The committed run trains at the init that learns for >= 2,000 steps; `configs` and
    `post_ln` choose the arms, and --partial keeps the finished runs after each seed."""
    exp = load("sharing_ablation")
    assert exp.FULL["steps"] >= 2000 and exp.FULL["initializer_range"] == 0.08
    assert exp.FULL["post_ln"] and len(exp.FULL["seeds"]) >= 3
    results = exp.main(
        [
            "--fast",
            "--out",
            str(tmp_path),
            "--seeds",
            "0",
            "--partial",
            str(tmp_path / "partial.json"),
            "--set",
            'configs=["all, E=32"]',
            "post_ln=false",
        ]
    )
    assert [r["config"] for r in results["runs"]] == ["all, E=32"]
    assert set(results["depth"]) == {"all, E=32"}
    partial = json.loads((tmp_path / "partial.json").read_text())
    assert [r["config"] for r in partial["runs"]] == ["all, E=32"]
    assert (tmp_path / "sharing_ablation.png").stat().st_size > 1000  # plots without post-LN


def test_overrides_are_checked():
    common = load("common")
    assert common.parse_overrides(["lr=0.001", "seeds=[0,1]"], {"lr": 1, "seeds": []}) == {
        "lr": 0.001,
        "seeds": [0, 1],
    }
    with pytest.raises(SystemExit, match="KEY one of"):
        common.parse_overrides(["nonsense=1"], {"lr": 1})


def test_linear_probe_learns_a_separable_task_and_not_noise():
    common = load("common")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 8, generator=g)
    y = (x[:, 0] > 0).long()
    separable = common.linear_probe(x[:300], y[:300], x[300:], y[300:])
    assert separable["accuracy"] > 0.9
    noise = torch.randint(0, 2, (400,), generator=g)
    chance = common.linear_probe(x[:300], noise[:300], x[300:], noise[300:])
    assert 0.3 < chance["accuracy"] < 0.7


def test_mean_std_is_the_sample_statistic():
    common = load("common")
    assert common.mean_std([1.0, 2.0, 3.0]) == {"mean": 2.0, "std": 1.0, "n": 3}
