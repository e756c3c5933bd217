"""The `course` command: pretrain a model, fill in masks, evaluate a checkpoint.

    course pretrain                                   # tiny BERT, built-in corpus, 5 minutes
    course pretrain --minutes 1 --output-dir runs/a   # shorter
    course pretrain --resume                          # continue runs/tiny after Ctrl-C
    course fill-mask runs/tiny/checkpoint "The [MASK] statement raises an exception."
    course evaluate runs/tiny/checkpoint
    torchrun --nproc_per_node=2 -m course_lib.training.cli pretrain --steps 200

Mistakes in the arguments give one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

CHECKPOINT_NAME = "checkpoint"


class UsageError(Exception):
    """A mistake in the command line: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line ('course pretrain: error: ...') instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from course_lib.training.engine import OBJECTIVES
    from course_lib.training.recipes import FAMILIES

    parser = _Parser(
        prog="course", description="Encoders from Scratch: pretrain and inspect encoders."
    )
    sub = parser.add_subparsers(
        dest="command", parser_class=_Parser, metavar="{pretrain,fill-mask,evaluate}"
    )

    p = sub.add_parser(
        "pretrain", help="pretrain a model (default: tiny BERT, built-in corpus, 5 min)"
    )
    p.add_argument(
        "--family", default="bert", help=f"model family: {', '.join(FAMILIES)} (default bert)"
    )
    p.add_argument(
        "--preset", default="tiny", help="recipe or size: tiny (default), bert-mini, ..."
    )
    p.add_argument(
        "--objective", default=None, choices=OBJECTIVES, help="default: the recipe's (mlm)"
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=None, help="wall-clock budget (default 5)")
    budget.add_argument(
        "--steps", type=int, default=None, help="optimizer steps instead of minutes"
    )
    p.add_argument("--corpus", default="builtin", help="'builtin' or a .txt/.jsonl file or folder")
    p.add_argument(
        "--output-dir", default=None, help="where checkpoints go (default runs/<preset>)"
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        help="continue from a checkpoint (default: <output-dir>/checkpoint)",
    )
    p.add_argument("--precision", default=None, choices=("auto", "fp32", "bf16", "fp16"))
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, mps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=None, help="per process (default: recipe's)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: recipe's)")
    p.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: torch's choice)"
    )
    p.add_argument(
        "--samples", type=int, default=6, help="fill-mask samples shown before and after"
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
    e.add_argument("--samples", type=int, default=8)
    e.add_argument("--device", default="auto")
    return parser


# --- helpers ---------------------------------------------------------------------------------------


def _positive(value: float | None, name: str) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"{name} must be > 0, got {value:g}")


def _load_corpus(spec: str) -> Any:
    from course_lib.data import load_builtin_corpus, load_text_corpus

    if spec == "builtin":
        return load_builtin_corpus()
    if not Path(spec).expanduser().exists():
        raise UsageError(
            f"corpus path {spec!r} does not exist; pass 'builtin' or a .txt/.jsonl file or folder"
        )
    try:
        return load_text_corpus(spec)
    except ValueError as err:
        raise UsageError(f"cannot read corpus {spec!r}: {err}") from err


def _checkpoint_state(path: str | Path, family: str | None) -> dict[str, Any]:
    """The JSON state of a checkpoint, checked to exist and (optionally) to be of `family`."""
    from course_lib.training.checkpoint import read_state
    from course_lib.training.recipes import FAMILIES

    path = Path(path)
    if not path.exists():
        raise UsageError(f"checkpoint {str(path)!r} does not exist")
    try:
        state = read_state(path)
    except FileNotFoundError as err:
        raise UsageError(str(err).rstrip(".")) from err
    model_type = (state.get("config") or {}).get("model_type")
    if family is not None:
        expected = FAMILIES[family].config_cls().model_type
        if model_type != expected:
            raise UsageError(
                f"checkpoint {str(path)!r} holds a {model_type} model, not {family}; "
                f"use --family {model_type} or another checkpoint"
            )
    if not (path / "tokenizer.json").is_file():
        raise UsageError(
            f"checkpoint {str(path)!r} has no tokenizer.json; it was not written by course pretrain"
        )
    return state


def _print(*args: Any, main: bool = True) -> None:
    if main:
        print(*args, flush=True)


def _validation_sentences(corpus: Any) -> list[str]:
    return [s for doc in corpus.validation for s in doc.sentences]


# --- commands --------------------------------------------------------------------------------------


def cmd_pretrain(args: argparse.Namespace) -> int:
    from course_lib.training.recipes import FAMILIES, get_recipe

    if args.family not in FAMILIES:
        raise UsageError(f"unknown family {args.family!r}; choose one of {sorted(FAMILIES)}")
    _positive(args.minutes, "--minutes")
    _positive(args.steps, "--steps")
    _positive(args.batch_size, "--batch-size")
    _positive(args.lr, "--lr")
    _positive(args.threads, "--threads")
    family = FAMILIES[args.family]
    try:
        recipe = get_recipe(args.preset, args.family)
        recipe.model_config(family, vocab_size=1000, pad_token_id=0)  # sizes valid for the family?
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    output_dir = Path(args.output_dir or Path("runs") / args.preset)
    resume_dir, state = None, {}
    if args.resume is not None:
        resume_dir = output_dir / CHECKPOINT_NAME if args.resume == "auto" else Path(args.resume)
        state = _checkpoint_state(resume_dir, args.family)
    objective = args.objective or recipe.training.get("objective", "mlm")
    if resume_dir is not None and args.objective is None:
        objective = state["training_config"]["objective"]
    corpus_spec = args.corpus
    if resume_dir is not None and args.corpus == "builtin":
        corpus_spec = state.get("run", {}).get("corpus", corpus_spec)
    try:
        family.model_class(objective)  # fail before minutes of corpus and tokenizer work
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    corpus = _load_corpus(corpus_spec)
    return _pretrain(
        args, recipe, family, objective, corpus, corpus_spec, output_dir, resume_dir, state
    )


def _pretrain(
    args, recipe, family, objective, corpus, corpus_spec, output_dir, resume_dir, state
) -> int:
    import torch

    from course_lib.tokenization import CourseTokenizer
    from course_lib.training import distributed
    from course_lib.training.device import select_device
    from course_lib.training.engine import Trainer, TrainingDiverged
    from course_lib.training.inference import fill_mask_report, format_fill_mask_report
    from course_lib.training.recipes import prepare_run

    try:
        device = select_device(args.device)
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    ctx = distributed.init_from_env(device.type)
    main = ctx.is_main
    tokenizer = None
    if resume_dir is not None:  # the checkpoint's own tokenizer: the ids must not change
        tokenizer = CourseTokenizer.load(resume_dir / "tokenizer.json")
    else:
        _print(
            f"training a {recipe.vocab_size}-entry {family.tokenizer} tokenizer on {corpus.name}",
            main=main,
        )
    try:
        run = prepare_run(recipe, family.name, objective, corpus, args.seed, tokenizer)
    except ValueError as err:  # e.g. a family without a sentence head and objective mlm+nsp
        raise UsageError(str(err).rstrip(".")) from err
    model, tokenizer, train, held_out = run.model, run.tokenizer, run.train, run.held_out
    if not held_out:
        raise UsageError(
            f"corpus {corpus_spec!r} has no validation documents; give it more documents"
        )
    config = model.config
    overrides: dict[str, Any] = dict(objective=objective, seed=args.seed, device=args.device)
    overrides["output_dir"] = str(output_dir)
    overrides["progress"] = not args.no_progress
    if resume_dir is not None and args.steps is None and args.minutes is None:
        saved = state["training_config"]  # continue towards the interrupted run's own budget
        overrides.update(
            {
                k: saved[k]
                for k in (
                    "max_steps",
                    "max_minutes",
                    "eval_every",
                    "eval_every_minutes",
                    "batch_size",
                    "lr",
                )
            }
        )
    if args.steps is not None:
        overrides.update(max_steps=args.steps, max_minutes=None, eval_every=max(1, args.steps // 5))
        overrides["eval_every_minutes"] = None
    elif args.minutes is not None:
        overrides.update(max_minutes=args.minutes, eval_every_minutes=max(args.minutes / 5, 0.1))
    for name in ("precision", "batch_size", "lr"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    try:
        training = recipe.training_config(**overrides)
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    collator = run.collator
    run_info = {
        "family": family.name,
        "preset": recipe.name,
        "corpus": corpus_spec,
        "max_length": recipe.max_length,
        "masking": recipe.masking,
    }
    try:
        trainer = Trainer(
            model, train, collator, training, held_out, tokenizer=tokenizer, run_info=run_info
        )
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    if resume_dir is not None:
        try:
            trainer.resume(resume_dir)
        except ValueError as err:
            raise UsageError(str(err).rstrip(".")) from err
    sentences = _validation_sentences(corpus)
    n_params = sum(p.numel() for p in model.parameters())
    budget = (
        f"{training.max_steps} steps" if training.max_steps else f"{training.max_minutes:g} minutes"
    )
    _print(
        f"{type(model).__name__} ({recipe.name}): {config.num_hidden_layers} layers x "
        f"{config.hidden_size} hidden, {n_params / 1e6:.1f}M parameters | {objective} on "
        f"{len(train):,} examples of <= {recipe.max_length} tokens ({len(held_out)} held out) | "
        f"{trainer.device.type}, {trainer.precision}, {torch.get_num_threads()} threads"
        f"{f', {ctx.world_size} processes' if ctx.enabled else ''} | {budget}",
        main=main,
    )
    if resume_dir is not None:
        _print(f"resumed from {resume_dir} at step {trainer.step}", main=main)
    elif main and args.samples:
        before = fill_mask_report(
            model, tokenizer, sentences, n=args.samples, max_tokens=recipe.max_length
        )
        _print(format_fill_mask_report(before, "before training"), main=main)
    try:
        trainer.train()
    except TrainingDiverged as err:
        print(f"course pretrain: {err}", file=sys.stderr)
        return 1
    finally:
        distributed.shutdown()
    if trainer.stop_reason not in ("max_steps", "time"):
        _print(
            f"stopped by {trainer.stop_reason} after step {trainer.step}; checkpoint saved. "
            f"Continue with: course pretrain --output-dir {output_dir} --resume",
            main=main,
        )
        return 0
    if not main:
        return 0
    if args.samples:
        after = fill_mask_report(
            model, tokenizer, sentences, n=args.samples, max_tokens=recipe.max_length
        )
        print(format_fill_mask_report(after, "after training"))
    last = trainer.history[-1] if trainer.history else {}
    if "eval_mlm_accuracy" in last:
        print(
            f"held-out masked-token accuracy {last['eval_mlm_accuracy']:.1%}, MLM loss "
            f"{last['eval_mlm_loss']:.3f} after {trainer.step} steps ({trainer.elapsed_s / 60:.1f} min)"
        )
    checkpoint = output_dir / CHECKPOINT_NAME
    print(
        f'checkpoint: {checkpoint}\ntry: course fill-mask {checkpoint} "The {tokenizer.mask_token} is here."'
    )
    return 0


def _load_model_and_tokenizer(
    path: str, family: str | None, device: str = "cpu"
) -> tuple[Any, Any, dict]:
    from course_lib.tokenization import CourseTokenizer
    from course_lib.training.checkpoint import load_pretrained
    from course_lib.training.device import select_device

    state = _checkpoint_state(path, family)
    try:
        model = load_pretrained(path, device=select_device(device))
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    return model, CourseTokenizer.load(Path(path) / "tokenizer.json"), state


def cmd_fill_mask(args: argparse.Namespace) -> int:
    from course_lib.training.inference import fill_mask
    from course_lib.training.recipes import FAMILIES

    if args.family is not None and args.family not in FAMILIES:
        raise UsageError(f"unknown family {args.family!r}; choose one of {sorted(FAMILIES)}")
    _positive(args.top_k, "--top-k")
    model, tokenizer, _ = _load_model_and_tokenizer(args.checkpoint, args.family)
    try:
        results = fill_mask(model, tokenizer, args.text, top_k=args.top_k)
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from err
    per_mask = results if isinstance(results[0], list) else [results]
    for i, candidates in enumerate(per_mask):
        if len(per_mask) > 1:
            print(f"mask {i + 1}:")
        for c in candidates:
            print(f"  {c['score']:6.1%}  {c['token_str']:<16} {c['sequence']}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from course_lib.data import PretrainingCollator, build_pretraining_dataset
    from course_lib.objectives import MaskingConfig
    from course_lib.training.engine import evaluate_pretraining
    from course_lib.training.inference import fill_mask_report, format_fill_mask_report

    model, tokenizer, state = _load_model_and_tokenizer(args.checkpoint, None, args.device)
    run = state.get("run", {})
    corpus_spec = args.corpus or run.get("corpus", "builtin")
    corpus = _load_corpus(corpus_spec)
    training = state.get("training_config", {})
    objective = training.get("objective", "mlm")
    held_out = build_pretraining_dataset(
        corpus.validation, tokenizer, objective, run.get("max_length", 128), training.get("seed", 0)
    )
    if not held_out:
        raise UsageError(f"corpus {corpus_spec!r} has no validation documents")
    collator = PretrainingCollator(tokenizer, MaskingConfig(**run.get("masking", {})))
    metrics = evaluate_pretraining(
        model, held_out, collator, objective=objective, seed=training.get("seed", 0)
    )
    print(
        f"{args.checkpoint}: step {state.get('step')}, {len(held_out)} held-out examples of {corpus_spec}"
    )
    for name, value in metrics.items():
        print(f"  {name:<20} {value:.4f}")
    if args.samples:
        rows = fill_mask_report(
            model,
            tokenizer,
            _validation_sentences(corpus),
            n=args.samples,
            max_tokens=run.get("max_length"),
        )
        print(format_fill_mask_report(rows, "fill-mask"))
    return 0


COMMANDS = {"pretrain": cmd_pretrain, "fill-mask": cmd_fill_mask, "evaluate": cmd_evaluate}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `course` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(f"course {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
