"""`course pretrain --family electra` and `--family modernbert`: they train, resume, evaluate,
detect (ELECTRA) and export from the command line, and every mistake is one line with exit 2."""

from __future__ import annotations

import pytest
import torch
from test_cli import corpus_dir, one_line_error, run_cli  # noqa: F401 (corpus_dir: a fixture)

from course_lib.config.electra import ElectraConfig
from course_lib.models import ElectraForPreTraining
from course_lib.training.checkpoint import load_pretrained, read_state, save_checkpoint
from course_lib.training.engine import auc_from_histograms
from course_lib.training.recipes import FAMILIES, MODERNBERT_TINY, TINY, get_recipe, prepare_run

pytestmark = pytest.mark.usefixtures("one_thread")


def pretrain(capsys, corpus, out_dir, *extra: str) -> tuple[int, str, str]:
    """A tiny run of the default recipe: batch 4, fp32 (bit-exact), no progress bar."""
    common = ["--corpus", str(corpus), "--output-dir", str(out_dir), "--batch-size", "4"]
    common += ["--precision", "fp32", "--no-progress"]
    return run_cli(capsys, "pretrain", *common, *extra)


@pytest.mark.parametrize(
    ("family", "objective", "words"),
    [
        ("electra", "mlm+nsp", "pretrains by replaced-token detection"),
        ("electra", "mlm", "use objective 'rtd'"),
        ("modernbert", "mlm+nsp", "no sentence-level pretraining head"),
        ("bert", "rtd", "use --family electra"),
    ],
)
def test_an_objective_the_family_cannot_train_is_one_line(
    capsys, tmp_path, family, objective, words
):
    out_dir = tmp_path / "run"
    argv = ["pretrain", "--family", family, "--objective", objective, "--output-dir", str(out_dir)]
    assert words in one_line_error(capsys, *argv)
    assert not out_dir.exists()  # refused before anything was written


def test_the_families_recipes():
    """ModernBERT has its own tiny recipe (its config has other fields); ELECTRA trains the tiny
    recipe post-LN (transformers' ELECTRA is), with ELECTRA's masking and a 1/3 generator."""
    modern = get_recipe("tiny", "modernbert")
    assert modern is MODERNBERT_TINY and modern.max_length == TINY.max_length
    config = modern.model_config(FAMILIES["modernbert"], vocab_size=100, pad_token_id=0)
    assert config.model_type == "modernbert" and not config.unpad
    assert config.is_global(0) and not config.is_global(1)
    electra = get_recipe("tiny", "electra")
    assert electra.training["objective"] == "rtd"
    assert electra.masking == dict(TINY.masking, mask_replace_prob=0.85, random_replace_prob=0.0)
    config = electra.model_config(FAMILIES["electra"], vocab_size=100, pad_token_id=0)
    assert not config.pre_layer_norm and config.hidden_size == TINY.model["hidden_size"]
    model = FAMILIES["electra"].build("rtd", config)
    assert model.generator.config.hidden_size * 3 == config.hidden_size
    assert get_recipe("electra-small", "electra").model["pre_layer_norm"] is False


def test_auc_from_histograms():
    positives, negatives = torch.tensor([0.0, 1, 3]), torch.tensor([2.0, 1, 0])
    # pairs: 3 positives in the top bin beat all 3 negatives; the middle positive beats 2, ties 1
    assert auc_from_histograms(positives, negatives) == pytest.approx((9 + 2 + 0.5) / 12)
    assert auc_from_histograms(torch.tensor([0.0, 4]), torch.tensor([4.0, 0])) == 1.0


def test_electra_pretrain_evaluate_detect_and_resume(capsys, tmp_path, corpus_dir):  # noqa: F811
    code, out, err = pretrain(
        capsys, corpus_dir, tmp_path / "a", "--family", "electra", "--steps", "2", "--samples", "1"
    )
    assert code == 0, err
    assert "ElectraPretrainer (tiny)" in out and "(generator 64 hidden)" in out
    assert "before training (generator): the hidden word" in out
    assert "held-out replaced-token accuracy" in out and "AUC" in out
    checkpoint = tmp_path / "a" / "checkpoint"
    assert f'try: course detect {checkpoint} "' in out
    state = read_state(checkpoint)
    assert (
        state["model_class"] == "ElectraPretrainer" and state["config"]["model_type"] == "electra"
    )
    assert state["generator_config"]["hidden_size"] == 64
    assert state["training_config"]["objective"] == "rtd"
    assert state["run"]["masking"]["random_replace_prob"] == 0.0

    code, out, err = run_cli(capsys, "evaluate", str(checkpoint), "--samples", "1")
    assert code == 0, err
    rows = dict(line.split() for line in out.splitlines() if line.startswith("  eval_"))
    assert set(rows) >= {
        "eval_rtd_accuracy",
        "eval_rtd_auc",
        "eval_rtd_base_rate",
        "eval_mlm_accuracy",
    }
    assert 0.5 < float(rows["eval_rtd_base_rate"]) < 1.0  # most tokens stay original

    code, out, err = run_cli(capsys, "detect", str(checkpoint), "The cat sees the river.")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("the discriminator believes") and "of 6 tokens" in lines[0]
    assert len(lines) == 7 and all("%" in line for line in lines[1:])
    code, out, err = run_cli(capsys, "fill-mask", str(checkpoint), "The [MASK] sees the dog.")
    assert code == 0 and len(out.strip().splitlines()) == 5  # the generator fills masks

    # resumed for 2 more steps (test_electra_resumes_bit_for_bit: exactly as if uninterrupted)
    code, out, err = pretrain(
        capsys,
        corpus_dir,
        tmp_path / "a",
        "--family",
        "electra",
        "--resume",
        "--steps",
        "4",
        "--samples",
        "0",
    )
    assert code == 0, err
    assert f"resumed from {checkpoint} at step 2" in out and read_state(checkpoint)["step"] == 4
    model = load_pretrained(checkpoint)  # generator and discriminator still share embeddings
    assert model.generator.backbone.embeddings.word_embeddings is (
        model.discriminator.backbone.embeddings.word_embeddings
    )


def test_detect_fill_mask_and_evaluate_refuse_models_they_cannot_use(capsys, tmp_path, corpus_dir):  # noqa: F811
    from course_lib.data import load_text_corpus
    from course_lib.tokenization import train_tokenizer

    tokenizer = train_tokenizer("bert", load_text_corpus(corpus_dir).texts("train"), 200)
    sizes = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    config = ElectraConfig(**sizes, vocab_size=tokenizer.vocab_size, embedding_size=16)
    alone = save_checkpoint(tmp_path / "disc", ElectraForPreTraining(config), tokenizer=tokenizer)
    assert "no masked-LM head" in one_line_error(capsys, "fill-mask", str(alone), "a [MASK]")
    assert "try course detect" in one_line_error(capsys, "evaluate", str(alone))
    code, _, _ = run_cli(
        capsys,
        "pretrain",
        "--family",
        "modernbert",
        "--corpus",
        str(corpus_dir),
        "--output-dir",
        str(tmp_path / "m"),
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--samples",
        "0",
        "--no-progress",
    )
    assert code == 0
    line = one_line_error(capsys, "detect", str(tmp_path / "m" / "checkpoint"), "a cat")
    assert line.startswith("course detect: error: a ModernBertForMaskedLM has no replaced-token")


def test_modernbert_pretrain_fill_mask_evaluate_resume_and_export(capsys, tmp_path, corpus_dir):  # noqa: F811
    transformers = pytest.importorskip("transformers")
    code, out, err = pretrain(
        capsys,
        corpus_dir,
        tmp_path / "run",
        "--family",
        "modernbert",
        "--steps",
        "2",
        "--samples",
        "1",
    )
    assert code == 0, err
    assert "ModernBertForMaskedLM (tiny): 2 layers x 192 hidden" in out
    assert "held-out masked-token accuracy" in out
    checkpoint = tmp_path / "run" / "checkpoint"
    state = read_state(checkpoint)
    assert state["config"]["local_attention"] == MODERNBERT_TINY.model["local_attention"]
    code, out, err = run_cli(capsys, "fill-mask", str(checkpoint), "The <mask> sees the dog.")
    assert code == 0 and len(out.strip().splitlines()) == 5, err
    code, out, err = run_cli(capsys, "evaluate", str(checkpoint), "--samples", "0")
    assert code == 0 and "eval_mlm_accuracy" in out, err
    code, out, err = pretrain(
        capsys,
        corpus_dir,
        tmp_path / "run",
        "--family",
        "modernbert",
        "--resume",
        "--steps",
        "3",
        "--samples",
        "0",
    )
    assert code == 0 and f"resumed from {checkpoint} at step 2" in out, err
    code, out, err = run_cli(capsys, "export", str(checkpoint), str(tmp_path / "hf"))
    assert code == 0 and "transformers ModernBertForMaskedLM" in out, err
    pipe = transformers.pipeline("fill-mask", model=str(tmp_path / "hf"), device="cpu")
    assert len(pipe("The <mask> sees the dog.", top_k=3)) == 3


def test_electra_resumes_bit_for_bit(tmp_path, corpus_dir):  # noqa: F811
    """Stopped after 2 of 4 steps and resumed, an ELECTRA run ends with the weights of the
    uninterrupted run: the masks and the generator's samples depend on (seed, step) only."""
    from course_lib.data import load_text_corpus
    from course_lib.training import Trainer

    corpus = load_text_corpus(corpus_dir)
    recipe = get_recipe("tiny", "electra")
    recipe = recipe.replace(model=dict(recipe.model, hidden_size=48, intermediate_size=96))
    first = prepare_run(recipe, "electra", corpus=corpus)

    def trainer(output_dir, run=None):
        run = run or prepare_run(recipe, "electra", corpus=corpus, tokenizer=first.tokenizer)
        config = recipe.training_config(
            max_steps=4, batch_size=4, precision="fp32", progress=False, output_dir=str(output_dir)
        )
        return Trainer(run.model, run.train, run.collator, config, objective=run.objective)

    stopped = trainer(tmp_path / "a", first)
    stopped.callbacks.append(lambda t, r: t.request_stop() if t.step == 2 else None)
    stopped.train()
    resumed = trainer(tmp_path / "a")
    resumed.resume(tmp_path / "a" / "checkpoint")
    resumed.train()
    straight = trainer(tmp_path / "b")
    straight.train()
    assert resumed.step == straight.step == 4
    ours, theirs = resumed.model.state_dict(), straight.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_electra_trains_and_resumes_under_torchrun(tmp_path, corpus_dir):  # noqa: F811
    """Two CPU processes (gloo) train ELECTRA's pair, save one checkpoint, and resume it; the
    generator and discriminator stay one model to DDP (their shared embeddings included)."""
    import os
    import subprocess
    import sys

    out_dir = tmp_path / "run"

    def torchrun(steps: int, *extra: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += ["--nproc_per_node=2", "-m", "course_lib.training.cli", "pretrain"]
        command += ["--family", "electra", "--corpus", str(corpus_dir), "--output-dir"]
        command += [str(out_dir), "--batch-size", "4", "--precision", "fp32", "--no-progress"]
        command += ["--threads", "1", "--samples", "0", "--steps", str(steps), *extra]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)

    first = torchrun(2)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "2 processes" in first.stdout and first.stdout.count("replaced-token accuracy") == 1
    # rank 0 encoded the corpus once; rank 1 opened its stores (no second copy, no half one)
    stores = sorted(p.name.split("-")[0] for p in (out_dir / "token-store").iterdir())
    assert stores == ["scan", "tokenizer", "train", "validation"], stores
    assert first.stdout.count("token store (") == 2
    assert read_state(out_dir / "checkpoint")["step"] == 2
    again = torchrun(4, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed from" in again.stdout
    state = read_state(out_dir / "checkpoint")
    assert state["step"] == 4 and state["training_config"]["objective"] == "rtd"
    model = load_pretrained(out_dir / "checkpoint")
    assert isinstance(model.discriminator, ElectraForPreTraining)
    shared = (m.backbone.embeddings.word_embeddings for m in (model.generator, model.discriminator))
    assert next(shared) is next(shared)
