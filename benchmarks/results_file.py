"""Where a benchmark number comes from: the machine, software, threads, date and command, written
beside every row into benchmarks/results/<name>.json (the README tables cite these files)."""

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
