"""ModernBERT's two speed levers against sequence length: local attention and unpadding.

One small ModernBERT encoder, four ways, at a fixed number of token slots per batch (batch x
length), so a flat line means "cost per token does not grow with length":

    global          every layer attends to all tokens (global_attn_every_n_layers=1)
    alternating     the released pattern: every 3rd layer global, the others |i - j| <= 64
    each of them    padded (every slot computed) and unpadded (only the real tokens)

The batch has real lengths spread evenly from a quarter of the slots to all of them (62.5%
real tokens at every length), the same for all four. Forward passes only (inference, no
grad), interleaved variant by variant; the median of the timed repeats is reported.

    python benchmarks/long_context.py                       # 2 threads, lengths 128 .. 4096
    python benchmarks/long_context.py --lengths 128,512 --repeats 2

Writes benchmarks/results/long_context/long_context_<device>.json (machine, threads, load
average, torch version, command, every row and the ratios); a GPU is used when present.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from course_lib.config import ModernBertConfig
from course_lib.models import ModernBertModel
from course_lib.training.device import select_device

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS_DIR, provenance, write_results  # noqa: E402

VARIANTS = {  # name: (global_attn_every_n_layers, unpad)
    "global, padded": (1, False),
    "global, unpadded": (1, True),
    "alternating, padded": (3, False),
    "alternating, unpadded": (3, True),
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="128,256,512,1024,2048,4096")
    p.add_argument(
        "--slots", type=int, default=4096, help="batch x length, the same at every length"
    )
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=192, help="GeGLU intermediate size (1.5 x hidden)")
    p.add_argument("--window", type=int, default=128, help="local_attention (released: 128)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "long_context")
    return p.parse_args()


def batch_for(length: int, slots: int, vocab: int, device: torch.device) -> dict[str, torch.Tensor]:
    """max(1, slots // length) rows; real lengths evenly from length/4 to length (one row: 5/8 of
    the length), so 62.5% of the slots are real tokens at every length."""
    rows = max(1, slots // length)
    if rows > 1:
        real = torch.linspace(length / 4, length, rows).round().long()
    else:
        real = torch.tensor([round(0.625 * length)])
    ids = torch.randint(5, vocab, (rows, length), generator=torch.Generator().manual_seed(length))
    mask = (torch.arange(length)[None, :] < real[:, None]).long()
    return dict(input_ids=(ids * mask).to(device), attention_mask=mask.to(device))


def timed(model: torch.nn.Module, batch: dict[str, torch.Tensor], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        model(**batch)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    lengths = [int(x) for x in args.lengths.split(",")]
    models = {}
    for name, (every, unpad) in VARIANTS.items():
        torch.manual_seed(0)
        config = ModernBertConfig(
            vocab_size=1000,
            hidden_size=args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
            intermediate_size=args.ffn,
            pad_token_id=0,
            max_position_embeddings=max(lengths),
            local_attention=args.window,
            global_attn_every_n_layers=every,
            unpad=unpad,
        )
        models[name] = ModernBertModel(config).to(device).eval()
    info = provenance(args.threads)
    rows = []
    for length in lengths:
        batch = batch_for(length, args.slots, 1000, device)
        real = int(batch["attention_mask"].sum())
        times: dict[str, list[float]] = {name: [] for name in models}
        for model in models.values():
            timed(model, batch, device)  # warm-up
        for _ in range(args.repeats):  # interleaved: background load hits every variant alike
            for name, model in models.items():
                times[name].append(timed(model, batch, device))
        for name, ts in times.items():
            ms = 1000 * statistics.median(ts)
            rows.append(
                dict(
                    variant=name,
                    length=length,
                    batch=batch["input_ids"].shape[0],
                    real_tokens=real,
                    median_ms=round(ms, 2),
                    best_ms=round(1000 * min(ts), 2),
                    us_per_real_token=round(1000 * ms / real, 3),
                )
            )
            print(f"{length:5d} {name:24s} {ms:9.1f} ms  {1000 * ms / real:7.2f} us/token")
    by = {(r["variant"], r["length"]): r["median_ms"] for r in rows}
    ratios = {
        str(n): {
            "global_over_alternating (padded)": round(
                by["global, padded", n] / by["alternating, padded", n], 3
            ),
            "padded_over_unpadded (alternating)": round(
                by["alternating, padded", n] / by["alternating, unpadded", n], 3
            ),
            "global_padded_over_alternating_unpadded": round(
                by["global, padded", n] / by["alternating, unpadded", n], 3
            ),
        }
        for n in lengths
    }
    for n, r in ratios.items():
        print(n, r)
    payload = {
        "benchmark": "long_context",
        **info,
        "device": str(device),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "rows": rows,
        "ratios": ratios,
    }
    write_results(f"long_context_{device.type}", payload, args.out)


if __name__ == "__main__":
    main()
