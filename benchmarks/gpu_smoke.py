"""GPU smoke test: train the tiny recipe briefly on CUDA with bf16 autocast; report tokens/s.

Checks the code paths a CPU machine never runs (CUDA device selection, autocast on CUDA, the
fp16 GradScaler when bf16 is missing, tensors moved to the GPU by the engine) and that the loss
goes down. Exit code 0 only if training ran on the GPU and the loss fell.

    python benchmarks/gpu_smoke.py                    # CUDA, precision auto (bf16 on Ampere+)
    python benchmarks/gpu_smoke.py --steps 300 --batch-size 128
    python benchmarks/gpu_smoke.py --device cpu --steps 5    # dry run of the script itself
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from course_lib.data import load_builtin_corpus
from course_lib.training import Trainer
from course_lib.training.recipes import get_recipe, prepare_run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default="auto")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--preset", default="tiny")
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "gpu_smoke: no CUDA device (torch.cuda.is_available() is False); run with "
            "--device cpu for a dry run of the script.",
            file=sys.stderr,
        )
        return 1

    recipe = get_recipe(args.preset)
    run = prepare_run(recipe, "bert", "mlm", load_builtin_corpus(progress=False))
    config = recipe.training_config(
        max_steps=args.steps,
        max_minutes=None,
        eval_every_minutes=None,
        eval_every=None,
        batch_size=args.batch_size,
        device=args.device,
        precision=args.precision,
        progress=False,
        log_every=10,
    )
    trainer = Trainer(run.model, run.train, run.collator, config, eval_dataset=run.held_out)
    first = trainer.evaluate()
    start = time.perf_counter()
    history = trainer.train()
    if trainer.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    speeds = [r["tokens_per_s"] for r in history if "tokens_per_s" in r][1:]  # skip warm-up
    last = history.last("eval_mlm_loss")
    name = torch.cuda.get_device_name(trainer.device) if trainer.device.type == "cuda" else "CPU"
    print(
        f"device {trainer.device} ({name}), precision {trainer.precision}, "
        f"grad scaler {'on' if trainer.scaler.is_enabled() else 'off'}"
    )
    print(
        f"{trainer.step} steps of {args.batch_size} x <= {recipe.max_length} tokens in {seconds:.1f} s; "
        f"median {sorted(speeds)[len(speeds) // 2] if speeds else 0:,.0f} tokens/s"
    )
    print(
        f"held-out MLM loss {first['eval_mlm_loss']:.3f} -> {last:.3f}, accuracy "
        f"{first['eval_mlm_accuracy']:.1%} -> {history.last('eval_mlm_accuracy'):.1%}"
    )
    if trainer.device.type == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated(trainer.device) / 2**20:.0f} MiB")
    ok = last < first["eval_mlm_loss"]
    print("OK" if ok else "FAILED: the held-out loss did not fall")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
