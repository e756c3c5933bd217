"""The mechanism-lab machinery: presets, the registry, the runner's JSON schema, the rule for
"shows its effect", determinism from seeds, the saved files and the command-line runner."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from course_lib import labs
from course_lib.labs import core
from course_lib.stats import RULE_NAME

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "lab": str,
    "chapter": str,
    "question": str,
    "metric": str,
    "arms": dict,
    "compare": list,
    "expected_sign": str,
    "seeds": int,
    "paper": str,
    "seconds": float,
}


def _toy_seed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Two arms of a real (tiny) fit: a linear model with and without its bias on data y = x + 3.
    The bias is necessary by construction, so 'with_bias' must reach a lower loss."""
    steps = core.choose(preset, fast=100, full=200)
    out = {}
    for arm in ("with_bias", "no_bias"):
        generator = core.seed_everything(seed)
        model = nn.Linear(1, 1, bias=arm == "with_bias").to(device)

        def step_loss(_step: int, model: nn.Module = model, g: torch.Generator = generator):
            x = torch.randn(32, 1, generator=g).to(device)
            return ((model(x) - (x + 3.0)) ** 2).mean()

        core.fit(model, step_loss, steps, lr=0.1, weight_decay=0.0)
        x = torch.randn(256, 1, generator=torch.Generator().manual_seed(99)).to(device)
        with torch.no_grad():
            out[arm] = float(((model(x) - (x + 3.0)) ** 2).mean())
    return out


@pytest.fixture
def toy_lab():
    lab = core.register(
        core.Lab(
            name="toy_bias",
            chapter="01_bert",
            question="Does the bias matter when the target has an offset?",
            metric="held-out squared error",
            arms=("with_bias", "no_bias"),
            compare=("with_bias", "no_bias"),
            expected_sign="-",
            paper="none (a test fixture)",
            run_seed=_toy_seed,
        )
    )
    yield lab
    core.LABS.pop(lab.name)


def _result(a: list[float], b: list[float], sign: str = "+") -> dict:
    return {"arms": {"a": a, "b": b}, "compare": ["a", "b"], "expected_sign": sign}


def test_choose_falls_back_to_the_next_smaller_preset():
    assert core.choose("gpu", fast=1, live=2, full=3, gpu=4) == 4
    assert core.choose("gpu", fast=1, full=3) == 3
    assert core.choose("live", fast=1, full=3) == 1
    with pytest.raises(ValueError, match="preset must be one of"):
        core.choose("huge", fast=1)
    with pytest.raises(ValueError, match="no size given"):
        core.choose("fast", full=3)


def test_default_preset_is_gpu_only_on_cuda():
    assert core.default_preset(torch.device("cpu")) == "full"
    assert core.default_preset(torch.device("cuda")) == "gpu"


def test_a_lab_is_validated_when_it_is_defined():
    fields = dict(
        name="x", chapter="01_bert", question="q", metric="m", arms=("a", "b"),
        compare=("a", "b"), expected_sign="+", paper="p", run_seed=_toy_seed,
    )  # fmt: skip
    core.Lab(**fields)
    with pytest.raises(ValueError, match="chapter must be one of"):
        core.Lab(**{**fields, "chapter": "07_gpt"})
    with pytest.raises(ValueError, match="expected_sign"):
        core.Lab(**{**fields, "expected_sign": "up"})
    with pytest.raises(ValueError, match="compare must name two of its arms"):
        core.Lab(**{**fields, "compare": ("a", "c")})


def test_registry_rejects_duplicates_and_names_the_labs_on_a_typo(toy_lab):
    with pytest.raises(ValueError, match="already registered"):
        core.register(toy_lab)
    with pytest.raises(KeyError, match="toy_bias"):
        core.get_lab("toy_bais")
    assert toy_lab in core.labs_of("01_bert")


def test_every_registered_lab_names_its_paper_and_why():
    assert labs.LABS, "no lab registered"
    for lab in labs.LABS.values():
        assert lab.question and lab.metric and lab.paper, lab.name
        assert len(lab.why) > 40, f"{lab.name}: say why the task isolates the mechanism"


@pytest.mark.parametrize(
    ("a", "b", "sign", "shows"),
    [
        ([1.0, 1.1, 1.2, 1.0, 1.1], [0.0, 0.1, 0.0, 0.2, 0.1], "+", True),
        ([1.0, 1.1, 1.2, 1.0], [0.0, 0.1, 0.0, 0.2], "+", True),  # 4 seeds: judged (>= 3)
        ([1.0, 1.1], [0.0, 0.1], "+", None),  # 2 seeds: not judged
        ([1.0, 0.2, 1.2, 0.0, -0.3], [0.0] * 5, "+", False),  # t = 1.5: p = 0.21
        ([1.0, 1.1, 1.2, 1.0, 1.1, 0.0], [0.0, 0.1, 0.0, 0.2, 0.1, 0.05], "+", True),  # 1 against
        ([1.0, 1.1, 1.2, 1.0, 1.1], [0.0, 0.1, 0.0, 0.2, 0.1], "-", False),  # wrong direction
        ([0.0, 0.1, 0.0, 0.2, 0.1], [1.0, 1.1, 1.2, 1.0, 1.1], "-", True),
        ([1.0] * 5, [0.0] * 5, "+", True),  # identical differences: t = +inf
        ([1.0] * 5, [1.0] * 5, "+", False),  # no difference at all
    ],
)
def test_shows_effect_is_the_course_rule_and_describe_names_it(a, b, sign, shows):
    result = _result(a, b, sign)
    stats = core.summarize(result)
    assert stats["shows_effect"] is bool(shows) and stats["judged"] is (shows is not None)
    label = {True: "shows its effect", False: "does not show its effect"}.get(
        shows, f"not judged: {len(a)} seeds, the rule needs 3"
    )
    assert core.describe(result).endswith(f"): {label} ({RULE_NAME})")


def test_a_two_seed_live_run_is_not_judged_rather_than_failed():
    line = core.describe(_result([0.9, 0.95], [0.1, 0.12]))
    assert "not judged: 2 seeds, the rule needs 3" in line and "show its effect" not in line


def test_summary_t_matches_the_textbook_formula():
    diffs = [0.3, 0.5, 0.4, 0.6, 0.2]
    stats = core.summarize(_result(diffs, [0.0] * 5))
    mean = sum(diffs) / 5
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 4)
    assert stats["t_signed"] == pytest.approx(mean / (sd / math.sqrt(5)))
    assert stats["agree"] == 5


def test_run_lab_returns_the_schema_and_is_deterministic(toy_lab):
    first = core.run_lab("toy_bias", seeds=3, preset="fast", device="cpu", progress=False)
    for key, kind in SCHEMA.items():
        assert isinstance(first[key], kind), key
    assert first["seeds"] == 3 and first["seed_values"] == [0, 1, 2]
    assert all(len(v) == 3 for v in first["arms"].values())
    # the mechanism is necessary by construction: no bias cannot fit the offset of 3
    assert all(
        w < 0.1 < 8 < n for w, n in zip(first["arms"]["with_bias"], first["arms"]["no_bias"])
    )
    again = core.run_lab("toy_bias", seeds=[2, 0], preset="fast", device="cpu", progress=False)
    assert again["arms"]["with_bias"] == [
        first["arms"]["with_bias"][2],
        first["arms"]["with_bias"][0],
    ]
    assert again["arms"]["no_bias"][1] == first["arms"]["no_bias"][0]


def test_run_lab_prints_one_line_per_seed(toy_lab, capsys):
    core.run_lab("toy_bias", seeds=2, preset="fast", device="cpu")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("  toy_bias seed 1 (2/2): with_bias")


def test_fit_decays_the_learning_rate_to_zero():
    model = nn.Linear(2, 1)
    seen = []
    optimizer_steps = []

    def step_loss(step: int):
        seen.append(step)
        return model(torch.ones(4, 2)).pow(2).mean()

    original = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        optimizer_steps.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.optim.AdamW, "step", spy)
        losses = core.fit(model, step_loss, 20, lr=0.1, warmup=0.1)
    assert seen == list(range(20)) and len(losses) == 20
    assert optimizer_steps[0] < optimizer_steps[2] == pytest.approx(0.1)  # warmup, then peak
    assert optimizer_steps[-1] < 0.01 and not model.training


def test_save_and_load_round_trip(toy_lab, tmp_path):
    result = core.run_lab("toy_bias", seeds=2, preset="fast", device="cpu", progress=False)
    path = core.save_result(result, tmp_path / "out")
    assert path.name == "toy_bias.json" and (tmp_path / "out" / "toy_bias.png").stat().st_size > 0
    assert core.load_result(path) == json.loads(json.dumps(result))


def test_load_result_says_what_to_do_with_missing_or_damaged_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="experiments/labs/run.py"):
        core.load_result(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON") as error:
        core.load_result(bad)
    assert "\n" not in str(error.value)
    bad.write_text('{"lab": "x"}')
    with pytest.raises(ValueError, match="missing chapter, arms"):
        core.load_result(bad)
    assert bad.read_text() == '{"lab": "x"}'  # never rewritten


def _runner():
    spec = importlib.util.spec_from_file_location("labs_run", ROOT / "experiments/labs/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runner_lists_labs_and_rejects_unknown_names(capsys):
    run = _runner()
    assert run.main(["--list"]) == 0
    assert "bidirectional_context" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no lab or chapter called 'nope'"):
        run.main(["nope"])
    with pytest.raises(SystemExit, match="--seeds must be at least 1"):
        run.main(["bidirectional_context", "--seeds", "0"])
    assert run.select(["01_bert", "bidirectional_context"]).count("bidirectional_context") == 1


def test_runner_writes_json_and_plot(toy_lab, tmp_path, capsys):
    run = _runner()
    assert run.main(["toy_bias", "--seeds", "2", "--preset", "fast", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "toy_bias.json").read_text())
    assert saved["preset"] == "fast" and saved["seeds"] == 2
    assert "with_bias - no_bias" in capsys.readouterr().out


def test_committed_results_follow_the_schema():
    for path in sorted((ROOT / "experiments/labs/results").glob("*.json")):
        result = core.load_result(path)
        lab = labs.get_lab(result["lab"])  # every committed result belongs to a registered lab
        assert result["chapter"] == lab.chapter and tuple(result["arms"]) == lab.arms, path.name
        assert result["compare"] == list(lab.compare), path.name
        assert all(len(v) == result["seeds"] for v in result["arms"].values()), path.name


def test_runner_summary_is_a_markdown_table_of_the_saved_results(toy_lab, tmp_path, capsys):
    run = _runner()
    run.main(
        ["toy_bias", "--first-seed", "0", "--seeds", "5", "--preset", "fast"]
        + ["--out", str(tmp_path)]
    )
    capsys.readouterr()
    assert run.main(["--summary", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| chapter | lab |") and len(lines) == 5
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[:4] == ["01_bert", "toy_bias", "with_bias − no_bias", "0–4"]
    assert cells[7] == "5/5" and cells[8] == "yes"  # no bias can never fit the offset
    assert RULE_NAME in lines[4]  # the table names the rule its "shows" column applies


def _fake_run_lab(calls: list):
    """A stand-in for run_lab that trains nothing and records the seeds it was given."""

    def run_lab(name, seeds, preset=None, device="auto"):
        seeds = list(seeds)
        calls.append((name, seeds))
        return {
            "lab": name,
            "chapter": "01_bert",
            "arms": {"a": [1.0 + 0.01 * s for s in seeds], "b": [0.0 for _ in seeds]},
            "compare": ["a", "b"],
            "expected_sign": "+",
            "seeds": len(seeds),
            "seed_values": seeds,
            "seconds": 0.0,
            "metric": "m",
        }

    return run_lab


def test_runner_first_seed_passes_fresh_seeds_and_records_them(tmp_path, monkeypatch, capsys):
    run = _runner()
    calls: list = []
    monkeypatch.setattr(run, "run_lab", _fake_run_lab(calls))
    argv = ["bidirectional_context", "--first-seed", "100", "--seeds", "3", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    assert calls == [("bidirectional_context", [100, 101, 102])]
    saved = json.loads((tmp_path / "bidirectional_context.json").read_text())
    assert saved["seed_values"] == [100, 101, 102]
    out = capsys.readouterr().out
    assert "seeds 100–102" in out and RULE_NAME in out
    with pytest.raises(SystemExit, match="--first-seed must be 0 or more"):
        run.main(["bidirectional_context", "--first-seed", "-1"])


def test_runner_never_silently_replaces_results_made_on_other_seeds(tmp_path, monkeypatch):
    run = _runner()
    calls: list = []
    monkeypatch.setattr(run, "run_lab", _fake_run_lab(calls))
    committed = tmp_path / "bidirectional_context.json"
    saved = _fake_run_lab([])("bidirectional_context", range(5))  # a saved run on seeds 0-4
    committed.write_text(json.dumps(saved))
    before = committed.read_text()
    with pytest.raises(SystemExit, match="holds seeds 0–4; this run is seeds 7–8.*--overwrite"):
        run.main(
            ["bidirectional_context", "--first-seed", "7", "--seeds", "2", "--out", str(tmp_path)]
        )
    assert calls == [] and (tmp_path / committed.name).read_text() == before  # nothing trained
    # the same seeds as the saved file: a plain rerun replaces it, as before
    argv = ["bidirectional_context", "--first-seed", "0", "--seeds", "5"]
    assert run.main([*argv, "--out", str(tmp_path)]) == 0
    argv = ["bidirectional_context", "--first-seed", "7", "--seeds", "2", "--overwrite"]
    assert run.main([*argv, "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / committed.name).read_text())["seed_values"] == [7, 8]
    assert [c[1] for c in calls] == [[0, 1, 2, 3, 4], [7, 8]]


def test_default_run_is_the_fresh_seeds_and_design_seeds_are_marked(tmp_path, monkeypatch):
    run = _runner()
    calls: list = []
    monkeypatch.setattr(run, "run_lab", _fake_run_lab(calls))
    assert run.main(["bidirectional_context", "--out", str(tmp_path)]) == 0
    assert calls == [("bidirectional_context", list(labs.FRESH_SEEDS))]
    assert min(labs.FRESH_SEEDS) >= labs.DESIGN_SEED_LIMIT and len(labs.FRESH_SEEDS) >= 10
    assert not set(labs.GUARD_SEEDS) & set(labs.FRESH_SEEDS)
    assert all(s >= labs.DESIGN_SEED_LIMIT for s in labs.GUARD_SEEDS)
    assert core.seed_role(labs.FRESH_SEEDS) == "fresh"
    assert core.seed_role([0, 1, 1000]) == "design"  # one design seed makes the run a design run


def test_design_seeds_are_kept_apart_and_refused_when_not_design_seeds(
    tmp_path, monkeypatch, capsys
):
    run = _runner()
    monkeypatch.setattr(run, "run_lab", _fake_run_lab([]))
    design, out = tmp_path / "design", tmp_path / "out"
    argv = ["bidirectional_context", "--first-seed", "0", "--seeds", "4", "--out", str(design)]
    assert run.main(argv) == 0
    argv = ["bidirectional_context", "--design-from", str(design), "--out", str(out)]
    assert run.main(argv) == 0
    saved = core.load_result(out / "bidirectional_context.json")
    assert saved["seed_values"] == list(labs.FRESH_SEEDS)
    assert saved["design"]["seed_values"] == [0, 1, 2, 3]
    part = core.design_part(saved)
    assert part["seeds"] == 4 and part["arms"]["a"] == [1.0, 1.01, 1.02, 1.03]
    assert core.design_part({"lab": "x"}) == {}
    capsys.readouterr()
    assert run.main(["--summary", "--out", str(out)]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert "| 1000–1009 |" in row and row.rstrip("| ").endswith("0–3: +1.015, t +157.2, yes")
    # a "design" folder holding fresh seeds is refused, as is a missing one (before training)
    with pytest.raises(SystemExit, match="design seeds are below 1000"):
        run.main(["bidirectional_context", "--design-from", str(out), "--out", str(tmp_path / "x")])
    calls: list = []
    monkeypatch.setattr(run, "run_lab", _fake_run_lab(calls))
    with pytest.raises(SystemExit, match="no lab results there"):
        run.main(["c2p_needed", "--design-from", str(design), "--out", str(tmp_path / "y")])
    assert calls == []
