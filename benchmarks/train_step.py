"""Time one full training step (forward, backward, AdamW) of course_lib vs transformers' BERT.

Both models get the identical config, batch, dropout, optimizer and precision, and run
interleaved step by step in the same process (so background load hits both alike). Prints
tokens/s, the speed ratio, and the achieved FLOP/s as a fraction of a matmul peak measured
in the same run.

    python benchmarks/train_step.py                      # fp32 and bf16 rows, 2 threads
    python benchmarks/train_step.py --precision fp32 --steps 20

FLOPs counted are the *useful* ones (the encoder, plus the MLM head at masked positions only),
the same number for both models: a model that projects every position onto the vocabulary does
more arithmetic for the same result, and shows it as a lower utilisation.

Every run writes benchmarks/results/train_step_<layers>x<hidden>_seq<seq>_batch<batch>.json
(machine, torch and transformers versions, threads, date, command, config, every row, ratios):
the tables in benchmarks/README.md cite these files. `--out DIR` writes elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

from course_lib import BertConfig
from course_lib.models import BertForMaskedLM
from course_lib.training.device import autocast, cpu_supports_bf16

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import provenance, write_results  # noqa: E402

# AdamW's three implementations: one fused kernel over all tensors, one multi-tensor op per
# update term, or torch's per-parameter Python loop (its default on CPU).
OPTIMIZERS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10, help="timed steps per model and precision")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--precision", default="fp32,bf16", help="comma-separated: fp32,bf16")
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="fused",
        help="AdamW kernel, the same for both models (default fused: what course_lib's "
        "build_optimizer and transformers' Trainer (adamw_torch_fused) use)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the results JSON (default: benchmarks/results)",
    )
    return p.parse_args()


def make_models(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.nn.Module]:
    sizes = dict(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.ffn,
        max_position_embeddings=max(512, args.seq),
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
    )
    torch.manual_seed(0)
    ours = BertForMaskedLM(BertConfig(**sizes))
    theirs = transformers.BertForMaskedLM._from_config(
        transformers.BertConfig(**sizes), attn_implementation="sdpa"
    )
    return ours.train(), theirs.train()


def make_batch(args: argparse.Namespace) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, args.vocab, (args.batch, args.seq), generator=g)
    masked = torch.rand(args.batch, args.seq, generator=g) < args.mask_prob
    labels = torch.where(masked, input_ids, torch.full_like(input_ids, -100))
    return {
        "input_ids": input_ids.masked_fill(masked, 4),
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
        "labels": labels,
    }


def useful_flops(args: argparse.Namespace, n_masked: int) -> float:
    """Training FLOPs of one step: 3x the forward matmuls (backward costs twice the forward)."""
    h, f, s, tokens = args.hidden, args.ffn, args.seq, args.batch * args.seq
    per_token_layer = 2 * 4 * h * h + 2 * 2 * h * f + 2 * 2 * s * h  # QKVO, FFN, scores+values
    head = n_masked * (2 * h * h + 2 * h * args.vocab)  # transform + vocabulary projection
    return 3.0 * (args.layers * per_token_layer * tokens + head)


def matmul_peak(dtype: torch.dtype, n: int = 1024, repeats: int = 10) -> float:
    """Best FLOP/s of an n x n matmul in this process (the achievable peak on these threads)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def step_fn(model: torch.nn.Module, batch: dict, precision: str, optimizer: str):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **OPTIMIZERS[optimizer])

    def step() -> float:
        start = time.perf_counter()
        with autocast("cpu", precision) if precision != "fp32" else contextlib.nullcontext():
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    return step


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    header = provenance(args.threads)
    batch = make_batch(args)
    tokens = args.batch * args.seq
    flops = useful_flops(args, int((batch["labels"] != -100).sum()))
    print(
        f"config: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, FFN {args.ffn}, "
        f"vocab {args.vocab}, seq {args.seq}, batch {args.batch}, dropout {args.dropout}, "
        f"{args.threads} threads, {args.optimizer} AdamW; torch {torch.__version__}, transformers {transformers.__version__}; "
        f"CPU native bf16: {cpu_supports_bf16()}"
    )
    print(f"useful training FLOPs per step: {flops / 1e9:.1f} GFLOP")
    rows = []
    for precision in args.precision.split(","):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(dtype)
        ours, theirs = make_models(args)
        steps = {
            "course_lib": step_fn(ours, batch, precision, args.optimizer),
            "transformers": step_fn(theirs, batch, precision, args.optimizer),
        }
        times: dict[str, list[float]] = {name: [] for name in steps}
        for i in range(args.warmup + args.steps):
            for name, step in steps.items():  # interleaved: load spikes hit both models
                elapsed = step()
                if i >= args.warmup:
                    times[name].append(elapsed)
            # The peak too is sampled throughout the run, so a busy moment cannot lower it.
            peak = max(peak, matmul_peak(dtype, repeats=3))
        for name, ts in times.items():
            median = statistics.median(ts)
            rows.append(
                (precision, name, median, min(ts), tokens / median, flops / median / peak, peak)
            )
    print(
        f"\n{'precision':<9} {'model':<13} {'ms/step':>8} {'best ms':>8} {'tokens/s':>9} "
        f"{'util.':>6} {'matmul peak':>12}"
    )
    for precision, name, median, best, tps, util, peak in rows:
        print(
            f"{precision:<9} {name:<13} {median * 1e3:8.0f} {best * 1e3:8.0f} {tps:9.0f} "
            f"{util:6.1%} {peak / 1e9:8.0f} GFLOP/s"
        )
    print("(ms/step, tokens/s: median of the timed steps; util.: useful FLOP/s / matmul peak)\n")
    ratios = {}
    for precision in args.precision.split(","):
        by_name = {r[1]: r for r in rows if r[0] == precision}
        ratio = by_name["course_lib"][4] / by_name["transformers"][4]
        best_ratio = by_name["transformers"][3] / by_name["course_lib"][3]
        ratios[precision] = {"median_tokens_per_s": ratio, "best_steps": best_ratio}
        print(
            f"{precision}: course_lib is {ratio:.2f}x transformers "
            f"(median tokens/s; {best_ratio:.2f}x on the best steps)"
        )
    if "fp32" in args.precision and "bf16" in args.precision:
        fp32 = next(r for r in rows if r[:2] == ("fp32", "course_lib"))
        bf16 = next(r for r in rows if r[:2] == ("bf16", "course_lib"))
        ratios["course_lib bf16 / fp32"] = bf16[4] / fp32[4]
        print(f"course_lib bf16 autocast vs fp32: {bf16[4] / fp32[4]:.2f}x")
    config = {k: v for k, v in vars(args).items() if k != "out"}
    write_results(
        f"train_step_{args.layers}x{args.hidden}_seq{args.seq}_batch{args.batch}",
        {
            **header,
            "benchmark": "train_step",
            "config": config,
            "useful_gflop_per_step": flops / 1e9,
            "rows": [
                {
                    "precision": precision,
                    "model": name,
                    "median_ms": median * 1e3,
                    "best_ms": best * 1e3,
                    "tokens_per_s": tps,
                    "utilisation": util,
                    "matmul_peak_gflops": peak / 1e9,
                }
                for precision, name, median, best, tps, util, peak in rows
            ],
            "course_lib_over_transformers": ratios,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
