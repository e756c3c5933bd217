"""The `course` command: pretrain a model, fill in masks, evaluate a checkpoint.

    course pretrain                                   # tiny BERT, built-in corpus, 5 minutes
    course pretrain --minutes 1 --output-dir runs/a   # shorter
    course pretrain --resume                          # continue runs/tiny after Ctrl-C
    course fill-mask runs/tiny/checkpoint "The [MASK] statement raises an exception."
    course evaluate runs/tiny/checkpoint
    course pretrain --family electra --output-dir runs/electra   # replaced-token detection
    course detect runs/electra/checkpoint "The cat drinks the house."
    course pretrain --family modernbert --output-dir runs/modernbert
    torchrun --nproc_per_node=2 -m course_lib.training.cli pretrain --steps 200

Mistakes in the arguments, and damaged or mismatched checkpoints or transformers folders, give
one line on stderr and exit code 2, never a traceback; a write that fails (a full disk) gives
one line naming the file and exit code 1, and the previous checkpoint is intact; Ctrl-C outside
training prints "interrupted" and exits with 130. No file is ever replaced silently: an existing
run is continued (--resume) or replaced only when asked (--overwrite); a run holds a lock on its
--output-dir (.course-run.lock), so a second run into it is refused while the first runs; and a
checkpoint that is a symbolic link (another run's) is never saved over.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

# Shared with course_lib.training.export_cli, which imports them from there (not from here, which
# imports it): re-exported so `from course_lib.training.cli import UsageError` keeps working.
from course_lib.training.cli_common import UsageError, checkpoint_state

CHECKPOINT_NAME = "checkpoint"
MAX_SEED = 2**32 - 1


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line ('course pretrain: error: ...') instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from course_lib.objectives.targets import OBJECTIVES
    from course_lib.training.recipes import FAMILIES

    parser = _Parser(
        prog="course", description="Encoders from Scratch: pretrain and inspect encoders."
    )
    sub = parser.add_subparsers(
        dest="command",
        parser_class=_Parser,
        metavar="{pretrain,fill-mask,evaluate,detect,export,import}",
    )

    p = sub.add_parser(
        "pretrain", help="pretrain a model (default: tiny BERT, built-in corpus, 5 min)"
    )
    p.add_argument(
        "--family", default="bert", help=f"model family: {', '.join(FAMILIES)} (default bert)"
    )
    p.add_argument(
        "--preset",
        default=None,
        help="recipe or size: tiny (default on a CPU), small-gpu (default on a CUDA GPU), "
        "bert-mini, ... (with --resume: the run's own)",
    )
    p.add_argument(
        "--objective",
        default=None,
        choices=OBJECTIVES,
        help="default: the family's (mlm; rtd, replaced-token detection, for electra)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=None, help="wall-clock budget (default 5)")
    budget.add_argument(
        "--steps", type=int, default=None, help="optimizer steps instead of minutes"
    )
    p.add_argument(
        "--corpus",
        default="builtin",
        help="'builtin', a folder of .txt/.jsonl files, a .jsonl file (one document per line) or "
        "a .txt file (documents separated by blank lines)",
    )
    p.add_argument(
        "--output-dir", default=None, help="where checkpoints go (default runs/<preset>)"
    )
    p.add_argument(
        "--store-dir",
        default=None,
        help="where a file corpus is tokenized once and kept (token stores, reused by later runs "
        "on the same corpus; default <output-dir>/token-store, with --resume: the run's)",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        help="continue from a checkpoint (default: <output-dir>/checkpoint)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing <output-dir>/checkpoint with this new run (it is lost)",
    )
    p.add_argument("--precision", default=None, choices=("auto", "fp32", "bf16", "fp16"))
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, mps")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"0 to {MAX_SEED} (default 0; with --resume: the run's)",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="tokenizer entries (default: the recipe's, 8000); the alphabet is capped to leave "
        "room for words, its rarest characters become the unknown token (with --resume: the run's)",
    )
    p.add_argument("--batch-size", type=int, default=None, help="per process (default: recipe's)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: recipe's)")
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: torch's choice)"
    )
    p.add_argument(
        "--samples",
        type=int,
        default=20,
        help="held-out sentences scored by fill-mask before and after (a fixed seeded draw)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")

    f = sub.add_parser("fill-mask", help="predict the masked word(s) in a text with a checkpoint")
    f.add_argument("checkpoint", help="a checkpoint directory written by course pretrain")
    f.add_argument("text", help="text containing the mask token, e.g. '[MASK]'")
    f.add_argument("--top-k", type=int, default=5)
    f.add_argument("--family", default=None, help="check that the checkpoint is of this family")

    e = sub.add_parser(
        "evaluate", help="held-out MLM loss/accuracy and fill-mask hits of a checkpoint"
    )
    e.add_argument("checkpoint", help="a checkpoint directory written by course pretrain")
    e.add_argument(
        "--corpus", default=None, help="default: the corpus the checkpoint was trained on"
    )
    e.add_argument("--samples", type=int, default=20)
    e.add_argument("--device", default="auto")

    d = sub.add_parser(
        "detect", help="which tokens of a text an ELECTRA discriminator believes were replaced"
    )
    d.add_argument("checkpoint", help="an ELECTRA checkpoint (course pretrain --family electra)")
    d.add_argument("text", help="a sentence, e.g. with one wrong word: 'The cat drinks the house.'")
    from course_lib.training.export_cli import add_parsers  # export, import

    add_parsers(sub)
    return parser


# --- helpers ---------------------------------------------------------------------------------------


def _positive(value: float | None, name: str) -> None:
    """A flag that must be a finite number > 0 (inf and nan included in the refusal)."""
    if value is None:
        return
    if not math.isfinite(value):
        raise UsageError(f"{name} must be a finite number > 0, got {value}")
    if value <= 0:
        raise UsageError(f"{name} must be > 0, got {value:g}")


def _at_least_zero(value: int | None, name: str) -> None:
    if value is not None and value < 0:
        raise UsageError(f"{name} must be >= 0, got {value}")


@contextlib.contextmanager
def _usage_errors(*kinds: type[Exception]) -> Iterator[None]:
    """Inside, a refusal (a ValueError, or the `kinds` given) becomes a UsageError in the same
    words: one line on stderr and exit code 2 instead of a traceback."""
    caught = kinds or (ValueError,)
    try:
        yield
    except caught as err:
        raise UsageError(str(err).rstrip(".")) from err


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _threads(requested: int | None) -> int | None:
    """--threads, capped at the CPUs this process may use (a note says so)."""
    if requested is None:
        return None
    _positive(requested, "--threads")
    cpus = _cpu_count()
    if requested > cpus:
        print(
            f"course pretrain: note: --threads {requested} is more than the {cpus} CPUs here; "
            f"using {cpus}",
            file=sys.stderr,
        )
        return cpus
    return requested


def _corpus_path(spec: str) -> str:
    """'builtin', or the corpus path made absolute (a checkpoint stores it; resume may run from
    another directory)."""
    return spec if spec == "builtin" else os.path.abspath(os.path.expanduser(spec))


def _load_corpus(
    spec: str, saved: bool = False, store_dir: Path | None = None, progress: bool = False
) -> Any:
    """The corpus named by --corpus (or, `saved`, by the checkpoint being resumed/evaluated):
    the built-in one in memory, a file corpus as a `StreamCorpus` (read from disk, its split
    scanned here, cached in `store_dir`; under torchrun by rank 0, the others find the cache).
    `progress`: a bar while the split is scanned."""
    from course_lib.data import load_builtin_corpus
    from course_lib.data.corpus import MissingTextField, StreamCorpus, TooFewDocuments

    if spec == "builtin":
        return load_builtin_corpus()
    path = Path(spec).expanduser()
    if not path.exists():
        if saved:
            raise UsageError(
                f"the corpus this checkpoint was trained on, {spec!r}, does not exist here; "
                "pass its new location with --corpus"
            )
        raise UsageError(
            f"corpus path {spec!r} does not exist; pass 'builtin' or a .txt/.jsonl file or folder"
        )
    # A single .txt file holds many documents, separated by blank lines (--help says so).
    boundary = "blank_line" if path.is_file() and path.suffix == ".txt" else "file"
    try:
        corpus = StreamCorpus(path, document_boundary=boundary)
        if os.environ.get("RANK", "0") == "0":
            corpus.scan(store_dir, progress=progress)
        return corpus
    except TooFewDocuments as err:
        how = {
            ".txt": "separate documents with a blank line",
            ".jsonl": "write one document per line",
        }.get(path.suffix if path.is_file() else "", "add .txt files (one document each)")
        raise UsageError(
            f"corpus {spec!r} holds {err.documents} document(s), too few: course pretrain keeps "
            f"at least one document for validation and needs one to train on; {how}"
        ) from err
    except MissingTextField as err:
        raise UsageError(
            f"cannot read corpus {spec!r}: {err.location} has no {err.field!r} field (found "
            f'{err.found}); write each line as {{"text": "..."}} or as a JSON string'
        ) from err
    except (ValueError, OSError) as err:
        raise UsageError(f"cannot read corpus {spec!r}: {str(err).rstrip('.')}") from err


def _check_output_folder(output_dir: Path) -> None:
    """Before anything is written (the run's lock included): --output-dir can be a run folder."""
    flag = f"--output-dir {output_dir}"
    existing = output_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == output_dir else f"is inside {existing}, which is a file"
        raise UsageError(f"{flag} {what}; pass a folder (it is created if needed)")
    try:  # a test write where the checkpoint will go (or in the folder that will hold it)
        fd, probe = tempfile.mkstemp(prefix=".course-write-test-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(
            f"{flag} is not writable ({err.strerror or err}); pass a folder you can write to"
        ) from err
    if (output_dir / "trainer_state.json").is_file():
        raise UsageError(
            f"{flag} is a checkpoint itself; pass the run folder that holds it ({output_dir.parent})"
        )


def _check_output_dir(output_dir: Path, resume_dir: Path | None, overwrite: bool) -> None:
    """Before any corpus or tokenizer work (and with the run's lock held): the run's checkpoint
    can be written, and writing it loses nothing (an earlier run is continued with --resume or
    replaced only with --overwrite; a checkpoint that is a link to another run is never saved
    over)."""
    from course_lib.training.checkpoint import (
        CheckpointError,
        check_checkpoint_target,
        read_state,
        recover_checkpoint,
    )

    checkpoint = output_dir / CHECKPOINT_NAME
    if checkpoint.is_symlink():
        target = os.readlink(checkpoint)
        raise UsageError(
            f"{checkpoint} is a symbolic link (to {target}), and saving this run would replace "
            f"what it links to; copy it (cp -r {target} {checkpoint}, after removing the link) or "
            f"continue it in a new folder: --resume {checkpoint} --output-dir <new folder>"
        )
    recover_checkpoint(checkpoint)
    if not checkpoint.exists():
        return
    try:
        check_checkpoint_target(checkpoint)
    except CheckpointError as err:
        raise UsageError(f"{str(err).rstrip('.')}; pass another --output-dir") from err
    if not any(checkpoint.iterdir()):
        return
    continuing = resume_dir is not None and resume_dir.resolve() == checkpoint.resolve()
    if continuing or overwrite:
        return
    try:
        step = f" (step {read_state(checkpoint).get('step')})"
    except (OSError, ValueError):
        step = ""
    raise UsageError(
        f"{checkpoint} already holds a run{step}; use --resume to continue it, --overwrite to "
        "replace it, or another --output-dir"
    )


def _same_as_saved(args: argparse.Namespace, saved: dict[str, Any], resume_dir: Path) -> None:
    """Flags that must match the run being resumed (they fix the data order and the model);
    left out, they default to the run's own values."""
    for flag, key in (
        ("--seed", "seed"),
        ("--batch-size", "batch_size"),
        ("--objective", "objective"),
    ):
        given, before = getattr(args, key), saved.get(key)
        if given is not None and before is not None and given != before:
            raise UsageError(
                f"checkpoint {str(resume_dir)!r} was trained with {flag} {before}; resume with the "
                f"same value (or leave {flag} out)"
            )
    if args.seed is None:
        args.seed = saved.get("seed", 0)


def _finished(args: argparse.Namespace, state: dict[str, Any]) -> str | None:
    """Why a resumed run has nothing left to do (its budget is spent), or None."""
    saved = state["training_config"]
    max_steps, max_minutes = saved.get("max_steps"), saved.get("max_minutes")
    if args.steps is not None:
        max_steps, max_minutes = args.steps, None
    elif args.minutes is not None:
        max_steps, max_minutes = None, args.minutes
    step, elapsed = int(state["step"]), float(state["elapsed_s"])
    if max_steps is not None and step >= max_steps:
        return f"step {step} of {max_steps}; pass a larger --steps, e.g. --steps {2 * step}"
    if max_minutes is not None and elapsed >= 60.0 * max_minutes:
        more = math.ceil(elapsed / 60.0) * 2
        return (
            f"{elapsed / 60:.1f} of {max_minutes:g} minutes; pass a larger --minutes, e.g. "
            f"--minutes {more}"
        )
    return None


def _print(*args: Any, main: bool = True) -> None:
    if main:
        print(*args, flush=True)


def _validation_sentences(corpus: Any) -> list[str]:
    """The sentences fill-mask samples draw from (a streamed corpus: its first 5,000)."""
    from course_lib.data.corpus import StreamCorpus

    if isinstance(corpus, StreamCorpus):
        return corpus.sentences("validation")
    return [s for doc in corpus.validation for s in doc.sentences]


# --- commands --------------------------------------------------------------------------------------


def cmd_pretrain(args: argparse.Namespace) -> int:
    from course_lib.training.device import select_device
    from course_lib.training.recipes import FAMILIES, default_recipe_name

    _check_pretrain_flags(args, FAMILIES)
    threads = _threads(args.threads)
    with _usage_errors():
        default_preset = default_recipe_name(select_device(args.device).type)
    output_dir = Path(args.output_dir or Path("runs") / (args.preset or default_preset))
    resume_dir = None
    if args.resume is not None:
        resume_dir = output_dir / CHECKPOINT_NAME if args.resume == "auto" else Path(args.resume)
    _check_output_folder(output_dir)  # before any corpus work, and before the lock is written
    with _run_lock(output_dir):
        _check_output_dir(output_dir, resume_dir, args.overwrite)
        return _locked_pretrain(args, output_dir, resume_dir, default_preset, threads)


@contextlib.contextmanager
def _run_lock(output_dir: Path) -> Iterator[None]:
    """Hold --output-dir's lock for the whole run (rank 0 only under torchrun); a second run into
    the folder is refused in one line naming the first, a killed run's lock is taken over."""
    from course_lib.training.run_lock import LOCK_NAME, RunLocked, describe, holding

    try:
        with holding(output_dir, enabled=os.environ.get("RANK", "0") == "0") as lock:
            if lock is not None and lock.took_over is not None:
                gone = describe(lock.took_over) if lock.took_over else "a run"
                print(
                    f"course pretrain: note: took over {output_dir / LOCK_NAME} from {gone}, "
                    "which no longer runs",
                    file=sys.stderr,
                )
            yield
    except RunLocked as err:
        raise UsageError(
            f"another run is writing to --output-dir {output_dir} ({err}); wait for it to "
            "finish or stop it, or pass another --output-dir"
        ) from None
    except OSError as err:
        if err.filename is None or Path(err.filename).name != LOCK_NAME:
            raise
        raise UsageError(
            f"cannot write the run's lock {err.filename} ({err.strerror or err}); pass a folder "
            "you can write to"
        ) from err


def _locked_pretrain(
    args: argparse.Namespace,
    output_dir: Path,
    resume_dir: Path | None,
    default_preset: str,
    threads: int | None,
) -> int:
    """cmd_pretrain once the output folder is checked and locked: the run itself."""
    from course_lib.training.recipes import FAMILIES, TINY, get_recipe

    family = FAMILIES[args.family]
    preset, state = args.preset or default_preset, {}
    if resume_dir is not None:
        state = checkpoint_state(resume_dir, args.family, resume=True)
        preset = _resumed_preset(args.preset, state, resume_dir) or preset
        _same_as_saved(args, state["training_config"], resume_dir)
        finished = _finished(args, state)
        if finished is not None:
            print(f"the run in {resume_dir} already finished its budget ({finished})")
            return 0
    with _usage_errors():
        recipe = get_recipe(preset, args.family)
        recipe.model_config(family, vocab_size=1000, pad_token_id=0)  # sizes valid for the family?
    vocab_size = _resumed_vocab_size(args.vocab_size, state, resume_dir)
    if vocab_size is not None:
        recipe = recipe.replace(vocab_size=vocab_size)
    if args.preset is None and resume_dir is None and preset != TINY.name:
        _print(
            f"a CUDA GPU was found: training the {preset} recipe ({recipe.description}); "
            f"--preset {TINY.name} trains the CPU recipe",
            main=os.environ.get("RANK", "0") == "0",  # once under torchrun
        )
    if args.seed is None:
        args.seed = 0
    objective = args.objective or recipe.training.get("objective", "mlm")
    if resume_dir is not None and args.objective is None:
        objective = state["training_config"].get("objective", objective)
    corpus_spec, saved_corpus = args.corpus, _saved_run(state).get("corpus")
    if resume_dir is not None and args.corpus == "builtin" and isinstance(saved_corpus, str):
        corpus_spec = saved_corpus
    with _usage_errors():
        family.model_class(objective)  # fail before minutes of corpus and tokenizer work
    _set_threads(threads)
    store_dir = _store_dir(args.store_dir, state, output_dir)
    plan = _Plan(
        args, recipe, family, objective, corpus_spec, output_dir, resume_dir, state, store_dir
    )
    try:
        saved = corpus_spec != args.corpus
        corpus = _load_corpus(corpus_spec, saved, store_dir, not args.no_progress)
        return _pretrain(plan, corpus)
    except BaseException:  # stopped before its first save: leave no folder behind
        _remove_unsaved_stores(output_dir, store_dir)
        raise


def _remove_unsaved_stores(output_dir: Path, store_dir: Path) -> None:
    """A run stopped before any checkpoint removes the token stores it keeps in its own folder
    (never a --store-dir elsewhere): the run lock then removes the folder if it created it."""
    own = (output_dir / "token-store").absolute()
    if store_dir == own and own.is_dir() and not (output_dir / "checkpoint").exists():
        shutil.rmtree(own, ignore_errors=True)


def _store_dir(flag: str | None, state: dict[str, Any], output_dir: Path) -> Path:
    """--store-dir, else (resuming) the run's own where it still exists, else next to the run."""
    if flag is not None:
        return Path(flag).expanduser().absolute()
    saved = _saved_run(state).get("store_dir")
    if isinstance(saved, str) and Path(saved).is_dir():
        return Path(saved)
    return (output_dir / "token-store").absolute()


def _check_pretrain_flags(args: argparse.Namespace, families: dict[str, Any]) -> None:
    """The flags that can be checked alone, before anything is read or written."""
    if args.family not in families:
        raise UsageError(f"unknown family {args.family!r}; choose one of {sorted(families)}")
    if args.objective is not None:
        with _usage_errors():  # e.g. mlm+nsp for electra or modernbert, rtd for bert
            families[args.family].model_class(args.objective)
    _positive(args.minutes, "--minutes")
    _positive(args.steps, "--steps")
    _positive(args.batch_size, "--batch-size")
    _positive(args.lr, "--lr")
    _at_least_zero(args.samples, "--samples")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed must be in [0, {MAX_SEED}], got {args.seed}")
    _check_vocab_size(args.vocab_size, families[args.family])


def _check_vocab_size(vocab_size: int | None, family: Any) -> None:
    """--vocab-size, at least what the family's tokenizer needs (its specials, and for byte-level
    BPE the 256 byte symbols)."""
    from course_lib.tokenization import SPECIALS
    from course_lib.tokenization.train import min_vocab_size

    if vocab_size is None:
        return
    least, n_special = min_vocab_size(family.tokenizer), len(SPECIALS[family.tokenizer].order)
    if vocab_size < least:
        more = "256 byte symbols" if least - n_special > 1 else "1 entry"
        why = f"{n_special} special tokens + {more}"
        raise UsageError(
            f"--vocab-size {vocab_size} is too small for {family.name}'s {family.tokenizer} "
            f"tokenizer ({why}); use --vocab-size >= {least}, thousands for real text"
        )


def _saved_run(state: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's run entry (family, preset, corpus, ...), or {} if it has none."""
    run = state.get("run")
    return run if isinstance(run, dict) else {}


def _resumed_preset(preset: str | None, state: dict[str, Any], resume_dir: Path) -> str | None:
    """--preset, else the preset the checkpoint was trained with; a different --preset is refused."""
    saved = _saved_run(state).get("preset")
    saved = saved if isinstance(saved, str) else None
    if preset is not None and saved is not None and preset != saved:
        raise UsageError(
            f"checkpoint {str(resume_dir)!r} was trained with --preset {saved}; "
            f"resume with that preset (or leave --preset out)"
        )
    return preset or saved


def _resumed_vocab_size(
    vocab_size: int | None, state: dict[str, Any], resume_dir: Path | None
) -> int | None:
    """--vocab-size, else (resuming) the run's own; resuming with another is refused, since the
    checkpoint's tokenizer and embeddings fix the vocabulary."""
    saved = _saved_run(state).get("vocab_size") if resume_dir is not None else None
    saved = saved if isinstance(saved, int) and not isinstance(saved, bool) else None
    if vocab_size is not None and saved is not None and vocab_size != saved:
        raise UsageError(
            f"checkpoint {str(resume_dir)!r} was trained with --vocab-size {saved}; resume with "
            "the same value (or leave --vocab-size out)"
        )
    return vocab_size if vocab_size is not None else saved


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))  # the tokenizer trainer's pool


@dataclass
class _Plan:
    """What `course pretrain` was asked to do, once the flags and the checkpoint are checked."""

    args: argparse.Namespace
    recipe: Any
    family: Any
    objective: str
    corpus_spec: str
    output_dir: Path
    resume_dir: Path | None
    state: dict[str, Any]
    store_dir: Path | None = None


def _pretrain(plan: _Plan, corpus: Any) -> int:
    """Build the run (tokenizer, model, examples), train it, report before and after."""
    import torch

    from course_lib.training import distributed
    from course_lib.training.checkpoint import WriteFailed
    from course_lib.training.device import select_device
    from course_lib.training.engine import TrainingDiverged

    args, recipe = plan.args, plan.recipe
    with _usage_errors():
        device = select_device(args.device)
    ctx = distributed.init_from_env(device.type)
    main = ctx.is_main
    run = _prepare_run(plan, corpus, main)
    training = _training_config(plan)
    trainer = _trainer(plan, run, training, ctx.world_size)
    model, config, sentences = run.model, run.model.config, _validation_sentences(corpus)
    n_params = sum(p.numel() for p in model.parameters())
    budget = (
        f"{training.max_steps} steps" if training.max_steps else f"{training.max_minutes:g} minutes"
    )
    _print(
        f"{type(model).__name__} ({recipe.name}): {config.num_hidden_layers} layers x "
        f"{config.hidden_size} hidden{_generator_size(model)}, {n_params / 1e6:.1f}M parameters | "
        f"{plan.objective} on "
        f"{len(run.train):,} examples of <= {recipe.max_length} tokens ({len(run.held_out)} held "
        f"out) | {trainer.device.type}, {trainer.precision}, {torch.get_num_threads()} threads"
        f"{f', {ctx.world_size} processes' if ctx.enabled else ''} | {budget}",
        main=main,
    )
    if plan.resume_dir is not None:
        _print(f"resumed from {plan.resume_dir} at step {trainer.step}", main=main)
    elif main and args.samples:
        _print_samples(
            run, sentences, args.samples, recipe.max_length, "before training", _ROWS_SHOWN_BEFORE
        )
    try:
        trainer.train()
    except TrainingDiverged as err:
        print(f"course pretrain: {err}", file=sys.stderr)
        return 1
    except WriteFailed as err:  # a checkpoint save: say how to go on from the one that is kept
        again = f"course pretrain --output-dir {plan.output_dir} --resume"
        if plan.resume_dir is not None or (plan.output_dir / CHECKPOINT_NAME).is_dir():
            raise WriteFailed(err.errno, f"{err.strerror}; continue with: {again}") from err
        raise
    finally:
        distributed.shutdown()
    if trainer.stop_reason not in ("max_steps", "time"):
        _print(
            f"stopped by {trainer.stop_reason} after step {trainer.step}; checkpoint saved. "
            f"Continue with: course pretrain --output-dir {plan.output_dir} --resume",
            main=main,
        )
        return 0
    if main:
        if args.samples:
            _print_samples(run, sentences, args.samples, recipe.max_length, "after training")
        _print_result(trainer, plan.output_dir, run.tokenizer.mask_token)
    return 0


def _prepare_run(plan: _Plan, corpus: Any, main: bool) -> Any:
    """Tokenizer (the checkpoint's when resuming: the ids must not change), model and examples."""
    from course_lib.data.corpus import StreamCorpus
    from course_lib.training import distributed
    from course_lib.training.recipes import prepare_run, tokenizer_path

    tokenizer = None
    streamed = isinstance(corpus, StreamCorpus)
    vocab_size = plan.recipe.vocab_size
    what = f"{vocab_size}-entry {plan.family.tokenizer} tokenizer"
    if plan.resume_dir is not None:
        tokenizer = _checkpoint_tokenizer(plan.resume_dir, plan.state)
    elif (
        streamed
        and plan.store_dir is not None
        and (
            cached := tokenizer_path(corpus, plan.family.tokenizer, vocab_size, plan.store_dir)
        ).is_file()
    ):  # trained on this corpus by an earlier run: read, not trained again
        _print(f"the {what} of {corpus.name}, trained by an earlier run: {cached}", main=main)
    else:
        _print(f"training a {what} on {corpus.name}", main=main)

    def log(line: str) -> None:
        _print(f"  tokenizer: {line}", main=main)

    if streamed and not main:
        distributed.barrier()  # rank 0 tokenizes and encodes first; the others open its stores
    with _usage_errors():  # e.g. a family without a sentence head and objective mlm+nsp
        run = prepare_run(
            plan.recipe,
            plan.family.name,
            plan.objective,
            corpus,
            plan.args.seed,
            tokenizer,
            log,
            store_dir=plan.store_dir,
            progress=main and not plan.args.no_progress,
        )
    if streamed and main:
        distributed.barrier()
    for store in run.stores:
        meta = store.meta
        _print(
            f"token store ({store.path.name.split('-')[0]}): {store.path} | "
            f"{store.nbytes / 1e6:,.1f} MB on disk, {store.n_tokens:,} tokens of "
            f"{meta.get('n_documents', 0):,} documents",
            main=main,
        )
    if not run.held_out:
        raise UsageError(
            f"corpus {plan.corpus_spec!r} has no validation documents; give it more documents"
        )
    return run


def _training_config(plan: _Plan) -> Any:
    """The recipe's TrainingConfig with the flags (and, resuming, the run's own settings)."""
    args = plan.args
    overrides: dict[str, Any] = dict(objective=plan.objective, seed=args.seed, device=args.device)
    overrides["output_dir"] = str(plan.output_dir)
    overrides["progress"] = not args.no_progress
    if plan.resume_dir is not None:
        saved = plan.state["training_config"]
        # The data position depends on the batch size: the run's own unless given (and checked).
        overrides.update({k: saved[k] for k in ("batch_size", "lr") if k in saved})
        if args.steps is None and args.minutes is None:  # towards the run's own budget
            keys = ("max_steps", "max_minutes", "eval_every", "eval_every_minutes")
            overrides.update({k: saved[k] for k in keys if k in saved})
    if args.steps is not None:
        overrides.update(max_steps=args.steps, max_minutes=None, eval_every=max(1, args.steps // 5))
        overrides["eval_every_minutes"] = None
    elif args.minutes is not None:
        overrides.update(max_minutes=args.minutes, eval_every_minutes=max(args.minutes / 5, 0.1))
    for name in ("precision", "batch_size", "lr"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    with _usage_errors():
        return plan.recipe.training_config(**overrides)


def _trainer(plan: _Plan, run: Any, training: Any, world_size: int) -> Any:
    """The Trainer for the run, resumed from the checkpoint when asked."""
    from course_lib.training.engine import Trainer

    global_batch = training.batch_size * training.gradient_accumulation_steps * world_size
    if len(run.train) < global_batch:
        raise UsageError(
            f"corpus {plan.corpus_spec!r} gives {len(run.train)} training examples, fewer than "
            f"one batch of {global_batch}; lower --batch-size (e.g. --batch-size "
            f"{max(1, len(run.train))}) or add documents"
        )
    run_info = {
        "family": plan.family.name,
        "preset": plan.recipe.name,
        "corpus": _corpus_path(plan.corpus_spec),
        "max_length": plan.recipe.max_length,
        "masking": plan.recipe.masking,
        "vocab_size": plan.recipe.vocab_size,
    }
    if run.stores:
        run_info["store_dir"] = str(plan.store_dir)
    with _usage_errors():
        trainer = Trainer(
            run.model,
            run.train,
            run.collator,
            training,
            run.held_out,
            objective=run.objective,
            tokenizer=run.tokenizer,
            run_info=run_info,
        )
    if plan.resume_dir is not None:
        with _usage_errors():
            trainer.resume(plan.resume_dir)
    return trainer


# Before training every row is a miss: list a few, score all of them.
_ROWS_SHOWN_BEFORE = 3


def _generator_size(model: Any) -> str:
    """', generator N hidden' for ELECTRA's pretrainer (its generator is part of the run)."""
    generator = getattr(model, "generator", None)
    return "" if generator is None else f" (generator {generator.config.hidden_size} hidden)"


def _print_samples(
    run: Any, sentences: list[str], n: int, max_tokens: int, title: str, show: int | None = None
) -> None:
    from course_lib.training.inference import fill_mask_report, format_fill_mask_report, mlm_model

    model = mlm_model(run.model)  # ELECTRA: the generator fills the masks
    title = f"{title} (generator)" if model is not run.model else title
    rows = fill_mask_report(model, run.tokenizer, sentences, n=n, max_tokens=max_tokens)
    print(format_fill_mask_report(rows, title, show=show), flush=True)


def _print_result(trainer: Any, output_dir: Path, mask_token: str) -> None:
    last = trainer.history[-1] if trainer.history else {}
    checkpoint = output_dir / CHECKPOINT_NAME
    took = f"after {trainer.step} steps ({trainer.elapsed_s / 60:.1f} min)"
    if "eval_rtd_accuracy" in last:
        print(
            f"held-out replaced-token accuracy {last['eval_rtd_accuracy']:.1%} (base rate "
            f"{last['eval_rtd_base_rate']:.1%}: every token called original), AUC "
            f"{last['eval_rtd_auc']:.3f}; generator masked-token accuracy "
            f"{last['eval_mlm_accuracy']:.1%} {took}"
        )
        print(
            f'checkpoint: {checkpoint}\ntry: course detect {checkpoint} "The cat drinks the house."'
        )
        return
    if "eval_mlm_accuracy" in last:
        print(
            f"held-out masked-token accuracy {last['eval_mlm_accuracy']:.1%}, MLM loss "
            f"{last['eval_mlm_loss']:.3f} {took}"
        )
    print(
        f'checkpoint: {checkpoint}\ntry: course fill-mask {checkpoint} "The {mask_token} is here."'
    )


def _checkpoint_tokenizer(path: str | Path, state: dict[str, Any]) -> Any:
    """The checkpoint's tokenizer, refused (one line) if it is damaged or another run's."""
    from course_lib.training.checkpoint import CheckpointError, load_tokenizer

    with _usage_errors(CheckpointError):
        return load_tokenizer(path, state)


def _load_model_and_tokenizer(
    path: str, family: str | None, device: str = "cpu"
) -> tuple[Any, Any, dict]:
    from course_lib.training.checkpoint import load_pretrained
    from course_lib.training.device import select_device

    state = checkpoint_state(path, family)
    tokenizer = _checkpoint_tokenizer(path, state)
    with _usage_errors():
        model = load_pretrained(path, device=select_device(device))
    return model, tokenizer, state


def cmd_fill_mask(args: argparse.Namespace) -> int:
    from course_lib.training.inference import fill_mask, mlm_model
    from course_lib.training.recipes import FAMILIES

    if args.family is not None and args.family not in FAMILIES:
        raise UsageError(f"unknown family {args.family!r}; choose one of {sorted(FAMILIES)}")
    _positive(args.top_k, "--top-k")
    model, tokenizer, _ = _load_model_and_tokenizer(args.checkpoint, args.family)
    model = mlm_model(model)  # ELECTRA: its generator
    if not hasattr(model, "mlm_head"):
        hint = "; try course detect" if hasattr(model, "discriminator_head") else ""
        raise UsageError(
            f"checkpoint {args.checkpoint!r} holds {type(model).__name__}, which has no "
            f"masked-LM head to fill masks with{hint}"
        )
    with _usage_errors():
        results = fill_mask(model, tokenizer, args.text, top_k=args.top_k)
    per_mask = results if isinstance(results[0], list) else [results]
    for i, candidates in enumerate(per_mask):
        if len(per_mask) > 1:
            print(f"mask {i + 1}:")
        for c in candidates:
            print(f"  {c['score']:6.1%}  {c['token_str']:<16} {c['sequence']}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from course_lib.data import PretrainingCollator
    from course_lib.objectives import MaskingConfig
    from course_lib.objectives.targets import OBJECTIVES
    from course_lib.training.engine import evaluate_pretraining
    from course_lib.training.inference import fill_mask_report, format_fill_mask_report, mlm_model

    _at_least_zero(args.samples, "--samples")
    model, tokenizer, state = _load_model_and_tokenizer(args.checkpoint, None, args.device)
    if not hasattr(mlm_model(model), "mlm_head"):
        hint = "; try course detect" if hasattr(model, "discriminator_head") else ""
        raise UsageError(
            f"checkpoint {args.checkpoint!r} holds {type(model).__name__} alone, without the "
            f"masked-LM head (or ELECTRA generator) that held-out evaluation needs{hint}"
        )
    run = state.get("run", {})
    training = state.get("training_config")
    training = training if isinstance(training, dict) else {}
    if not isinstance(run, dict):
        run = {"corpus": None}  # reported as damaged below
    corpus_spec = args.corpus or run.get("corpus", "builtin")
    objective, seed = training.get("objective", "mlm"), training.get("seed", 0)
    max_length, masking = run.get("max_length", 128), run.get("masking", {})
    damaged = [
        name
        for name, ok in (
            ("run.corpus", isinstance(corpus_spec, str)),
            ("training_config.objective", objective in OBJECTIVES),
            ("training_config.seed", isinstance(seed, int) and not isinstance(seed, bool)),
            ("run.max_length", isinstance(max_length, int) and max_length > 0),
            ("run.masking", isinstance(masking, dict)),
        )
        if not ok
    ]
    if damaged:
        raise UsageError(
            f"{Path(args.checkpoint) / 'trainer_state.json'} holds a damaged {damaged[0]}; "
            "use a complete checkpoint written by course pretrain"
        )
    saved_store = run.get("store_dir")
    store_dir = (
        Path(saved_store)
        if isinstance(saved_store, str) and Path(saved_store).is_dir()
        else Path(args.checkpoint).absolute().parent / "token-store"
    )
    corpus = _load_corpus(corpus_spec, args.corpus is None, store_dir)
    try:
        collator = PretrainingCollator(tokenizer, MaskingConfig(**masking))
    except (TypeError, ValueError) as err:
        raise UsageError(
            f"{Path(args.checkpoint) / 'trainer_state.json'} holds damaged masking settings "
            f"({str(err).rstrip('.')}); use a complete checkpoint written by course pretrain"
        ) from err
    held_out = _held_out(corpus, tokenizer, objective, max_length, abs(seed), store_dir)
    if not held_out:
        raise UsageError(f"corpus {corpus_spec!r} has no validation documents")
    metrics = evaluate_pretraining(model, held_out, collator, objective=objective, seed=abs(seed))
    print(
        f"{args.checkpoint}: step {state.get('step')}, {len(held_out)} held-out examples of {corpus_spec}"
    )
    for name, value in metrics.items():
        print(f"  {name:<20} {value:.4f}")
    if args.samples:
        rows = fill_mask_report(
            mlm_model(model),
            tokenizer,
            _validation_sentences(corpus),
            n=args.samples,
            max_tokens=max_length,
        )
        print(format_fill_mask_report(rows, "fill-mask"))
    return 0


def _held_out(
    corpus: Any, tokenizer: Any, objective: str, max_length: int, seed: int, store_dir: Path
) -> Any:
    """The held-out examples `course pretrain` trained with: a streamed corpus's from its
    validation token store (the run's, or built once next to the checkpoint)."""
    from course_lib.data import build_pretraining_dataset
    from course_lib.data.corpus import StreamCorpus
    from course_lib.data.token_store import open_or_build, pretraining_examples

    if not isinstance(corpus, StreamCorpus):
        return build_pretraining_dataset(corpus.validation, tokenizer, objective, max_length, seed)
    corpus.scan(store_dir)
    store = open_or_build(
        store_dir,
        corpus.documents("validation"),
        tokenizer,
        name="validation",
        documents_fp=f"{corpus.split_key()}:validation",
    )
    return pretraining_examples(store, tokenizer, objective, max_length, seed)


def cmd_detect(args: argparse.Namespace) -> int:
    """Which tokens of the text ELECTRA's discriminator believes were replaced, one per line."""
    from course_lib.training.inference import detect_replaced, discriminator_of, format_detection

    model, tokenizer, _ = _load_model_and_tokenizer(args.checkpoint, None)
    with _usage_errors():
        discriminator_of(model)  # an ELECTRA checkpoint, else one line
        rows = detect_replaced(model, tokenizer, args.text)
    if not rows:
        raise UsageError("the text has no tokens to judge; pass a sentence")
    print(format_detection(rows))
    return 0


def _export_cli(name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from course_lib.training import export_cli

        return getattr(export_cli, name)(args)

    return run


COMMANDS = {
    "pretrain": cmd_pretrain,
    "fill-mask": cmd_fill_mask,
    "evaluate": cmd_evaluate,
    "detect": cmd_detect,
    "export": _export_cli("cmd_export"),
    "import": _export_cli("cmd_import"),
}


def _library_error(err: Exception) -> str | None:
    """The one line for an error the libraries underneath raised where no command caught it: a
    failed write (a full disk) or read, naming the file when the error does; None for the rest
    (a bug: its traceback is wanted)."""
    import json

    from course_lib.training.checkpoint import DISK_FULL, WriteFailed, write_failure

    if isinstance(err, WriteFailed):
        return err.strerror.rstrip(".")
    if isinstance(err, json.JSONDecodeError):
        return f"a JSON file is damaged ({err}); restore it from a copy and rerun"
    found = write_failure(err)
    if found is None:
        return None
    name = getattr(err, "filename", None)
    if found[0] in DISK_FULL:
        where = f" while writing {name}" if name else ""
        return f"{found[1]}{where}; free space and rerun"
    return f"{name or 'a file'}: {found[1]}; check the path and its permissions, and rerun"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `course` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    prog = f"course {args.command}"

    def one_line_warning(message: Any, *rest: Any, **kwargs: Any) -> None:
        print(f"{prog}: note: {str(message).strip().splitlines()[0]}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = one_line_warning
        try:
            return COMMANDS[args.command](args)
        except UsageError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        except Exception as err:
            line = _library_error(err)
            if line is None:
                raise
            print(f"{prog}: error: {line}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # Ctrl-C outside training (corpus, tokenizer, evaluation)
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
