"""The DeBERTa ablation script: each arm builds the model it claims to, the statistics are right,
and --fast runs end to end and writes well-formed results."""

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "04_deberta_distil" / "deberta_ablation.py"


@pytest.fixture(scope="module")
def ablation():
    spec = importlib.util.spec_from_file_location("deberta_ablation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["deberta_ablation"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("deberta_ablation", None)


def arm_model(ablation, arm):
    tokenizer = SimpleNamespace(vocab_size=200, pad_token_id=0)
    config = ablation.TinyDeberta().config(tokenizer, 64, arm)
    return config, ablation.build_model(config, seed=0).eval()


def test_each_arm_removes_exactly_its_component(ablation):
    ids = torch.randint(5, 200, (2, 20))
    terms, models = {}, {}
    for arm in ablation.ARMS:
        config, model = arm_model(ablation, arm)
        models[arm] = model
        with torch.no_grad():
            terms[arm] = model.backbone.attention_terms(ids)[0]
    assert set(terms["full"]) == {"c2c", "c2p", "p2c", "probs"}
    assert set(terms["-C2P"]) == {"c2c", "p2c", "probs"}
    assert set(terms["-P2C"]) == {"c2c", "c2p", "probs"}
    assert set(terms["no-positions"]) == {"c2c", "probs"}
    assert models["full"].config.use_emd and models["-C2P"].config.use_emd
    assert not models["-EMD"].config.use_emd
    assert models["-EMD"].backbone.embeddings.position_embeddings is None
    assert models["no-positions"].backbone.encoder.rel_embeddings is None
    # same seed, same shapes: paper-p2c has the full model's weights and differs only in p2c
    assert torch.equal(terms["paper-p2c"]["c2p"], terms["full"]["c2p"])
    assert (terms["paper-p2c"]["p2c"] - terms["full"]["p2c"]).abs().max() > 1e-4
    # the scale follows the number of position terms: sqrt(3d) full, sqrt(2d) with one removed
    head_dim = models["full"].config.head_dim
    assert models["full"].backbone.encoder.layers[0].attention.scale == math.sqrt(3 * head_dim)
    assert models["-C2P"].backbone.encoder.layers[0].attention.scale == math.sqrt(2 * head_dim)


def test_no_positions_arm_is_a_bag_of_words(ablation):
    """Without relative terms and EMD, permuting the input only permutes the output."""
    _, model = arm_model(ablation, "no-positions")
    _, full = arm_model(ablation, "full")
    ids = torch.randint(5, 200, (1, 16))
    perm = torch.randperm(16)
    with torch.no_grad():
        out, permuted = model(ids).mlm_logits, model(ids[:, perm]).mlm_logits
        full_out, full_permuted = full(ids).mlm_logits, full(ids[:, perm]).mlm_logits
    assert (out[:, perm] - permuted).abs().max() < 1e-4
    assert (full_out[:, perm] - full_permuted).abs().max() > 1e-3


def test_absolute_arm_is_bert_style(ablation):
    """The comparator: no relative attention, no EMD, learned absolute positions at the input."""
    config, model = arm_model(ablation, "absolute")
    assert not config.relative_attention and config.pos_att_type == []
    assert config.position_biased_input and not config.use_emd
    assert model.backbone.encoder.rel_embeddings is None
    table = model.backbone.embeddings.position_embeddings
    assert table is not None and table.weight.shape == (64, config.hidden_size)
    ids = torch.randint(5, 200, (1, 16))
    with torch.no_grad():
        assert set(model.backbone.attention_terms(ids)[0]) == {"c2c", "probs"}
        # the input embedding of a token depends on where it stands
        embedded = model.backbone.embeddings(torch.full((1, 4), 7))
    assert (embedded[0, 0] - embedded[0, 1]).abs().max() > 1e-3
    # ... so it is not a bag of words: permuting the input changes more than the order
    perm = torch.randperm(16)
    with torch.no_grad():
        out, permuted = model(ids).mlm_logits, model(ids[:, perm]).mlm_logits
    assert (out[:, perm] - permuted).abs().max() > 1e-3
    # exactly one absolute table more than the bag of words
    _, bag = arm_model(ablation, "no-positions")
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(model) - count(bag) == 64 * config.hidden_size


def test_discovery_steps(ablation):
    """A run has found the positions at the first step from which it stays `margin` below the
    bag-of-words track; a run that comes back up, or never leaves it, has not."""

    def run(arm, seed, losses):
        return {
            "arm": arm,
            "seed": seed,
            "curve": [{"step": 50 * (i + 1), "eval_mlm_loss": x} for i, x in enumerate(losses)],
        }

    results = [
        run("no-positions", 0, [7.0, 6.5, 6.2, 6.1]),
        run("no-positions", 1, [7.0, 6.5, 6.2, 6.1]),
        run("full", 0, [6.8, 6.5, 6.0, 5.8]),  # 0.2 below at step 50, back on the track at 100
        run("full", 1, [7.0, 6.45, 6.2, 6.05]),  # never 0.1 below
        run("absolute", 0, [6.95, 6.3, 6.0, 5.5]),  # below from step 100 on
    ]
    found = {(r["arm"], r["seed"]): r["step"] for r in ablation.discovery_steps(results)["runs"]}
    assert found == {("full", 0): 150, ("full", 1): None, ("absolute", 0): 100}
    assert ablation.discovery_steps([r for r in results if r["arm"] != "no-positions"]) == {}


def test_fast_run_writes_the_absolute_arm_and_curves_at_the_cadence(ablation, tmp_path):
    arms = ["full", "no-positions", "absolute"]
    args = ["--fast", "--arms", ",".join(arms), "--seeds", "2", "--steps", "4"]
    data = ablation.main([*args, "--eval-every", "2", "--out", str(tmp_path)])
    absolute = data["config"]["arms"]["absolute"]
    assert absolute["relative_attention"] is False and absolute["position_biased_input"] is True
    assert absolute["pos_att_type"] == [] and absolute["use_emd"] is False
    assert data["config"]["arms"]["full"]["relative_attention"] is True
    assert data["config"]["arms"]["full"]["position_biased_input"] is False
    assert data["config"]["evaluation"]["curve_every"] == 2
    assert {(r["arm"], r["seed"]) for r in data["runs"]} == {(a, s) for a in arms for s in (0, 1)}
    for r in data["runs"]:
        assert [p["step"] for p in r["curve"]] == [2, 4]
    assert "absolute" in data["summary"]
    pairs = {(c["arm"], c["reference"], c["metric"]) for c in data["comparisons"]}
    for metric in ("eval_mlm_loss", "eval_mlm_accuracy"):
        assert ("absolute", "full", metric) in pairs
        assert ("no-positions", "absolute", metric) in pairs
    assert {(r["arm"], r["seed"]) for r in data["discovery"]["runs"]} == {
        (a, s) for a in ("full", "absolute") for s in (0, 1)
    }
    # the default cadence in full mode is every 50 steps
    assert ablation.EVAL_EVERY == 50


def test_restat_adds_the_extra_comparisons(ablation, tmp_path):
    """--restat recomputes the listed comparisons and adds the extra ones (absolute - -EMD:
    absolute vs relative positions, neither with EMD) when their arms were run."""
    runs = [
        {"arm": arm, "seed": s, "eval_mlm_loss": base + 0.01 * s + 0.003 * (s % 2)}
        for arm, base in (("full", 5.6), ("-EMD", 5.8), ("absolute", 6.05))
        for s in range(3)
    ]
    for r in runs:
        r["eval_mlm_accuracy"] = 1.0 - r["eval_mlm_loss"] / 10
    listed = [{"arm": "-EMD", "reference": "full", "metric": "eval_mlm_loss"}]
    (tmp_path / "deberta_ablation.json").write_text(
        json.dumps({"runs": runs, "comparisons": listed})
    )
    data = ablation.main(["--restat", "--out", str(tmp_path)])
    found = {(c["arm"], c["reference"], c["metric"]): c for c in data["comparisons"]}
    assert set(found) == {
        ("-EMD", "full", "eval_mlm_loss"),
        ("absolute", "-EMD", "eval_mlm_loss"),
        ("absolute", "-EMD", "eval_mlm_accuracy"),
    }
    assert found["absolute", "-EMD", "eval_mlm_loss"]["diff"]["mean"] == pytest.approx(0.25)
    assert data["discovery"] == {}  # no bag-of-words arm: nothing to measure discovery against


def test_unknown_arm_is_refused(ablation):
    with pytest.raises(ValueError, match="unknown arm"):
        arm_model(ablation, "-P2P")
    with pytest.raises(SystemExit, match="unknown arm"):
        ablation.main(["--fast", "--arms", "full,-P2P"])


def test_statistics(ablation):
    consistent = [{"arm": "full", "seed": s, "loss": 5.0 + 0.1 * s} for s in range(3)] + [
        {"arm": "-EMD", "seed": s, "loss": 5.2 + 0.1 * s + 0.01 * (s % 2)} for s in range(3)
    ]
    summary = ablation.summarize(consistent, ["loss"])
    assert list(summary) == ["full", "-EMD"]  # ordered as ARMS
    assert summary["full"]["loss"]["mean"] == pytest.approx(5.1)
    assert summary["full"]["loss"]["std"] == pytest.approx(0.1)  # sample std (n - 1)
    paired = ablation.paired_comparison(consistent, "-EMD", "loss")
    assert paired["diff"]["mean"] == pytest.approx(0.2 + 0.01 / 3)
    # diffs 0.20, 0.21, 0.20: t = 0.2033 / (0.00577 / sqrt 3) = 61.0, df 2, p = 0.00027
    assert paired["t"] == pytest.approx(61.0, abs=0.05) and paired["p"] < 0.001
    assert paired["beyond_noise"] and paired["exceeds_seed_noise"] and paired["same_sign_all_seeds"]
    assert paired["verdict"].startswith("beyond noise")
    # the same mean difference, but inconsistent across seeds: within the noise
    noisy = consistent[:3] + [
        {"arm": "-EMD", "seed": s, "loss": 5.0 + 0.1 * s + d}
        for s, d in enumerate((0.9, -0.4, 0.1))
    ]
    paired = ablation.paired_comparison(noisy, "-EMD", "loss")
    assert paired["diff"]["mean"] == pytest.approx(0.2)
    assert not paired["beyond_noise"] and not paired["same_sign_all_seeds"]
    assert paired["agree"] == 2 and paired["p"] > 0.5


def test_fast_mode_writes_well_formed_results(ablation, tmp_path):
    arms = ["full", "-EMD"]
    payload = ablation.main(
        ["--fast", "--arms", ",".join(arms), "--seeds", "2", "--steps", "2", "--out", str(tmp_path)]
    )
    path = tmp_path / "deberta_ablation.json"
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(payload))
    assert (tmp_path / "deberta_ablation.png").stat().st_size > 10_000
    assert data["mode"] == "fast" and data["config"]["seeds"] == [0, 1]
    assert data["command"] == (
        "python experiments/04_deberta_distil/deberta_ablation.py --fast --arms full,-EMD "
        "--seeds 2 --steps 2"
    )  # reproducible, and no temporary path
    assert sorted((r["arm"], r["seed"]) for r in data["runs"]) == sorted(
        (a, s) for a in arms for s in (0, 1)
    )
    vocab = int(data["config"]["data"]["tokenizer"].rsplit(" ", 1)[1])
    for run in data["runs"]:
        # two steps of training: still close to a uniform guess over the vocabulary
        assert 0.5 * math.log(vocab) < run["eval_mlm_loss"] < 1.5 * math.log(vocab)
        assert 0.0 <= run["eval_mlm_accuracy"] <= 1.0
        assert run["steps"] == 2 and run["curve"][-1]["step"] == 2
    params = {r["arm"]: r["parameters"] for r in data["runs"]}
    hidden, max_length = (
        data["config"]["model"]["hidden_size"],
        data["config"]["data"]["max_length"],
    )
    assert params["full"] - params["-EMD"] == max_length * hidden  # the EMD's absolute table
    assert set(data["summary"]) == set(arms)
    assert all(s["eval_mlm_loss"]["n"] == 2 for s in data["summary"].values())
    assert {(c["arm"], c["metric"]) for c in data["comparisons"]} == {
        ("-EMD", m) for m in ("eval_mlm_loss", "eval_mlm_accuracy")
    }
    assert data["paper"]["MNLI-m"] == {"full": 86.3, "-EMD": 86.1, "-C2P": 85.9, "-P2C": 86.0}

    # --replot redraws the figure from the JSON alone (no training)
    (tmp_path / "deberta_ablation.png").unlink()
    assert ablation.main(["--replot", "--out", str(tmp_path)]) == data
    assert (tmp_path / "deberta_ablation.png").stat().st_size > 10_000

    # --restat recomputes the comparisons from the per-seed runs alone (no training)
    path.write_text(
        json.dumps(
            {
                **data,
                "comparisons": [
                    {k: c[k] for k in ("arm", "metric", "reference")} for c in data["comparisons"]
                ],
            }
        )
    )
    ablation.main(["--restat", "--out", str(tmp_path)])
    assert json.loads(path.read_text())["comparisons"] == data["comparisons"]
