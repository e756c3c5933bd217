"""Draw held-out masked-token accuracy against minutes for several accuracy_curve results files.

    python benchmarks/plot_accuracy_curves.py benchmarks/results/issue21/*.json \
        --out benchmarks/results/issue21/accuracy_vs_minutes.png

One line per file (its recipe name, budget and final value in the legend; drawn by
course_lib.viz.compare_runs); a dashed
line marks a target accuracy (--target, default 0.45). Reads only the JSON the runs wrote, so
the figure can be redrawn without training.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from course_lib.viz import compare_runs


def label(result: dict) -> str:
    """Recipe name, budget and training share of the corpus, e.g. 'tiny, 30 min'."""
    budget = result["budget"]
    spent = f"{budget['steps']} steps" if budget.get("steps") else f"{budget['minutes']:g} min"
    text = f"{result['recipe']['name']}, {spent}"
    fraction = result.get("corpus", {}).get("fraction", 1.0)
    return text if fraction == 1.0 else f"{text}, {fraction:.0%} of the corpus"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--target", type=float, default=0.45)
    args = p.parse_args()
    runs = {}
    for path in args.files:
        result = json.loads(path.read_text())
        runs[label(result)] = result["rows"]  # each row: minutes, step, eval_mlm_accuracy, ...
    fig = compare_runs(runs, "eval_mlm_accuracy", x="minutes")  # the course's run comparison
    ax = fig.axes[0]
    ax.axhline(args.target, color="grey", linestyle="--", linewidth=1)
    ax.text(0.3, args.target + 0.005, f"target {args.target:.0%}", color="grey", fontsize=8)
    ax.set_xlabel("minutes of training (wall clock, evaluations included)")
    ax.set_ylabel("held-out masked-token accuracy")
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
