"""Smoke tests of chapter 04's DistilBERT experiment scripts: each --fast run completes and writes
well-formed results (strict JSON with the fields the notebooks read) into a temporary folder."""

import json
import math
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "04_deberta_distil"
sys.path.insert(0, str(EXPERIMENTS))

import distil_ablation  # noqa: E402
import distil_common  # noqa: E402
import distil_teacher  # noqa: E402
import distil_vs_scratch  # noqa: E402

pytestmark = pytest.mark.slow


def strict_json(path: Path) -> dict:
    """Parse refusing NaN/Infinity, which are not JSON."""

    def refuse(token):
        raise ValueError(f"{path.name} holds {token}, which is not valid JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def fast_teacher(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("teacher")
    distil_teacher.main(["--fast", "--out", str(out)])
    return out


def test_teacher_script_writes_a_loadable_checkpoint(fast_teacher):
    result = strict_json(fast_teacher / "distil_teacher.json")
    assert result["fast"] is True and result["steps"] == 4
    assert result["command"].startswith("python experiments/04_deberta_distil/distil_teacher.py")
    assert "--fast" in result["command"]
    assert 0.0 <= result["final"]["eval_mlm_accuracy"] <= 1.0
    assert (fast_teacher / "distil_teacher.png").stat().st_size > 1000
    teacher, tokenizer = distil_common.load_teacher(fast_teacher / "distil_teacher")
    assert teacher.config.num_hidden_layers == distil_common.TEACHER_SIZES["num_hidden_layers"]
    assert tokenizer.vocab_size <= teacher.config.vocab_size
    assert result["parameters"]["total"] == teacher.num_parameters()


def test_vs_scratch_script(fast_teacher, tmp_path):
    distil_vs_scratch.main(
        ["--fast", "--teacher", str(fast_teacher / "distil_teacher"), "--out", str(tmp_path)]
    )
    result = strict_json(tmp_path / "distil_vs_scratch.json")
    assert {r["model"] for r in result["runs"]} == {"teacher", "distilled", "scratch", "copied"}
    for model in ("teacher", "distilled", "scratch", "copied"):
        for key in ("eval_mlm_loss", "eval_mlm_accuracy", "task_accuracy"):
            stats = result["summary"][model][key]
            assert stats["n"] == 1 and math.isfinite(stats["mean"]) and stats["std"] is None
    assert result["config"]["student_layers_from_teacher"] == [0, 3]
    real = result["parameters"]["real"]
    assert (
        real["bert-base"]["total"] == 109_482_240 and real["distilbert-base"]["total"] == 66_362_880
    )
    assert result["parameters"]["tiny"]["ratio"] > real["ratio"]  # embeddings weigh more when tiny
    assert result["inference_seconds"]["tiny"]["speedup"] > 0
    assert (tmp_path / "distil_vs_scratch.png").stat().st_size > 1000
    (tmp_path / "distil_vs_scratch.png").unlink()  # --plot-only redraws it from the JSON alone
    assert distil_vs_scratch.main(["--plot-only", "--out", str(tmp_path)]) == result
    assert (tmp_path / "distil_vs_scratch.png").stat().st_size > 1000
    path = tmp_path / "distil_vs_scratch.json"  # --restat: the comparisons again, from the runs
    path.write_text(json.dumps({**result, "comparisons": {}}))
    distil_vs_scratch.main(["--restat", "--out", str(tmp_path)])
    assert strict_json(path)["comparisons"] == result["comparisons"]


def test_ablation_script(fast_teacher, tmp_path):
    distil_ablation.main(
        ["--fast", "--teacher", str(fast_teacher / "distil_teacher"), "--out", str(tmp_path)]
    )
    result = strict_json(tmp_path / "distil_ablation.json")
    assert [r["variant"] for r in result["runs"]] == list(distil_ablation.ABLATIONS)
    assert result["paper_table4_glue_points"] == {
        "no L_ce": -2.96,
        "no L_cos": -1.46,
        "no L_mlm": -0.31,
        "random init": -3.69,
    }
    deltas = result["paired_deltas"]["task_accuracy"]
    full = result["runs"][0]["task_accuracy"]
    for run in result["runs"][1:]:
        assert deltas[run["variant"]]["per_seed"] == [pytest.approx(run["task_accuracy"] - full)]
    assert (tmp_path / "distil_ablation.png").stat().st_size > 1000
    assert distil_ablation.main(["--plot-only", "--out", str(tmp_path)]) == result
    path = tmp_path / "distil_ablation.json"  # --restat: the paired deltas again, from the runs
    path.write_text(json.dumps({**result, "paired_deltas": {}}))
    distil_ablation.main(["--restat", "--out", str(tmp_path)])
    assert strict_json(path)["paired_deltas"] == result["paired_deltas"]
    # --merge: rerun two variants; the saved runs of the others stay, the rerun reproduces.
    teacher = ["--teacher", str(fast_teacher / "distil_teacher"), "--out", str(tmp_path)]
    merged = distil_ablation.main(
        ["--fast", "--variants", "triple loss", "L_ce all tokens", "--merge", *teacher]
    )
    assert sorted(r["variant"] for r in merged["runs"]) == sorted(distil_ablation.ABLATIONS)
    assert merged["reproduced"] == {"triple loss seed 0": 0.0, "L_ce all tokens seed 0": 0.0}
    assert merged["paired_deltas"] == result["paired_deltas"]
    with pytest.raises(SystemExit, match="add --merge"):  # a subset alone cannot be compared
        distil_ablation.main(["--fast", "--variants", "no L_ce", *teacher])
    empty = ["--teacher", str(fast_teacher / "distil_teacher"), "--out", str(tmp_path / "new")]
    with pytest.raises(SystemExit, match="nothing to merge into"):  # checked before training
        distil_ablation.main(["--fast", "--variants", "no L_ce", "--merge", *empty])


def test_statistics_helpers():
    stats = distil_common.mean_std([1.0, 2.0, 3.0])
    assert stats == {"mean": 2.0, "std": 1.0, "n": 3}
    d = distil_common.difference_vs_noise([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    assert (
        d["diff"] == 1.0
        and d["se"] == pytest.approx(math.sqrt(2 / 3))
        and d["z"] == pytest.approx(1 / math.sqrt(2 / 3))
    )
    d = distil_common.difference_vs_noise([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])
    assert d["z"] == pytest.approx(-1 / math.sqrt(2 / 3))  # signed, like the difference
    # Paired by seed: the same shift in every seed is beyond noise however large the spread.
    c = distil_common.paired_comparison({0: 1.0, 1: 2.0, 2: 3.1}, {0: 0.0, 1: 1.0, 2: 2.0})
    assert c["diff"] == pytest.approx(1.0333, abs=1e-4) and c["agree"] == 3
    t = c[
        "t"
    ]  # 1.0333 / (0.0577 / sqrt 3) = 31.0; with 2 degrees of freedom p = 1 - t / sqrt(2 + t^2)
    assert t == pytest.approx(31.0, abs=0.05) and c["p"] == pytest.approx(
        1 - t / math.sqrt(2 + t * t)
    )
    assert c["beyond_noise"] and c["exceeds_noise"]
