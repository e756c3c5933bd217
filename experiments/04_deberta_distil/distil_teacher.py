"""Pretrain the teacher that chapter 04's DistilBERT notebooks distil: a 4-layer pre-LN BERT
(hidden 64) trained with MLM on the built-in corpus, saved with its tokenizer.

Chapter 01's tiny recipe as it was when the teacher was trained (pre-LN, MLM only, AdamW lr
1e-3, 6% warmup, linear decay, batch 32, 4 x 256; course_lib.training.recipes.TINY has since
been retuned to 32-token sequences, now at 2 x 192) at a quarter of that width (64), with a 4,000
WordPiece vocabulary, 64-token blocks and a step budget (2,000 steps) instead of 5 minutes:
the distillation experiments train 20 students from it on a shared CPU.

    python experiments/04_deberta_distil/distil_teacher.py            # the committed teacher
    python experiments/04_deberta_distil/distil_teacher.py --fast --out /tmp/x   # seconds

Writes <out>/distil_teacher/ (model.safetensors, the JSON state, tokenizer.json: a checkpoint
that course_lib.training.load_pretrained reads), <out>/distil_teacher.json (config, command,
held-out MLM curve) and <out>/distil_teacher.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from distil_common import (
    RESULTS_DIR,
    TEACHER_SIZES,
    build_data,
    progress,
    run_header,
    save_teacher,
    training_config,
    write_json,
)

from course_lib.config import BertConfig
from course_lib.counting import count_parameters
from course_lib.models.bert import BertForMaskedLM
from course_lib.training import Trainer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the outputs")
    p.add_argument("--fast", action="store_true", help="a few steps: checks the script runs")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    steps = 4 if args.fast else args.steps
    header = run_header(args, "distil_teacher.py", argv)
    data = build_data(max_documents=30 if args.fast else None)
    if args.fast:
        data.validation = data.validation[:64]
    config = BertConfig(**TEACHER_SIZES)
    torch.manual_seed(args.seed)
    teacher = BertForMaskedLM(config)
    progress(f"teacher: {teacher.num_parameters():,} parameters, {steps} steps")
    trainer = Trainer(
        teacher,
        data.train,
        data.collate,
        training_config(
            steps,
            args.seed,
            lr=args.lr,
            eval_every=max(1, steps // 8),
            log_every=max(1, steps // 40),
        ),
        eval_dataset=data.validation,
        tokenizer=data.tokenizer,
    )
    start = time.perf_counter()
    history = trainer.train()
    wall = time.perf_counter() - start
    final = {k: v for k, v in history[-1].items() if k.startswith("eval_")}
    progress(f"done in {wall:.0f} s: {final}")

    info = {
        **header,
        "description": "teacher for chapter 04's DistilBERT notebooks (MLM, built-in corpus)",
        "corpus": data.corpus.summary(),
        "steps": steps,
        "lr": args.lr,
        "seed": args.seed,
    }
    save_teacher(args.out / "distil_teacher", teacher.eval(), data.tokenizer, info)
    payload = {
        **info,
        "model_config": config.to_dict(),
        "parameters": count_parameters(config, "BertForMaskedLM"),
        "training_config": trainer.config.to_dict(),
        "examples": {"train": len(data.train), "validation": len(data.validation)},
        "wall_s": round(wall, 1),
        "final": final,
        "history": history,
    }
    write_json(args.out / "distil_teacher.json", payload)
    figure = history.plot()
    figure.savefig(args.out / "distil_teacher.png", dpi=80, bbox_inches="tight")
    return payload


if __name__ == "__main__":
    main()
