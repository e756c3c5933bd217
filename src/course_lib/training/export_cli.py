"""`course export` and `course import`: a checkpoint to a transformers folder, and back.

    course export runs/tiny/checkpoint my-model       # then pipeline("fill-mask", model="my-model")
    course import path/to/bert-base-uncased runs/bert-base    # then course fill-mask runs/bert-base ...

The work is in course_lib.interop.export; here are the arguments and the one-line messages:
exit code 2 for a refused or damaged input, 1 for a write that failed (a full disk), which
leaves nothing half-written behind.
"""

from __future__ import annotations

import argparse
from typing import Any

from course_lib.training.cli_common import UsageError, checkpoint_state


def add_parsers(sub: Any) -> None:
    """Register the two subcommands on the `course` parser's subparsers."""
    x = sub.add_parser(
        "export",
        help="write a checkpoint as a folder transformers loads (config, weights, tokenizer)",
    )
    x.add_argument("checkpoint", help="a checkpoint directory written by course pretrain")
    x.add_argument("out_dir", help="a new (or empty) folder for the transformers files")
    x.add_argument(
        "--mlm-only",
        action="store_true",
        help="export only the masked-LM part of an MLM+NSP/SOP model (the sentence head is left out)",
    )
    i = sub.add_parser(
        "import", help="turn a transformers model folder (e.g. bert-base-uncased) into a checkpoint"
    )
    i.add_argument("hf_dir", help="a local folder with config.json, weights and tokenizer files")
    i.add_argument("out_dir", help="a new (or empty) folder for the course checkpoint")


def cmd_export(args: argparse.Namespace) -> int:
    from course_lib.interop.export import export_checkpoint
    from course_lib.training.checkpoint import WriteFailed

    checkpoint_state(args.checkpoint, None)  # exists, is a checkpoint, has its tokenizer
    try:
        result = export_checkpoint(args.checkpoint, args.out_dir, mlm_only=args.mlm_only)
    except WriteFailed:
        raise  # one line and exit code 1 in cli.main
    except (ValueError, OSError) as err:
        raise UsageError(_one_line(err)) from err
    print(
        f"{result.course_class} -> transformers {result.hf_class} in {result.out_dir} "
        f"(same outputs on a check sentence: max difference {result.max_difference:.1e})"
    )
    if result.note:
        print(f"note: {result.note}")
    if result.hf_class == "ElectraForPreTraining":  # no fill-mask: its logits say "replaced?"
        print(
            f'try: python -c "from transformers import AutoTokenizer, ElectraForPreTraining; '
            f"t = AutoTokenizer.from_pretrained('{result.out_dir}'); "
            f"m = ElectraForPreTraining.from_pretrained('{result.out_dir}'); "
            f"print(m(**t('The cat drinks the house.', return_tensors='pt')).logits.sigmoid())\""
        )
        return 0
    print(
        f'try: python -c "from transformers import pipeline; '
        f"print(pipeline('fill-mask', model='{result.out_dir}')('The {result.mask_token} is here.'))\""
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from course_lib.interop.export import import_transformers
    from course_lib.training.checkpoint import WriteFailed

    try:
        out_dir, model, note = import_transformers(args.hf_dir, args.out_dir)
    except WriteFailed:
        raise  # one line and exit code 1 in cli.main
    except (ValueError, OSError) as err:
        raise UsageError(_one_line(err)) from err
    print(f"{args.hf_dir} -> {type(model).__name__} checkpoint in {out_dir}")
    if note:
        print(f"note: {note}")
    from course_lib.tokenization import CourseTokenizer

    if hasattr(model, "discriminator_head"):  # ELECTRA's discriminator: no masks to fill
        print(f'try: course detect {out_dir} "The cat drinks the house."')
        return 0
    mask = CourseTokenizer.load(out_dir).mask_token
    print(f'try: course fill-mask {out_dir} "The {mask} is here."')
    return 0


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text.rstrip(".")
