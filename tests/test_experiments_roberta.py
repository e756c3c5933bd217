"""Chapter 02's experiment scripts: each --fast run completes and writes well-formed results
(strict JSON with the fields the notebooks read, and a PNG) into a temporary folder; the shared
statistics are checked against hand-computed values."""

import importlib
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "02_roberta"
sys.path.insert(0, str(EXPERIMENTS))

import roberta_common as common  # noqa: E402

SCRIPTS = ("dynamic_masking", "input_formats", "batch_size")


def strict_json(path: Path) -> dict:
    """Parse refusing NaN/Infinity, which are not JSON."""

    def refuse(token):
        raise ValueError(f"{path.name} holds {token}, which is not valid JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module", params=SCRIPTS)
def fast_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    module = importlib.import_module(request.param)
    module.main(["--fast", "--out", str(out)])
    return request.param, module, out, strict_json(out / f"{request.param}.json")


@pytest.mark.slow
def test_fast_run_writes_complete_results(fast_run):
    name, module, out, result = fast_run
    assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["experiment"] == name and result["mode"] == "fast"
    assert result["command"] == f"python experiments/02_roberta/{name}.py --fast --out <dir>"
    assert str(out) not in json.dumps(result)  # no temporary (absolute) paths in the results
    assert result["torch_version"] and result["date"]
    arms, seeds = list(result["arms"]), result["config"]["seeds"]
    assert arms == list(module.ARMS) and seeds == [0, 1]
    assert sorted((r["arm"], r["seed"]) for r in result["runs"]) == sorted(
        (a, s) for a in arms for s in seeds
    )
    vocab = int(result["config"]["data"]["tokenizer"].rsplit(" ", 1)[1])
    for run in result["runs"]:
        assert 0 < run["eval_mlm_loss"] < math.log(vocab) + 3  # near chance after a few steps
        assert 0.0 <= run["eval_mlm_accuracy"] <= 1.0
        assert run["train_tokens"] > 0 and run["steps"] >= 1
        steps = [row["step"] for row in run["curve"]]
        assert steps == sorted(steps) and steps[-1] == run["steps"]
        assert run["curve"][-1]["eval_mlm_loss"] == run["eval_mlm_loss"]  # final = last point
    (out / f"{name}.png").unlink()  # --replot redraws the figure from the JSON alone
    assert module.main(["--replot", "--out", str(out)]) == result
    assert (out / f"{name}.png").stat().st_size > 1000
    # --restat recomputes the comparisons from the per-seed runs alone (no training)
    path = out / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                **result,
                "comparisons": [
                    {"a": c["a"], "b": c["b"], "metric": c["metric"], "verdict": "stale"}
                    for c in result["comparisons"]
                ],
            }
        )
    )
    module.main(["--restat", "--out", str(out)])
    assert strict_json(path)["comparisons"] == result["comparisons"]


@pytest.mark.slow
def test_summary_and_comparisons_match_the_runs(fast_run):
    _, _, _, result = fast_run
    runs = result["runs"]
    for arm, metrics in result["summary"].items():
        values = [r["eval_mlm_loss"] for r in runs if r["arm"] == arm]
        stats = metrics["eval_mlm_loss"]
        assert stats["n"] == len(values) == 2
        assert stats["mean"] == pytest.approx(statistics.fmean(values))
        assert stats["std"] == pytest.approx(statistics.stdev(values))
    for c in result["comparisons"]:
        a = {r["seed"]: r[c["metric"]] for r in runs if r["arm"] == c["a"]}
        b = {r["seed"]: r[c["metric"]] for r in runs if r["arm"] == c["b"]}
        diffs = [b[s] - a[s] for s in a]
        assert c["diff_b_minus_a"]["mean"] == pytest.approx(statistics.fmean(diffs))
        assert c["df"] == 1  # 2 seeds
        assert c["per_seed"] == pytest.approx([b[s] - a[s] for s in a])
        assert c["beyond_noise"] is False  # 2 seeds: too few for the course's rule
        assert c["verdict"].startswith("not judged: 2 seeds, the rule needs 3")


@pytest.mark.slow
def test_each_experiment_controls_what_it_claims(fast_run):
    name, _, _, result = fast_run
    cfg, runs = result["config"], result["runs"]
    if name == "dynamic_masking":
        assert cfg["data"]["static_duplicates"] == 10
        assert result["paper"]["static"] == [78.3, 84.3, 92.5]
        assert result["paper"]["dynamic"] == [78.7, 84.0, 92.9]
        for r in runs:  # the training texts were also scored under fresh masks
            assert 0 < r["train_fresh_masks_mlm_loss"] < 20
    elif name == "input_formats":
        batch = cfg["training"]["batch_size_per_format"]
        lengths = cfg["data"]["mean_tokens_per_example"]
        assert batch["sentence-pair"] > 2 * batch["full-sentences"]  # short inputs, more of them
        tokens = {
            a: statistics.fmean(r["train_tokens"] for r in runs if r["arm"] == a)
            for a in result["arms"]
        }
        assert max(tokens.values()) / min(tokens.values()) < 1.3  # ~equal tokens per step
        assert lengths["sentence-pair"] < lengths["segment-pair"]
        for r in runs:
            has_nsp = r["arm"] in ("segment-pair", "sentence-pair")
            assert ("own_format_nsp_accuracy" in r) == has_nsp
        assert result["paper"]["doc-sentences"] == [90.6, 79.7, 84.7, 92.7, 65.6]
    else:
        arms = cfg["training"]["arms"]
        sequences = cfg["training"]["sequences_per_run"]
        for arm, spec in arms.items():
            assert spec["steps"] * spec["batch"] == sequences  # equal tokens, not equal steps
            assert all(r["steps"] == spec["steps"] for r in runs if r["arm"] == arm)
        assert arms["bsz128"]["accumulation"] == 4 and arms["bsz128"]["micro_batch"] == 32
        assert arms["bsz128"]["lr"] == pytest.approx(2 * arms["bsz32"]["lr"])  # sqrt(4) x
        assert arms["bsz128-unscaled-lr"]["lr"] == pytest.approx(arms["bsz8"]["lr"])


@pytest.mark.slow
def test_numbers_do_not_depend_on_the_number_of_workers(tmp_path):
    module = importlib.import_module("dynamic_masking")
    one = module.main(["--fast", "--seeds", "1", "--workers", "1", "--out", str(tmp_path / "a")])
    two = module.main(["--fast", "--seeds", "1", "--workers", "2", "--out", str(tmp_path / "b")])
    key = lambda r: r["arm"]  # noqa: E731
    assert [r["eval_mlm_loss"] for r in sorted(one["runs"], key=key)] == [
        r["eval_mlm_loss"] for r in sorted(two["runs"], key=key)
    ]


# ----- the shared statistics, on numbers worked out by hand ----------------------------------------


def test_paired_comparison_by_hand():
    runs = [{"arm": "a", "seed": s, "m": v} for s, v in enumerate([1.0, 2.0, 3.0])]
    runs += [{"arm": "b", "seed": s, "m": v} for s, v in enumerate([1.5, 2.7, 3.4])]
    c = common.paired_comparison(runs, "a", "b", "m")
    diffs = [0.5, 0.7, 0.4]  # b - a per seed; mean 0.5333, sample std 0.1528
    assert c["diff_b_minus_a"]["mean"] == pytest.approx(statistics.fmean(diffs))
    assert c["diff_b_minus_a"]["std"] == pytest.approx(statistics.stdev(diffs))
    t = statistics.fmean(diffs) / (statistics.stdev(diffs) / math.sqrt(3))
    assert c["t"] == pytest.approx(t) and t == pytest.approx(6.047, abs=1e-3)
    # two-sided p of t = 6.047 with 2 degrees of freedom: 1 - t / sqrt(2 + t^2)
    assert c["df"] == 2 and c["p"] == pytest.approx(1 - t / math.sqrt(2 + t * t))
    assert c["beyond_noise"] and c["exceeds_seed_noise"] and c["same_sign_all_seeds"]


def test_paired_comparison_within_noise_and_unpaired_seeds():
    runs = [{"arm": "a", "seed": s, "m": v} for s, v in enumerate([1.0, 2.0, 3.0, 9.0])]
    runs += [{"arm": "b", "seed": s, "m": v} for s, v in enumerate([1.2, 1.9, 3.1])]
    c = common.paired_comparison(runs, "a", "b", "m")  # seed 3 has no partner: left out
    assert c["diff_b_minus_a"]["n"] == 3
    assert not c["beyond_noise"] and not c["same_sign_all_seeds"]


def test_json_output_has_no_nan_and_no_absolute_paths(tmp_path):
    assert common.finite_or_none({"t": float("nan"), "x": [1.0, float("inf")]}) == {
        "t": None,
        "x": [1.0, None],
    }
    assert common.command_line("/somewhere/batch_size.py", ["--fast", "--out", "/tmp/x"]) == (
        "python experiments/02_roberta/batch_size.py --fast --out <dir>"
    )
    summary = common.summarize([{"arm": "a", "seed": 0, "m": 2.0}], ["a"], ["m"])
    assert summary == {"a": {"m": {"mean": 2.0, "std": 0.0, "n": 1}}}


def test_unigram_loss_by_hand():
    from types import SimpleNamespace

    tok = SimpleNamespace(special_ids=[0, 1], vocab_size=10)
    train = [{"input_ids": [0, 5, 5, 6, 1]}]  # counts {5: 2, 6: 1}, 3 tokens; specials left out
    held = [{"input_ids": [0, 5, 7, 1]}]
    # add-one smoothing over the vocabulary: p(5) = 3/13, p(7) = 1/13
    expected = -(math.log(3 / 13) + math.log(1 / 13)) / 2
    assert common.unigram_loss(train, held, tok) == pytest.approx(expected)
