"""Nothing lost, round two: symlinked runs, full disks, damaged imports, two runs at once.

Each case ends in one line on stderr (no traceback) with a non-zero exit code, and every file
that existed before is intact (hashed before and after). A full disk is a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored) in a child process; two runs at once are a child run that holds
the output folder while the test starts a second one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import test_adversarial
import torch
from test_adversarial import TINY, one_line, run, snapshot

from course_lib.training.checkpoint import (
    CheckpointError,
    _remove_checkpoint,
    read_state,
    recover_checkpoint,
    save_checkpoint,
)
from course_lib.training.run_lock import LOCK_NAME, holding

pytestmark = pytest.mark.usefixtures("one_thread")
# test_adversarial's fixtures: its tiny trained run (trained once more here: module scope),
# a copy of it per test, and its corpus.
corpus_dir = test_adversarial.corpus_dir
trained = test_adversarial.trained
workspace = test_adversarial.workspace
_restore_rayon_threads = test_adversarial._restore_rayon_threads
transformers = pytest.importorskip("transformers")
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _child_env() -> dict[str, str]:
    """The environment for a child `python -c`: course_lib importable, one thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return env


# --- a checkpoint that is a symbolic link to another run's -----------------------------------


def test_resume_into_a_symlinked_checkpoint_is_refused_and_the_linked_run_is_untouched(
    capsys, workspace
):
    linked = workspace / "run"
    branch = workspace / "branch"
    branch.mkdir()
    (branch / "checkpoint").symlink_to(linked / "checkpoint", target_is_directory=True)
    before = snapshot(linked)
    for extra in ([], ["--overwrite"]):
        code, _, err = run(
            capsys, "pretrain", *TINY, "--output-dir", branch, "--resume", "--steps", "3", *extra
        )
        assert code == 2
        line = one_line(err)
        assert "is a symbolic link" in line and "cp -r" in line
        assert f"--resume {branch / 'checkpoint'} --output-dir <new folder>" in line
    assert snapshot(linked) == before  # bit for bit
    assert sorted(p.name for p in branch.iterdir()) == ["checkpoint"]
    assert (branch / "checkpoint").is_symlink()
    # The way the message names: continue the linked run in a folder of its own.
    code, _, err = run(
        capsys,
        "pretrain",
        *TINY,
        "--resume",
        branch / "checkpoint",
        "--output-dir",
        workspace / "new",
        "--steps",
        "3",
    )
    assert code == 0, err
    assert read_state(workspace / "new" / "checkpoint")["step"] == 3
    assert snapshot(linked) == before


def _tiny_model() -> torch.nn.Module:
    from training_helpers import tiny_mlm

    return tiny_mlm()


def test_library_saves_never_delete_through_a_link(tmp_path):
    other = save_checkpoint(tmp_path / "other" / "ckpt", _tiny_model(), state={"step": 7})
    (tmp_path / "mine").mkdir()
    link = tmp_path / "mine" / "ckpt"
    link.symlink_to(other, target_is_directory=True)
    # What the old save left behind: the link moved aside as if it were its own folder.
    aside = tmp_path / "mine" / ".ckpt.old-999999999"
    aside.symlink_to(other, target_is_directory=True)
    before = snapshot(tmp_path / "other")
    with pytest.raises(CheckpointError, match=r"is a symbolic link .*copy the linked checkpoint"):
        save_checkpoint(link, _tiny_model(), state={"step": 8})
    _remove_checkpoint(link)
    _remove_checkpoint(aside)
    link.unlink()
    assert recover_checkpoint(link) is None  # a link is no save's temporary: not moved back
    save_checkpoint(link, _tiny_model(), state={"step": 8})  # a fresh save beside the link
    assert aside.is_symlink() and read_state(link)["step"] == 8
    assert snapshot(tmp_path / "other") == before


# --- a full disk: a file-size limit in a child process ---------------------------------------

FULL_DISK_CHILD = textwrap.dedent(
    """
    import contextlib, io, json, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    from course_lib.training.cli import main
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    results = []
    for limit, argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(argv)
        except BaseException as exc:  # a traceback is what the test must not see
            import traceback
            code, err = -1, io.StringIO("Traceback " + traceback.format_exc())
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        results.append([code, err.getvalue()])
    print(json.dumps(results))
    """
)


def _hf_folder(root: Path) -> Path:
    """A tiny random transformers BertForMaskedLM + fast tokenizer, saved with save_pretrained."""
    from test_export import tokenizer_for

    tokenizer = tokenizer_for("bert")
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    folder = root / "bert-hf"
    transformers.BertForMaskedLM(config).eval().save_pretrained(folder)
    tokenizer.to_transformers().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> Path:
    return _hf_folder(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory, trained, hf_folder) -> dict[str, tuple]:
    """export, import and a resumed run's save under a file-size limit, in one child: {command:
    (exit code, stderr, the folder that must be unchanged, its hashes before, the new target)}."""
    import shutil

    root = tmp_path_factory.mktemp("full")
    shutil.copytree(trained.parent, root / "run")
    checkpoint = root / "run" / "checkpoint"
    resume = ["pretrain", *TINY, "--output-dir", root / "run", "--resume", "--steps", "3"]
    cases = {  # command: (file-size limit, argv, the folder that must not change, new target)
        "export": (64_000, ["export", checkpoint, root / "exported"], checkpoint, "exported"),
        "import": (4_000, ["import", hf_folder, root / "imported"], hf_folder, "imported"),
        "resume": (64_000, resume, checkpoint, None),
    }
    before = {name: snapshot(case[2]) for name, case in cases.items()}
    argv = [(limit, [str(a) for a in args]) for limit, args, _, _ in cases.values()]
    child = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHILD, json.dumps(argv)],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    results = json.loads(child.stdout.strip().splitlines()[-1])
    return {
        name: (code, err, case[2], before[name], case[3] and root / case[3])
        for (name, case), (code, err) in zip(cases.items(), results)
    }


@pytest.mark.parametrize(
    "command, fragment",
    [
        ("export", "exported/model.safetensors; raise the file-size limit (ulimit -f)"),
        ("import", "imported/model.safetensors; raise the file-size limit (ulimit -f)"),
        ("resume", "checkpoint/model.safetensors; raise the file-size limit (ulimit -f)"),
    ],
)
def test_a_full_disk_is_one_line_and_the_earlier_files_are_intact(full_disk, command, fragment):
    code, err, folder, before, target = full_disk[command]
    assert code == 1, err
    line = one_line(err)
    assert line.startswith(f"course {command if command != 'resume' else 'pretrain'}: error: ")
    assert "a file-size limit was reached (File too large) while writing" in line
    assert fragment in line
    assert snapshot(folder) == before  # the previous checkpoint (or the source) bit for bit
    if command == "resume":
        assert "the previous checkpoint is intact; continue with: course pretrain" in line
        # the run's token store (a file corpus, encoded once) stays beside it, no temporary left
        assert sorted(p.name for p in folder.parent.iterdir()) == ["checkpoint", "token-store"]
    else:
        assert "— nothing was" in line
        assert not target.exists() and not list(target.parent.glob(f".{target.name}*"))


# --- damaged transformers folders given to course import -------------------------------------

IMPORT_DAMAGE = {
    "weights truncated": "model.safetensors: it is damaged or truncated (",
    "weights empty": "model.safetensors: it is empty",
    "config sizes differ": "config.json does not fit the weights in model.safetensors: bert.",
    "config not json": "config.json (It looks like the config file",
}


@pytest.mark.parametrize("case", sorted(IMPORT_DAMAGE))
def test_a_damaged_transformers_folder_is_one_line(capsys, tmp_path, hf_folder, case):
    import shutil

    folder = shutil.copytree(hf_folder, tmp_path / "hf")
    weights, config = folder / "model.safetensors", folder / "config.json"
    if case == "weights truncated":
        weights.write_bytes(weights.read_bytes()[:5])
    elif case == "weights empty":
        weights.write_bytes(b"")
    elif case == "config sizes differ":
        config.write_text(json.dumps({**json.loads(config.read_text()), "intermediate_size": 48}))
    else:
        config.write_text('{"model_type": "bert",')
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "import", folder, tmp_path / "out")
    assert code == 2
    line = one_line(err)
    assert IMPORT_DAMAGE[case] in line and str(folder) in line
    assert line.endswith(
        "copy the model's files again (config.json and the weights must come from one model)"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["export", "import"])
def test_a_target_under_a_file_names_the_fix(capsys, tmp_path, trained, hf_folder, command):
    (tmp_path / "afile").write_text("mine")
    before = snapshot(tmp_path)
    source = trained if command == "export" else hf_folder
    code, _, err = run(capsys, command, source, tmp_path / "afile" / "sub")
    assert code == 2
    assert one_line(err).endswith(
        f"{tmp_path / 'afile' / 'sub'} is inside {tmp_path / 'afile'}, which is a file; pass a "
        "folder path (nothing was written)"
    )
    assert snapshot(tmp_path) == before


# --- two runs into one --output-dir ---------------------------------------------------------

FIRST_RUN_CHILD = textwrap.dedent(
    """
    import sys
    from course_lib.training import engine
    from course_lib.training.cli import main
    train = engine.Trainer.train

    def held_train(self):  # hold the folder (and its lock) until the test says go
        print("TRAINING", flush=True)
        sys.stdin.read()
        return train(self)

    engine.Trainer.train = held_train
    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_second_run_into_the_same_folder_is_refused_naming_the_first(
    capsys, tmp_path, corpus_dir
):
    out = tmp_path / "run"
    argv = ["pretrain", *TINY, "--steps", "1", "--corpus", str(corpus_dir), "--output-dir", out]
    first = subprocess.Popen(
        [sys.executable, "-c", FIRST_RUN_CHILD, *map(str, argv)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        for line in first.stdout:
            if line.strip() == "TRAINING":
                break
        else:
            pytest.fail(f"the first run ended before training: {first.stderr.read()}")
        assert (out / LOCK_NAME).is_file()
        before = snapshot(tmp_path)
        for second in (argv, [*argv[:-1], out, "--overwrite"], [*argv, "--resume"]):
            code, _, err = run(capsys, *second)
            assert code == 2
            line = one_line(err)
            assert f"another run is writing to --output-dir {out} (pid {first.pid}, started " in (
                line
            )
            assert line.endswith("wait for it to finish or stop it, or pass another --output-dir")
        assert snapshot(tmp_path) == before
        first.stdin.close()  # the first run goes on, trains its step and saves
        assert first.wait(timeout=120) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stdout.close()
        first.stderr.close()
    assert read_state(out / "checkpoint")["step"] == 1
    # the lock released (token-store: the file corpus encoded once, for later runs)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint", "token-store"]


def test_a_killed_runs_lock_is_taken_over(capsys, workspace):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process
    lock = workspace / "run" / LOCK_NAME
    lock.write_text(json.dumps({"pid": gone.pid, "host": os.uname().nodename, "started": 0}))
    code, out, err = run(
        capsys, "pretrain", *TINY, "--output-dir", workspace / "run", "--resume", "--steps", "3"
    )
    assert code == 0, err
    assert f"took over {lock} from pid {gone.pid}, started " in one_line(err)
    assert "which no longer runs" in err
    assert read_state(workspace / "run" / "checkpoint")["step"] == 3
    assert not lock.exists()


def test_the_lock_is_released_on_errors_and_ctrl_c_and_skipped_on_other_ranks(tmp_path):
    folder = tmp_path / "a" / "b"
    with pytest.raises(KeyboardInterrupt), holding(folder):
        assert (folder / LOCK_NAME).is_file()
        raise KeyboardInterrupt
    assert not (tmp_path / "a").exists()  # the folders it created for nothing are gone again
    with holding(folder, enabled=False) as lock:  # torchrun ranks other than 0
        assert lock is None and not folder.exists()
    with holding(folder):
        (folder / "kept.txt").write_text("a run's file")
    assert sorted(p.name for p in folder.iterdir()) == ["kept.txt"]


def test_a_lock_left_by_sigkill_is_stale(tmp_path):
    code = "import sys, time; from course_lib.training.run_lock import acquire; "
    code += "acquire(sys.argv[1]); print('held', flush=True); time.sleep(60)"
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        assert child.stdout.readline().strip() == "held"
        from course_lib.training.run_lock import RunLocked

        with pytest.raises(RunLocked, match=f"pid {child.pid}, started "), holding(tmp_path):
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert (tmp_path / LOCK_NAME).is_file()  # left behind by the killed process
    with holding(tmp_path) as lock:
        assert lock.took_over["pid"] == child.pid
    assert not (tmp_path / LOCK_NAME).exists()
