"""The `course` command line: one-line errors with exit code 2, and a full tiny run end to end."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pytest
import torch

from course_lib.models import RobertaForMaskedLM
from course_lib.training.checkpoint import read_state, save_checkpoint
from course_lib.training.cli import main

ANIMALS = "cat dog bird fish horse mouse lion tiger bear wolf".split()
PLACES = "garden house river forest field city market school".split()
VERBS = "sees finds follows likes watches hears".split()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """30 small documents of templated sentences (a corpus the test can train on in seconds)."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    for d in range(30):
        sentences = [
            f"The {rng.choice(ANIMALS)} {rng.choice(VERBS)} the {rng.choice(ANIMALS)} "
            f"in the {rng.choice(PLACES)} every morning."
            for _ in range(12)
        ]
        (root / f"doc{d:02d}.txt").write_text(" ".join(sentences))
    return root


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *argv) -> str:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_unknown_family_is_one_line(capsys):
    line = one_line_error(capsys, "pretrain", "--family", "gpt2")
    assert line == "course pretrain: error: unknown family 'gpt2'; choose one of " + str(
        sorted(["albert", "bert", "deberta", "distilbert", "electra", "modernbert", "roberta"])
    )


@pytest.mark.parametrize("value", ["0", "-2.5"])
def test_non_positive_minutes_is_one_line(capsys, value):
    assert "--minutes must be > 0" in one_line_error(capsys, "pretrain", "--minutes", value)


def test_missing_corpus_path_is_one_line(capsys, tmp_path):
    line = one_line_error(capsys, "pretrain", "--corpus", str(tmp_path / "nope.txt"))
    assert "does not exist" in line and "nope.txt" in line


def test_unknown_preset_is_one_line(capsys):
    assert "unknown preset 'huge'" in one_line_error(capsys, "pretrain", "--preset", "huge")


def test_argparse_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain", "--minutes", "five"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid float value: 'five'" in err[0]


@pytest.fixture
def roberta_checkpoint(tmp_path, corpus_dir):
    """A real checkpoint of another family (RoBERTa), with its tokenizer."""
    from course_lib.data import load_text_corpus
    from course_lib.models import RobertaConfig
    from course_lib.tokenization import train_tokenizer

    corpus = load_text_corpus(corpus_dir)
    tokenizer = train_tokenizer("roberta", corpus.texts("train"), vocab_size=400)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    return save_checkpoint(tmp_path / "roberta", RobertaForMaskedLM(config), tokenizer=tokenizer)


def test_a_checkpoint_of_another_family_is_refused(capsys, roberta_checkpoint):
    line = one_line_error(
        capsys, "fill-mask", str(roberta_checkpoint), "a <mask>", "--family", "bert"
    )
    assert "holds a roberta model, not bert" in line
    line = one_line_error(capsys, "pretrain", "--resume", str(roberta_checkpoint))
    assert "holds a roberta model, not bert" in line


def test_a_directory_that_is_not_a_checkpoint_is_refused(capsys, tmp_path):
    line = one_line_error(capsys, "evaluate", str(tmp_path))
    assert "is not a checkpoint" in line
    assert "does not exist" in one_line_error(capsys, "evaluate", str(tmp_path / "missing"))


def test_console_script_exits_2_with_one_line():
    exe = shutil.which("course") or str(
        __import__("pathlib").Path(sys.executable).with_name("course")
    )
    proc = subprocess.run([exe, "pretrain", "--minutes", "-1"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "course pretrain: error: --minutes must be > 0, got -1"


def test_pretrain_fill_mask_evaluate_and_resume_end_to_end(capsys, tmp_path, corpus_dir):
    out_dir = tmp_path / "run"
    common = ["--preset", "bert-tiny", "--corpus", str(corpus_dir), "--output-dir", str(out_dir)]
    common += ["--batch-size", "4", "--precision", "fp32", "--no-progress"]
    code, out, err = run_cli(capsys, "pretrain", *common, "--steps", "3", "--samples", "2")
    assert code == 0, err
    assert "before training: the hidden word is in the top 5 for" in out
    assert "after training: the hidden word is in the top 5 for" in out
    assert "held-out masked-token accuracy" in out and "after 3 steps" in out
    checkpoint = out_dir / "checkpoint"
    state = read_state(checkpoint)
    assert state["step"] == 3 and state["run"]["corpus"] == str(corpus_dir)
    assert state["config"]["num_hidden_layers"] == 2 and state["config"]["hidden_size"] == 128
    assert json.loads((checkpoint / "tokenizer.json").read_text())["model"]["type"] == "WordPiece"

    code, out, err = run_cli(capsys, "fill-mask", str(checkpoint), "The cat sees the [MASK].")
    assert code == 0, err
    rows = out.strip().splitlines()
    assert len(rows) == 5 and all("%" in r for r in rows)
    scores = [float(r.split("%")[0]) for r in rows]
    assert scores == sorted(scores, reverse=True)

    code, out, err = run_cli(capsys, "evaluate", str(checkpoint), "--samples", "2")
    assert code == 0, err
    accuracy = float(next(r for r in out.splitlines() if "eval_mlm_accuracy" in r).split()[-1])
    assert 0.0 <= accuracy <= 1.0 and "fill-mask: the hidden word" in out

    code, out, err = run_cli(
        capsys, "pretrain", *common, "--resume", "--steps", "5", "--samples", "0"
    )
    assert code == 0, err
    assert f"resumed from {checkpoint} at step 3" in out
    assert read_state(checkpoint)["step"] == 5


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "deberta", "distilbert"])
def test_every_family_builds_and_trains_from_the_tiny_recipe(family):
    from course_lib.training.recipes import FAMILIES, get_recipe

    fam = FAMILIES[family]
    sizes = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1)
    config = get_recipe("tiny", family).model_config(fam, vocab_size=100, pad_token_id=0, **sizes)
    assert config.model_type == family and config.pre_layer_norm
    model = fam.model_class("mlm")(config)
    ids = torch.randint(5, 100, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    assert out.mlm_logits.shape == (2, 100) and torch.isfinite(out.loss)
    out.loss.backward()
    if fam.pretraining_model is None:
        with pytest.raises(ValueError, match="no sentence-level pretraining head"):
            fam.model_class("mlm+nsp")


def test_the_default_recipe_follows_the_device(capsys, tmp_path, corpus_dir, monkeypatch):
    """No --preset: 'small-gpu' where CUDA is found (said in one line), 'tiny' on a CPU."""
    import course_lib.training.cli as cli
    import course_lib.training.device as device
    from course_lib.training.recipes import FAMILIES, SMALL_GPU, TINY, default_recipe_name

    assert default_recipe_name("cuda") == "small-gpu"
    assert default_recipe_name("cpu") == default_recipe_name("mps") == "tiny"
    # Larger than the CPU recipe in every dimension a GPU pays for, and a valid BERT config.
    assert SMALL_GPU.model["hidden_size"] > TINY.model["hidden_size"]
    assert SMALL_GPU.model["num_hidden_layers"] > TINY.model["num_hidden_layers"]
    assert SMALL_GPU.max_length > TINY.max_length
    assert SMALL_GPU.minutes == TINY.minutes == 5
    fam = FAMILIES["bert"]
    config = SMALL_GPU.model_config(fam, vocab_size=100, pad_token_id=0)
    assert config.hidden_size % config.num_attention_heads == 0

    plans = []
    monkeypatch.setattr(cli, "_pretrain", lambda plan, corpus: plans.append(plan) or 0)
    for found, expected in (("cuda", "small-gpu"), ("cpu", "tiny")):
        monkeypatch.setattr(device, "select_device", lambda pref="auto", t=found: torch.device(t))
        out_dir = tmp_path / found
        code, out, err = run_cli(
            capsys, "pretrain", "--corpus", str(corpus_dir), "--output-dir", str(out_dir)
        )
        assert code == 0, err
        assert plans[-1].recipe.name == expected
        said = "a CUDA GPU was found: training the small-gpu recipe" in out
        assert said == (found == "cuda"), out
    # An explicit --preset wins on a GPU, silently.
    monkeypatch.setattr(device, "select_device", lambda pref="auto": torch.device("cuda"))
    code, out, err = run_cli(
        capsys,
        "pretrain",
        "--preset",
        "tiny",
        "--corpus",
        str(corpus_dir),
        "--output-dir",
        str(tmp_path / "explicit"),
    )
    assert code == 0 and plans[-1].recipe.name == "tiny" and "CUDA" not in out
