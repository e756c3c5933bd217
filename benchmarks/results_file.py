"""Where a benchmark number comes from: the machine, software, threads, date and command, written
beside every row into benchmarks/results/<name>.json (the README tables cite these files).

    python benchmarks/results_file.py benchmarks/results/*.json   # the README's tables, regenerated
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux; platform.processor() elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(threads: int) -> dict[str, Any]:
    """Machine, software and time of a measurement (the load average too: timings depend on it)."""
    from course_lib.training.device import cpu_supports_bf16

    try:
        import transformers

        transformers_version = transformers.__version__
    except ImportError:  # pragma: no cover - transformers is a dependency
        transformers_version = None
    return {
        "command": " ".join(
            ["python", f"benchmarks/{Path(sys.argv[0]).name}", *map(shlex.quote, sys.argv[1:])]
        ),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_name(),
            "architecture": platform.machine(),
            "cpu_count": os.cpu_count(),
            "cpu_native_bf16": cpu_supports_bf16(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "load_average_at_start": round(os.getloadavg()[0], 2),
        },
        "threads": threads,
        "torch": torch.__version__,
        "transformers": transformers_version,
        "python": platform.python_version(),
    }


def write_results(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    """<out>/<name>.json (default benchmarks/results/), with the load average at the end added;
    says where it wrote (an existing file of that name is replaced: results are regenerated)."""
    out = RESULTS_DIR if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    payload = {**payload}
    payload.setdefault("machine", {})["load_average_at_end"] = round(os.getloadavg()[0], 2)
    path = out / f"{name}.json"
    replaced = path.exists()
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    print(f"{'replaced' if replaced else 'wrote'} {path}")
    return path


def slug(text: str) -> str:
    """A file-name-safe version of a run's name ('tiny+lr=2e-3' -> 'tiny+lr=2e-3')."""
    keep = "".join(c if c.isalnum() or c in "+=.,-_" else "_" for c in text)
    return keep[:120]


def markdown(payload: dict[str, Any]) -> str:
    """The README table of one results file (train_step or accuracy_curve)."""
    m = payload["machine"]
    head = (
        f"`{payload['command']}` — {payload['date'][:10]}, {m['cpu']}, {payload['threads']} "
        f"threads, native bf16: {m['cpu_native_bf16']}, torch {payload['torch']}, load average "
        f"{m['load_average_at_start']} → {m['load_average_at_end']}"
    )
    if payload.get("benchmark") == "train_step":
        lines = [
            "| precision | model | ms/step (median) | best ms | tokens/s | utilisation of matmul peak |",
            "|---|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['precision']} | {r['model']} | {r['median_ms']:,.0f} | {r['best_ms']:,.0f} | "
            f"{r['tokens_per_s']:,.0f} | {r['utilisation']:.1%} of {r['matmul_peak_gflops']:.0f} GFLOP/s |"
            for r in payload["rows"]
        ]
        ratios = "; ".join(
            f"{k}: {v['median_tokens_per_s']:.2f}x (best steps {v['best_steps']:.2f}x)"
            for k, v in payload["course_lib_over_transformers"].items()
            if isinstance(v, dict)
        )
        return "\n".join([head, "", *lines, "", f"course_lib / transformers tokens/s: {ratios}"])
    lines = [
        "| minutes | step | held-out MLM loss | masked-token accuracy |",
        "|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['minutes']:.1f} | {r['step']:,} | {r['eval_mlm_loss']:.3f} | {r['eval_mlm_accuracy']:.1%} |"
        for r in payload["rows"]
    ]
    b, f = payload["baselines"], payload["fill_mask"]
    tail = (
        f"baselines: most-frequent token {b['most_frequent_token_accuracy']:.1%}, unigram loss "
        f"{b['unigram_loss']:.2f} nats; fill-mask: {f['hits']} of {f['of']} held-out sentences"
    )
    return "\n".join([head, "", *lines, "", tail])


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"### {Path(name).name}\n\n{markdown(json.loads(Path(name).read_text()))}\n")
