"""Run mechanism labs for N seeds and write experiments/labs/results/<lab>.json (+ <lab>.png).

    python experiments/labs/run.py bidirectional_context          # one lab, 5 seeds
    python experiments/labs/run.py 03_albert --seeds 7            # every lab of a chapter
    python experiments/labs/run.py all --preset fast --out /tmp/x # a smoke run
    python experiments/labs/run.py --list
    python experiments/labs/run.py --summary                  # the committed results as a table

The preset defaults to "gpu" on a CUDA device and "full" elsewhere; a GPU is used when present.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_lib.labs import (
    CHAPTERS,
    LABS,
    PRESETS,
    describe,
    labs_of,
    load_result,
    run_lab,
    save_result,
    summarize,
)

RESULTS = Path(__file__).resolve().parent / "results"


def select(names: list[str]) -> list[str]:
    """Lab names from the command line: a lab, a chapter (e.g. 03_albert) or 'all'."""
    chosen: list[str] = []
    for name in names:
        if name == "all":
            chosen += list(LABS)
        elif name in CHAPTERS:
            chosen += [lab.name for lab in labs_of(name)]
        elif name in LABS:
            chosen.append(name)
        else:
            raise SystemExit(
                f"error: no lab or chapter called {name!r}; "
                f"run with --list to see the {len(LABS)} labs."
            )
    return list(dict.fromkeys(chosen))


def summary_table(directory: Path = RESULTS) -> str:
    """The committed results as a Markdown table: lab, compared arms, mean difference ± std,
    paired t, seeds agreeing with the expected sign, whether it shows its effect, seconds."""
    rows = [
        "| chapter | lab | compared (a − b) | a − b, mean ± std | t | sign agrees | shows | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(directory.glob("*.json"), key=lambda p: (load_result(p)["chapter"], p.stem)):
        r = load_result(path)
        s = summarize(r)
        t = s["t_signed"]
        rows.append(
            f"| {r['chapter']} | {r['lab']} | {r['compare'][0]} − {r['compare'][1]} "
            f"| {s['mean']:+.3f} ± {s['std']:.3f} | {t:+.1f} | {s['agree']}/{s['n']} "
            f"| {'yes' if s['shows_effect'] else 'no'} | {r['seconds']:.0f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="*", help="lab names, chapter names, or 'all'")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument(
        "--preset", choices=PRESETS, help="budget (default: gpu on CUDA, else full)"
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or mps")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON and PNG")
    parser.add_argument("--list", action="store_true", help="list the labs and exit")
    parser.add_argument("--summary", action="store_true", help="table of the saved results")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary_table(args.out))
        return 0
    if args.list or not args.labs:
        for lab in LABS.values():
            print(f"{lab.chapter:18s} {lab.name:28s} {' vs '.join(lab.arms)}")
        return 0
    if args.seeds < 1:
        raise SystemExit("error: --seeds must be at least 1.")
    for name in select(args.labs):
        print(f"{name}:", flush=True)
        result = run_lab(name, seeds=args.seeds, preset=args.preset, device=args.device)
        path = save_result(result, args.out)
        print(f"  {describe(result)}\n  {result['seconds']:.0f} s -> {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
