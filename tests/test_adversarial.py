"""A careless student and a hostile input: every case gets one clear line and loses nothing.

Each CLI case asserts the exit code, that stderr (or stdout for a non-error) is one line without
"Traceback" that names the fix, and that no file in the workspace changed (hashes before and
after). The library cases assert the exception type and that its message names the field.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from course_lib.training.checkpoint import (
    MODEL_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    CheckpointError,
    read_state,
    save_checkpoint,
)
from course_lib.training.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _restore_rayon_threads(monkeypatch):
    """`course pretrain --threads N` sets RAYON_NUM_THREADS for the tokenizer trainer; undo it."""
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)


ANIMALS = "cat dog bird fish horse mouse lion tiger bear wolf".split()
VERBS = "sees finds follows likes watches hears".split()
PLACES = "garden house river forest field city market school".split()
# The smallest run the CLI offers: bert-tiny sizes, a few examples per batch, fp32, no samples.
TINY = ["--preset", "bert-tiny", "--batch-size", "4", "--precision", "fp32", "--no-progress"]
TINY += ["--samples", "0", "--threads", "1"]


def _document(rng: random.Random, n: int = 10) -> str:
    return " ".join(
        f"The {rng.choice(ANIMALS)} {rng.choice(VERBS)} the {rng.choice(ANIMALS)} in the "
        f"{rng.choice(PLACES)} every morning."
        for _ in range(n)
    )


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under `root`: path -> sha256 of the content ('dir' for folders)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        found[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`course *argv` in-process: (exit code, stdout, stderr); argparse's exits included."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    for d in range(24):
        (root / f"doc{d:02d}.txt").write_text(_document(rng))
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus_dir) -> Path:
    """One tiny 2-step run, started from another directory with a relative corpus path."""
    import os

    threads = torch.get_num_threads()
    out = tmp_path_factory.mktemp("trained") / "run"
    cwd, rayon = os.getcwd(), os.environ.get("RAYON_NUM_THREADS")
    os.chdir(corpus_dir.parent)
    try:
        code = main(
            [
                "pretrain",
                *TINY,
                "--steps",
                "2",
                "--corpus",
                corpus_dir.name,
                "--output-dir",
                str(out),
            ]
        )
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        if rayon is None:
            os.environ.pop("RAYON_NUM_THREADS", None)
    assert code == 0
    return out / "checkpoint"


@pytest.fixture
def workspace(tmp_path, trained) -> Path:
    """A folder of the student's: a copy of the trained run (its checkpoint), notes, corpora."""
    shutil.copytree(trained.parent, tmp_path / "run")
    (tmp_path / "notes.txt").write_text("my notes\n")
    return tmp_path


# --- arguments: refused before any work, one line, nothing written ---------------------------

ARGUMENT_CASES = {
    "minutes inf": (["--minutes", "inf"], "--minutes must be a finite number > 0, got inf"),
    "minutes nan": (["--minutes", "nan"], "--minutes must be a finite number > 0, got nan"),
    "lr nan": (["--lr", "nan"], "--lr must be a finite number > 0, got nan"),
    "lr inf": (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    "lr negative": (["--lr", "-0.001"], "--lr must be > 0"),
    "seed -1": (["--seed", "-1"], "--seed must be in [0, 4294967295], got -1"),
    "seed 10**23": (["--seed", str(10**23)], "--seed must be in [0, 4294967295]"),
    "seed 1e23": (["--seed", "1e23"], "invalid int value: '1e23'"),
    "threads 0": (["--threads", "0"], "--threads must be > 0"),
    "samples -1": (["--samples", "-1"], "--samples must be >= 0, got -1"),
    "steps 0": (["--steps", "0"], "--steps must be > 0"),
    "batch size -3": (["--batch-size", "-3"], "--batch-size must be > 0"),
    "steps and minutes": (["--steps", "3", "--minutes", "1"], "not allowed with argument"),
    "unknown family": (["--family", "gpt2"], "unknown family 'gpt2'"),
}


@pytest.mark.parametrize("case", sorted(ARGUMENT_CASES))
def test_bad_pretrain_arguments_are_one_line(capsys, workspace, case):
    args, fragment = ARGUMENT_CASES[case]
    before = snapshot(workspace)
    code, _, err = run(capsys, "pretrain", "--output-dir", workspace / "new", *args)
    assert code == 2
    assert fragment in one_line(err)
    assert snapshot(workspace) == before


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["evaluate", "{ckpt}", "--samples", "-2"], "--samples must be >= 0, got -2"),
        (["fill-mask", "{ckpt}", "a [MASK]", "--top-k", "0"], "--top-k must be > 0"),
        (["fill-mask", "{ckpt}", "no mask here"], "the text has no mask token '[MASK]'"),
        (["evaluate", "{ws}"], "is not a checkpoint: trainer_state.json is missing"),
        (["evaluate", "{ws}/nothing"], "does not exist"),
        (["fill-mask", "{ckpt}", "a [MASK]", "--family", "roberta"], "not roberta"),
    ],
    ids=["evaluate samples", "top-k 0", "no mask", "not a checkpoint", "missing", "family"],
)
def test_bad_inference_arguments_are_one_line(capsys, workspace, argv, fragment):
    ckpt = workspace / "run" / "checkpoint"
    argv = [a.format(ckpt=ckpt, ws=workspace) for a in argv]
    before = snapshot(workspace)
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert fragment in one_line(err)
    assert snapshot(workspace) == before


# --- the output folder: checked before any corpus or tokenizer work ---------------------------


def test_output_dir_that_is_a_file(capsys, workspace):
    before = snapshot(workspace)
    code, _, err = run(capsys, "pretrain", *TINY, "--output-dir", workspace / "notes.txt")
    assert code == 2
    assert one_line(err).endswith("is a file; pass a folder (it is created if needed)")
    code, _, err = run(capsys, "pretrain", *TINY, "--output-dir", workspace / "notes.txt" / "x")
    assert code == 2 and "which is a file" in one_line(err)
    assert snapshot(workspace) == before


def test_output_dir_not_writable(capsys, workspace, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # root can write anywhere: simulate it
    before = snapshot(workspace)
    code, _, err = run(capsys, "pretrain", *TINY, "--output-dir", workspace / "out")
    assert code == 2
    assert "is not writable (Permission denied); pass a folder you can write to" in one_line(err)
    assert snapshot(workspace) == before


def test_output_dir_that_is_a_checkpoint(capsys, workspace):
    before = snapshot(workspace)
    code, _, err = run(capsys, "pretrain", *TINY, "--output-dir", workspace / "run" / "checkpoint")
    assert code == 2
    assert one_line(err).endswith(
        f"is a checkpoint itself; pass the run folder that holds it ({workspace / 'run'})"
    )
    assert snapshot(workspace) == before


def test_an_existing_run_is_not_replaced_without_resume(capsys, workspace, corpus_dir):
    before = snapshot(workspace)
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--steps",
        "1",
        "--corpus",
        corpus_dir,
        "--output-dir",
        workspace / "run",
    )
    assert code == 2
    line = one_line(err)
    assert "already holds a run (step 2); use --resume to continue it, --overwrite" in line
    assert snapshot(workspace) == before


def test_resuming_another_checkpoint_into_an_existing_run_needs_overwrite(capsys, workspace):
    shutil.copytree(workspace / "run", workspace / "other")
    before = snapshot(workspace)
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--resume",
        workspace / "other" / "checkpoint",
        "--output-dir",
        workspace / "run",
    )
    assert code == 2 and "already holds a run" in one_line(err)
    assert snapshot(workspace) == before


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_that_is_not_a_checkpoint_is_never_replaced(capsys, workspace, overwrite):
    (workspace / "mine" / "checkpoint").mkdir(parents=True)
    (workspace / "mine" / "checkpoint" / "thesis.txt").write_text("years of work")
    before = snapshot(workspace)
    extra = ["--overwrite"] if overwrite else []
    code, _, err = run(capsys, "pretrain", *TINY, *extra, "--output-dir", workspace / "mine")
    assert code == 2
    assert "is not a course checkpoint (it holds thesis.txt)" in one_line(err)
    assert snapshot(workspace) == before


def test_overwrite_replaces_the_run_only_when_asked(capsys, workspace, corpus_dir):
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--steps",
        "1",
        "--corpus",
        corpus_dir,
        "--overwrite",
        "--output-dir",
        workspace / "run",
    )
    assert code == 0, err
    assert read_state(workspace / "run" / "checkpoint")["step"] == 1
    assert (workspace / "notes.txt").read_text() == "my notes\n"
    # the run's checkpoint and, next to it, the token stores of its file corpus (issue 40)
    assert sorted(p.name for p in (workspace / "run").iterdir()) == ["checkpoint", "token-store"]


# --- corpora: one line that names what to change in the file ----------------------------------


def _corpus_case(root: Path, case: str) -> Path:
    rng = random.Random(1)
    if case == "not utf-8 txt":
        path = root / "latin1.txt"
        path.write_bytes(("Caf\u00e9 au lait. " * 20).encode("latin-1"))
    elif case == "not utf-8 jsonl":
        path = root / "latin1.jsonl"
        path.write_bytes(b'{"text": "fine"}\n{"text": "Caf\xe9"}\n')
    elif case == "jsonl without text":
        path = root / "records.jsonl"
        path.write_text("\n".join(json.dumps({"body": _document(rng)}) for _ in range(5)))
    elif case == "single document txt":
        path = root / "one.txt"
        path.write_text(_document(rng, 30))
    elif case == "csv":
        path = root / "data.csv"
        path.write_text("a,b\n1,2\n")
    elif case == "empty folder":
        path = root / "empty"
        path.mkdir()
    elif case == "invalid jsonl":
        path = root / "broken.jsonl"
        path.write_text('{"text": "ok"}\n{"text": \n')
    else:
        raise AssertionError(case)
    return path


CORPUS_CASES = {
    "not utf-8 txt": "latin1.txt is not UTF-8 text (byte 0xe9 at line 1); save the file as UTF-8",
    "not utf-8 jsonl": "is not UTF-8 text (byte 0xe9 at line 2); save the file as UTF-8",
    "jsonl without text": "records.jsonl:1 has no 'text' field (found ['body']); write each line",
    "single document txt": "holds 1 document(s), too few",
    "csv": "is a .csv file; use .txt or .jsonl",
    "empty folder": "No .txt or .jsonl files under",
    "invalid jsonl": "broken.jsonl:2 is not valid JSON",
}


@pytest.mark.parametrize("case", sorted(CORPUS_CASES))
def test_bad_corpora_are_one_line_naming_the_fix(capsys, workspace, case):
    corpus = _corpus_case(workspace, case)
    before = snapshot(workspace)
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--steps",
        "1",
        "--corpus",
        corpus,
        "--output-dir",
        workspace / "new",
    )
    assert code == 2
    line = one_line(err)
    assert CORPUS_CASES[case] in line
    assert "text_field=" not in line and "validation_fraction" not in line  # no Python keywords
    assert snapshot(workspace) == before


def test_a_single_txt_file_is_split_into_documents_at_blank_lines(capsys, tmp_path):
    rng = random.Random(2)
    corpus = tmp_path / "book.txt"
    corpus.write_text("\n\n".join(_document(rng) for _ in range(24)))
    code, out, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--steps",
        "1",
        "--corpus",
        corpus,
        "--output-dir",
        tmp_path / "run",
    )
    assert code == 0, err
    assert read_state(tmp_path / "run" / "checkpoint")["step"] == 1


# --- damaged or mismatched checkpoints: one line naming the file and the fix ------------------


def _damage(checkpoint: Path, case: str) -> None:
    state_path = checkpoint / STATE_FILE
    state = json.loads(state_path.read_text())
    if case == "weights truncated":
        data = (checkpoint / MODEL_FILE).read_bytes()
        (checkpoint / MODEL_FILE).write_bytes(data[: len(data) // 2])
    elif case == "weights empty":
        (checkpoint / MODEL_FILE).write_bytes(b"")
    elif case == "weights missing":
        (checkpoint / MODEL_FILE).unlink()
    elif case == "state invalid json":
        state_path.write_text(state_path.read_text()[:-40])
    elif case == "state is a list":
        state_path.write_text("[1, 2, 3]")
    elif case == "tokenizer garbage":
        (checkpoint / "tokenizer.json").write_text("{not json")
    elif case == "tokenizer of another run":
        from course_lib.tokenization import train_tokenizer

        texts = [_document(random.Random(i)) for i in range(20)]
        train_tokenizer("bert", texts, vocab_size=120).save(checkpoint / "tokenizer.json")
        del state["tokenizer"]  # a checkpoint from before the hash: the sizes still differ
    elif case == "tokenizer swapped":
        from course_lib.tokenization import train_tokenizer

        texts = [_document(random.Random(i)) for i in range(20)]
        train_tokenizer("bert", texts, vocab_size=120).save(checkpoint / "tokenizer.json")
    elif case == "tokenizer of another family":
        from course_lib.tokenization import train_tokenizer

        texts = [_document(random.Random(i)) for i in range(20)]
        train_tokenizer("roberta", texts, vocab_size=300).save(checkpoint / "tokenizer.json")
        del state["tokenizer"]
    elif case == "config does not fit weights":
        state["config"]["intermediate_size"] = 64
    elif case == "config missing":
        del state["config"]
    elif case == "config invalid":
        state["config"]["hidden_size"] = "big"
    if case in (
        "tokenizer of another run",
        "tokenizer of another family",
        "config does not fit weights",
        "config missing",
        "config invalid",
    ):
        state_path.write_text(json.dumps(state))


DAMAGE_CASES = {
    "weights truncated": "model.safetensors: it is damaged or truncated",
    "weights empty": "model.safetensors: it is empty",
    "weights missing": "model.safetensors: it is missing",
    "state invalid json": "trainer_state.json is damaged (",
    "state is a list": "trainer_state.json holds a JSON list",
    "tokenizer garbage": "tokenizer.json cannot be read",
    "tokenizer of another run": "entries but the model was trained with",
    "tokenizer swapped": "is not the tokenizer this model was trained with",
    "tokenizer of another family": "is a bpe tokenizer but a bert model needs a wordpiece one",
    "config does not fit weights": "its tensors do not fit the config in trainer_state.json",
    "config missing": "has no model config",
    "config invalid": "hidden_size='big' is invalid",
}
# Resuming builds the model from the recipe, so a changed config shows as a difference.
RESUME_DAMAGE = {
    "config does not fit weights": "saved from a different config (intermediate_size: 64 vs 512)",
    "config invalid": "saved from a different config (hidden_size: 'big' vs 128)",
}


@pytest.mark.parametrize("command", ["fill-mask", "evaluate", "resume"])
@pytest.mark.parametrize("case", sorted(DAMAGE_CASES))
def test_damaged_checkpoints_are_one_line_naming_the_file(capsys, workspace, case, command):
    checkpoint = workspace / "run" / "checkpoint"
    _damage(checkpoint, case)
    before = snapshot(workspace)
    argv = {
        "fill-mask": ["fill-mask", checkpoint, "The cat sees the [MASK]."],
        "evaluate": ["evaluate", checkpoint, "--samples", "0"],
        "resume": [
            "pretrain",
            *TINY,
            "--output-dir",
            workspace / "run",
            "--resume",
            "--steps",
            "4",
        ],
    }[command]
    code, _, err = run(capsys, *argv)
    assert code == 2
    line = one_line(err)
    expected = RESUME_DAMAGE.get(case, DAMAGE_CASES[case]) if command == "resume" else None
    assert (expected or DAMAGE_CASES[case]) in line
    assert str(checkpoint) in line
    assert snapshot(workspace) == before


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("optimizer truncated", "cannot load the optimizer state from"),
        ("optimizer missing", "optimizer.safetensors: it is missing"),
        ("training_config missing", "has no training_config, so the run cannot be resumed"),
        ("step missing", "has no step, so the run cannot be resumed"),
    ],
)
def test_a_checkpoint_that_cannot_be_resumed_is_one_line(capsys, workspace, case, fragment):
    checkpoint = workspace / "run" / "checkpoint"
    if case == "optimizer truncated":
        data = (checkpoint / OPTIMIZER_FILE).read_bytes()
        (checkpoint / OPTIMIZER_FILE).write_bytes(data[:100])
    elif case == "optimizer missing":
        (checkpoint / OPTIMIZER_FILE).unlink()
    else:
        state = json.loads((checkpoint / STATE_FILE).read_text())
        del state[case.split()[0]]
        (checkpoint / STATE_FILE).write_text(json.dumps(state))
    before = snapshot(workspace)
    code, _, err = run(
        capsys, "pretrain", *TINY, "--output-dir", workspace / "run", "--resume", "--steps", "4"
    )
    assert code == 2
    assert fragment in one_line(err)
    assert snapshot(workspace) == before


STATE_KEYS = (
    "config data elapsed_s format_version grad_scaler history model_class optimizer rng run "
    "schedule step stop_reason tokenizer training_config world_size"
).split()


def test_the_state_fuzz_below_covers_every_entry_of_a_real_checkpoint(trained):
    assert sorted(read_state(trained)) == STATE_KEYS


@pytest.mark.parametrize("command", ["resume", "fill-mask", "evaluate"])
@pytest.mark.parametrize(
    "key, value",
    [(key, "x") for key in STATE_KEYS]
    + [("model_class", [1]), ("step", -1), ("elapsed_s", float("nan")), ("run", {"corpus": 3})],
)
def test_any_state_entry_of_the_wrong_type_is_one_line_or_harmless(
    capsys, workspace, key, value, command
):
    checkpoint = workspace / "run" / "checkpoint"
    state = json.loads((checkpoint / STATE_FILE).read_text())
    (checkpoint / STATE_FILE).write_text(json.dumps({**state, key: value}))
    before = snapshot(workspace)
    argv = {
        "fill-mask": ["fill-mask", checkpoint, "The cat sees the [MASK]."],
        "evaluate": ["evaluate", checkpoint, "--samples", "0"],
        "resume": [
            "pretrain",
            *TINY,
            "--output-dir",
            workspace / "run",
            "--resume",
            "--steps",
            "3",
        ],
    }[command]
    code, _, err = run(capsys, *argv)
    assert code in (0, 2), err
    if code == 2:
        assert "trainer_state.json" in one_line(err) or "checkpoint" in one_line(err)
        assert snapshot(workspace) == before


def test_resuming_a_finished_run_stops_at_once(capsys, workspace):
    before = snapshot(workspace)
    code, out, err = run(capsys, "pretrain", *TINY, "--output-dir", workspace / "run", "--resume")
    assert code == 0 and not err
    line = one_line(out)
    assert (
        "already finished its budget (step 2 of 2; pass a larger --steps, e.g. --steps 4)" in line
    )
    assert snapshot(workspace) == before


@pytest.mark.parametrize(
    "flag, value, saved",
    [
        ("--seed", "3", "0"),
        ("--batch-size", "8", "4"),
        ("--preset", "bert-mini", "bert-tiny"),
        ("--objective", "mlm+nsp", "mlm"),
    ],
)
def test_resume_refuses_flags_that_differ_from_the_run(capsys, workspace, flag, value, saved):
    before = snapshot(workspace)
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--output-dir",
        workspace / "run",
        "--resume",
        "--steps",
        "4",
        flag,
        value,
    )
    assert code == 2
    assert f"was trained with {flag} {saved}; resume with" in one_line(err)
    assert snapshot(workspace) == before


def test_a_moved_corpus_names_the_corpus_flag(capsys, workspace):
    state_path = workspace / "run" / "checkpoint" / STATE_FILE
    state = json.loads(state_path.read_text())
    state["run"]["corpus"] = str(workspace / "moved-away")
    state_path.write_text(json.dumps(state))
    before = snapshot(workspace)
    for argv in (
        ["evaluate", workspace / "run" / "checkpoint"],
        ["pretrain", *TINY, "--output-dir", workspace / "run", "--resume", "--steps", "4"],
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert "moved-away', does not exist here; pass its new location with --corpus" in (
            one_line(err)
        )
    assert snapshot(workspace) == before


def test_threads_beyond_the_cpus_are_capped_with_a_note(capsys, workspace):
    code, out, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--threads",
        "100000",
        "--output-dir",
        workspace / "run",
        "--resume",
    )
    assert code == 0
    assert "note: --threads 100000 is more than the" in one_line(err)
    assert "already finished" in one_line(out)


def test_the_corpus_path_is_stored_absolute_and_resume_works_elsewhere(
    capsys, workspace, corpus_dir, monkeypatch
):
    state = read_state(workspace / "run" / "checkpoint")
    assert state["run"]["corpus"] == str(corpus_dir)  # trained with a relative path
    monkeypatch.chdir(workspace)
    code, out, err = run(
        capsys, "pretrain", *TINY, "--output-dir", "run", "--resume", "--steps", "3"
    )
    assert code == 0, err
    assert "resumed from run/checkpoint at step 2" in out
    assert read_state(workspace / "run" / "checkpoint")["step"] == 3


def test_ctrl_c_during_tokenizer_training_prints_interrupted(
    capsys, tmp_path, corpus_dir, monkeypatch
):
    import course_lib.tokenization

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(course_lib.tokenization, "train_tokenizer", interrupted)
    code, _, err = run(
        capsys, "pretrain", *TINY, "--corpus", corpus_dir, "--output-dir", tmp_path / "run"
    )
    assert code == 130
    assert one_line(err) == "course pretrain: interrupted"
    assert not (tmp_path / "run").exists()


# --- saves that must not lose anything ---------------------------------------------------------


def _tiny_model():
    from course_lib import BertConfig
    from course_lib.models import BertForMaskedLM

    config = BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    return BertForMaskedLM(config)


def test_save_checkpoint_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("keep me")
    (folder / "sub" / "data.bin").write_bytes(b"\x00\x01")
    before = snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=r"is not a course checkpoint \(it holds notes.txt"):
        save_checkpoint(folder, _tiny_model())
    with pytest.raises(CheckpointError, match="is a file"):
        save_checkpoint(folder / "notes.txt", _tiny_model())
    assert snapshot(tmp_path) == before


def test_trainer_save_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    from training_helpers import ToyCollator, tiny_mlm, toy_examples

    from course_lib.training import Trainer, TrainingConfig

    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "notes.txt").write_text("keep me")
    before = snapshot(tmp_path)
    trainer = Trainer(
        tiny_mlm(),
        toy_examples(16),
        ToyCollator(),
        TrainingConfig(max_steps=1, batch_size=8, output_dir=str(tmp_path), progress=False),
    )
    with pytest.raises(CheckpointError, match="not a course checkpoint"):
        trainer.train()  # refused before the first step, not after the run
    assert trainer.step == 0
    with pytest.raises(CheckpointError, match="not a course checkpoint"):
        trainer.save()
    assert snapshot(tmp_path) == before


def test_saving_over_a_checkpoint_leaves_siblings_and_user_folders_alone(tmp_path):
    directory = save_checkpoint(tmp_path / "ckpt", _tiny_model(), state={"step": 1})
    for sibling in ("ckpt.old", "ckpt.tmp", ".ckpt.tmp"):
        (tmp_path / sibling).mkdir()
        (tmp_path / sibling / "mine.txt").write_text(sibling)
    before = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("ckpt/")}
    save_checkpoint(directory, _tiny_model(), state={"step": 2})
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("ckpt/")}
    assert after == before  # no temporary left behind, no sibling touched
    assert read_state(directory)["step"] == 2


def test_a_killed_save_leaves_nothing_behind_after_the_next_one(tmp_path):
    directory = save_checkpoint(tmp_path / "ckpt", _tiny_model(), state={"step": 1})
    stale = tmp_path / ".ckpt.tmp-999999999"  # no such process: a save killed mid-write
    stale.mkdir()
    (stale / MODEL_FILE).write_bytes(b"half")
    odd = tmp_path / ".ckpt.old-999999998"
    odd.mkdir()
    (odd / MODEL_FILE).write_bytes(b"old")
    (odd / "keep.txt").write_text("not the library's")
    save_checkpoint(directory, _tiny_model(), state={"step": 2})
    assert not stale.exists()
    assert sorted(p.name for p in odd.iterdir()) == ["keep.txt"]  # only its own file removed


@pytest.mark.parametrize("left", ["tmp and old", "old only"])
def test_a_crash_between_the_two_renames_is_recovered(capsys, tmp_path, left):
    directory = save_checkpoint(tmp_path / "ckpt", _tiny_model(), state={"step": 1})
    # What a crash after "rename ckpt -> .ckpt.old-<pid>" and before "rename tmp -> ckpt" leaves.
    directory.rename(tmp_path / ".ckpt.old-4242")
    if left == "tmp and old":
        shutil.copytree(tmp_path / ".ckpt.old-4242", tmp_path / ".ckpt.tmp-4242")
        state = json.loads((tmp_path / ".ckpt.tmp-4242" / STATE_FILE).read_text())
        (tmp_path / ".ckpt.tmp-4242" / STATE_FILE).write_text(json.dumps({**state, "step": 2}))
    with pytest.warns(UserWarning, match="recovered checkpoint"):
        state = read_state(directory)
    assert state["step"] == (2 if left == "tmp and old" else 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # the older one removed


def test_an_interrupted_save_of_an_older_version_is_named(capsys, tmp_path):
    directory = save_checkpoint(tmp_path / "ckpt", _tiny_model(), state={"step": 1})
    directory.rename(tmp_path / "ckpt.tmp")  # the names the library used before
    with pytest.raises(FileNotFoundError, match="rename ckpt.tmp to ckpt to use it"):
        read_state(directory)
    code, _, err = run(capsys, "evaluate", directory)
    assert code == 2 and "rename ckpt.tmp to ckpt" in one_line(err)


def test_a_crash_in_the_cli_run_folder_is_recovered_on_resume(capsys, workspace):
    checkpoint = workspace / "run" / "checkpoint"
    checkpoint.rename(workspace / "run" / ".checkpoint.old-999")
    code, out, err = run(
        capsys, "pretrain", *TINY, "--output-dir", workspace / "run", "--resume", "--steps", "3"
    )
    assert code == 0, err
    assert "note: recovered checkpoint" in one_line(err)
    assert read_state(checkpoint)["step"] == 3
    # the run's checkpoint and, next to it, the token stores of its file corpus (issue 40)
    assert sorted(p.name for p in (workspace / "run").iterdir()) == ["checkpoint", "token-store"]


# --- library minors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("pre_layer_norm", "no", "expected True or False"),
        ("pre_layer_norm", 1, "expected True or False"),
        ("initializer_range", "0.02", "expected a finite number > 0"),
        ("initializer_range", float("nan"), "expected a finite number > 0"),
        ("layer_norm_eps", float("inf"), "expected a finite number > 0"),
        ("hidden_dropout_prob", "0.1", r"\[0, 1\)"),
        ("hidden_act", ["gelu"], "expected one of"),
        ("type_vocab_size", True, ">= 0"),
    ],
)
def test_config_values_of_the_wrong_type_are_value_errors(field, value, fragment):
    from course_lib import BertConfig

    with pytest.raises(ValueError, match=fragment) as err:
        BertConfig(**{field: value})
    assert f"{field}={value!r}" in str(err.value)


@pytest.mark.parametrize(
    "field, value",
    [
        ("lr", float("nan")),
        ("lr", "1e-3"),
        ("max_minutes", float("inf")),
        ("seed", -1),
        ("seed", 2**64),
        ("batch_size", True),
        ("eps", float("nan")),
        ("betas", (0.9, 1.5)),
        ("max_grad_norm", float("inf")),
        ("warmup", float("nan")),
    ],
)
def test_training_config_requires_finite_values(field, value):
    from course_lib.training import TrainingConfig

    with pytest.raises(ValueError, match=f"^{field}="):
        TrainingConfig(max_steps=3, **{field: value})


def test_labels_outside_the_vocabulary_are_a_clear_error():
    model = _tiny_model()
    ids = torch.randint(5, 40, (2, 6))
    labels = torch.full_like(ids, -100)
    labels[0, 2] = 40
    with pytest.raises(ValueError, match=r"labels contain 40, outside \[0, 40\)"):
        model(input_ids=ids, labels=labels)
    labels[0, 2] = -7
    with pytest.raises(ValueError, match=r"labels contain -7"):
        model(input_ids=ids, labels=labels)


@pytest.mark.parametrize("value, fragment", [(None, "got NoneType"), ("bert", "got str")])
def test_count_parameters_names_what_it_needs(value, fragment):
    from course_lib.counting import count_parameters

    with pytest.raises(TypeError, match=fragment):
        count_parameters(value)
    with pytest.raises(TypeError, match="pass model.config"):
        count_parameters(_tiny_model())


def test_count_parameters_takes_a_config_dict():
    from course_lib.counting import count_parameters

    model = _tiny_model()
    counted = count_parameters(model.config.to_dict(), "BertForMaskedLM")["total"]
    assert counted == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "kwargs", [dict(is_decoder=True), dict(is_decoder=True, add_cross_attention=True)]
)
def test_from_transformers_refuses_a_decoder_bert(kwargs):
    transformers = pytest.importorskip("transformers")
    from course_lib.interop import from_transformers

    config = transformers.BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        **kwargs,
    )
    with pytest.raises(ValueError, match="configured as a decoder"):
        from_transformers(transformers.BertModel(config))
