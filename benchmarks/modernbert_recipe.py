"""Issue 44: which tiny ModernBERT recipe `course pretrain --family modernbert` uses, and whether
unpadding pays on a CPU. Two measurements in one process, side by side:

1. two candidate sizes (2 x 192 and 4 x 128, each with GeGLU 1.5 x H), trained the CLI's way
   (prepare_run + Trainer, the built-in corpus, the tiny recipe's data and optimiser) for the
   same number of steps: held-out masked-token accuracy, MLM loss and seconds;
2. forward + backward of each candidate at the recipe's shape (64 x 32-token batches from the
   collator, so with the corpus' real padding), padded and unpadded in alternation on the same
   weights: the median seconds of each.

    python benchmarks/modernbert_recipe.py                      # 300 steps each, 1 thread
    python benchmarks/modernbert_recipe.py --steps 20 --repeats 3 --out /tmp/x   # a smoke run
    python benchmarks/modernbert_recipe.py --sizes 2x192 --steps 334 --no-unpadding
        # the faster size for the seconds the slower one took (equal time, not equal steps)

Writes benchmarks/results/issue44/modernbert_recipe.json (benchmarks/README.md, "Issue 44").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from course_lib.data import load_builtin_corpus
from course_lib.training import Trainer
from course_lib.training.device import autocast, select_precision
from course_lib.training.recipes import MODERNBERT_TINY, prepare_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS_DIR, provenance, write_results  # noqa: E402

SIZES = {
    "2x192": dict(
        hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=288
    ),
    "4x128": dict(
        hidden_size=128, num_hidden_layers=4, num_attention_heads=2, intermediate_size=192
    ),
}


def candidate(name: str) -> Any:
    """The tiny ModernBERT recipe with one candidate's sizes (everything else the recipe's)."""
    return MODERNBERT_TINY.replace(model={**MODERNBERT_TINY.model, **SIZES[name]})


def train(name: str, steps: int, corpus: Any, tokenizer: Any) -> dict[str, Any]:
    """`steps` steps of the candidate, as course pretrain runs them; its held-out numbers."""
    run = prepare_run(candidate(name), "modernbert", corpus=corpus, tokenizer=tokenizer)
    config = candidate(name).training_config(
        max_steps=steps, max_minutes=None, eval_every=steps, progress=False, device="cpu"
    )
    trainer = Trainer(run.model, run.train, run.collator, config, run.held_out)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    last = trainer.history[-1]
    return {
        "steps": steps,
        "seconds": round(seconds, 1),
        "precision": trainer.precision,
        "parameters": sum(p.numel() for p in run.model.parameters()),
        "eval_mlm_accuracy": last["eval_mlm_accuracy"],
        "eval_mlm_loss": last["eval_mlm_loss"],
    }


def time_unpadding(name: str, repeats: int, corpus: Any, tokenizer: Any) -> dict[str, Any]:
    """Median forward+backward seconds of one 64 x 32 batch, padded vs unpadded, alternating;
    the logits compared in fp32 (the switch may change only the speed)."""
    run = prepare_run(candidate(name), "modernbert", corpus=corpus, tokenizer=tokenizer)
    model = run.model.train()
    batch_size = candidate(name).training["batch_size"]
    generator = torch.Generator().manual_seed(0)
    batches = [
        run.collator(run.train[i * batch_size : (i + 1) * batch_size], generator=generator)
        for i in range(4)
    ]
    real = sum(float(b["attention_mask"].sum()) for b in batches)
    slots = sum(b["attention_mask"].numel() for b in batches)
    # the precision course pretrain picks here (bf16 autocast where the CPU has native bf16)
    precision = select_precision("cpu", candidate(name).training["precision"])
    seconds: dict[str, list[float]] = {"padded": [], "unpadded": []}
    difference = 0.0
    for r in range(repeats + 1):  # the first round warms up and is not counted
        for mode in ("padded", "unpadded"):
            model.config.unpad = mode == "unpadded"
            start = time.perf_counter()
            for b in batches:
                inputs = {k: b[k] for k in ("input_ids", "attention_mask", "labels")}
                with autocast(torch.device("cpu"), precision):
                    out = model(**inputs)
                out.loss.backward()
            if r:
                seconds[mode].append((time.perf_counter() - start) / len(batches))
            model.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():  # same outputs either way (the switch changes only the speed)
        b = batches[0]
        model.config.unpad = False
        a = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).mlm_logits
        model.config.unpad = True
        c = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).mlm_logits
        keep = b["attention_mask"].bool()
        difference = float((a[keep] - c[keep]).abs().max())
    padded, unpadded = (statistics.median(seconds[m]) for m in ("padded", "unpadded"))
    return {
        "precision": precision,
        "real_token_share": round(real / slots, 3),
        "padded_s": padded,
        "unpadded_s": unpadded,
        "unpadded_over_padded": round(unpadded / padded, 3),
        "max_logit_difference": difference,
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=10, help="timed rounds of padded/unpadded")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "issue44")
    p.add_argument(
        "--sizes", nargs="+", choices=sorted(SIZES), default=list(SIZES), help="a subset to train"
    )
    p.add_argument("--no-unpadding", action="store_true", help="skip the padded/unpadded timing")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    meta = provenance(args.threads)
    corpus = load_builtin_corpus(progress=False)
    tokenizer = prepare_run(MODERNBERT_TINY, "modernbert", corpus=corpus).tokenizer
    results: dict[str, Any] = {"candidates": {}, "unpadding": {}}
    for name in args.sizes:
        results["candidates"][name] = row = train(name, args.steps, corpus, tokenizer)
        print(f"{name}: {row}", flush=True)
    for name in [] if args.no_unpadding else args.sizes:
        results["unpadding"][name] = row = time_unpadding(name, args.repeats, corpus, tokenizer)
        print(f"{name} unpadding: {row}", flush=True)
    payload = {
        **meta,
        "recipe": {"model": MODERNBERT_TINY.model, "training": MODERNBERT_TINY.training},
        "sizes": SIZES,
        **results,
    }
    full = args.sizes == list(SIZES) and not args.no_unpadding and args.steps == 300
    name = "modernbert_recipe" + ("" if full else f"_{'_'.join(args.sizes)}_{args.steps}steps")
    write_results(name, payload, args.out)
    return payload


if __name__ == "__main__":
    main()
