"""Run mechanism labs for N seeds and write experiments/labs/results/<lab>.json (+ <lab>.png).

    python experiments/labs/run.py bidirectional_context          # one lab, fresh seeds 1000-1009
    python experiments/labs/run.py 03_albert --first-seed 2000 --out fresh_seeds  # other fresh seeds
    python experiments/labs/run.py sop_vs_nsp --first-seed 0 --out design  # the design seeds 0-9
    python experiments/labs/run.py all --preset fast --out /tmp/x # a smoke run
    python experiments/labs/run.py --list
    python experiments/labs/run.py --summary                  # the committed results as a table

The preset defaults to "gpu" on a CUDA device and "full" elsewhere; a GPU is used when present.
Seeds: labs are designed on seeds below 1000 only; a committed result is 10 fresh seeds,
1000-1009 (the defaults), that played no part in any lab's design (`seed_role` "fresh" in the
JSON; a run on seeds below 1000 is marked "design"). --first-seed N runs N..N+k-1 (k = --seeds).
--design-from DIR keeps the design-seed run saved in DIR/<lab>.json inside the new result, under
"design", reported apart. A run whose seeds differ from a saved result's is never written over
it silently: give another --out, or --overwrite to replace the file on purpose. Every verdict
printed is the course's one rule (course_lib.stats.RULE_NAME).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_lib.labs import (
    CHAPTERS,
    DESIGN_SEED_LIMIT,
    FRESH_SEEDS,
    LABS,
    PRESETS,
    describe,
    design_part,
    labs_of,
    load_result,
    run_lab,
    save_result,
    summarize,
)
from course_lib.stats import RULE_NAME, format_p

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
    """The saved results as a Markdown table: lab, compared arms, seeds, mean difference ± std,
    paired t and p, seeds agreeing with the expected sign, the verdict of the course's one rule
    (named under the table), seconds."""
    rows = [
        "| chapter | lab | compared (a − b) | seeds | a − b, mean ± std | t | p | sign agrees "
        "| shows | seconds | design seeds: a − b, t, shows |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(directory.glob("*.json"), key=lambda p: (load_result(p)["chapter"], p.stem)):
        r = load_result(path)
        s = summarize(r)
        t = s["t_signed"]
        p = "—" if s["p"] is None else format_p(s["p"]).lstrip("= ")
        shows = "not judged" if not s["judged"] else ("yes" if s["shows_effect"] else "no")
        rows.append(
            f"| {r['chapter']} | {r['lab']} | {r['compare'][0]} − {r['compare'][1]} "
            f"| {seed_span(r.get('seed_values', list(range(r['seeds']))))} "
            f"| {s['mean']:+.3f} ± {s['std']:.3f} | {t:+.1f} | {p} | {s['agree']}/{s['n']} "
            f"| {shows} | {r['seconds']:.0f} | {design_cell(r)} |"
        )
    return "\n".join(rows) + f"\n\n'shows': {RULE_NAME}."


def design_cell(result: dict) -> str:
    """'0–9: +0.412, t +29.7, yes' for the design seeds kept in a result; '—' when none are."""
    design = design_part(result)
    if not design:
        return "—"
    s = summarize(design)
    shows = "not judged" if not s["judged"] else ("yes" if s["shows_effect"] else "no")
    return f"{seed_span(design['seed_values'])}: {s['mean']:+.3f}, t {s['t_signed']:+.1f}, {shows}"


def attach_design(result: dict, design_dir: Path) -> dict:
    """`result` with the design-seed run saved in design_dir/<lab>.json under "design"; refused
    (SystemExit) when that run used a seed at or above the design limit."""
    saved = load_result(design_dir / f"{result['lab']}.json")
    seeds = saved.get("seed_values", list(range(saved["seeds"])))
    if any(seed >= DESIGN_SEED_LIMIT for seed in seeds):
        raise SystemExit(
            f"error: {design_dir / (result['lab'] + '.json')} holds seeds {seed_span(seeds)}; "
            f"design seeds are below {DESIGN_SEED_LIMIT}."
        )
    design = {k: saved[k] for k in ("arms", "preset", "seconds") if k in saved}
    return {**result, "design": {"seed_values": seeds, **design}}


def seed_span(seeds: list[int]) -> str:
    """'0–4' for consecutive seeds, else the seeds listed: how a table says which seeds ran."""
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def check_not_overwriting(names: list[str], seeds: list[int], out: Path, overwrite: bool) -> None:
    """Refuse, before any training, to replace a saved <lab>.json made on other seeds (e.g. the
    committed seeds 0-4 by a --first-seed 100 run) unless --overwrite says so: a fresh-seed
    check must not silently become the committed result."""
    for name in names:
        path = out / f"{name}.json"
        if overwrite or not path.is_file():
            continue
        saved = load_result(path)
        before = saved.get("seed_values", list(range(saved["seeds"])))
        if before != seeds:
            raise SystemExit(
                f"error: {path} holds seeds {seed_span(before)}; this run is seeds "
                f"{seed_span(seeds)}. Give another --out (e.g. --out /tmp/fresh_seeds), or "
                "--overwrite to replace it on purpose."
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="*", help="lab names, chapter names, or 'all'")
    parser.add_argument(
        "--seeds",
        type=int,
        default=len(FRESH_SEEDS),
        help=f"how many seeds (default {len(FRESH_SEEDS)}): FIRST..FIRST+N-1",
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        default=FRESH_SEEDS[0],
        help=f"first seed (default {FRESH_SEEDS[0]}: the committed runs, seeds no lab was designed "
        f"on); seeds below {DESIGN_SEED_LIMIT} are design seeds",
    )
    parser.add_argument(
        "--design-from",
        type=Path,
        help="folder whose <lab>.json (a run on design seeds) is kept in the result, reported apart",
    )
    parser.add_argument(
        "--preset", choices=PRESETS, help="budget (default: gpu on CUDA, else full)"
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or mps")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON and PNG")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace saved results made on other seeds (otherwise refused)",
    )
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
    if args.first_seed < 0:
        raise SystemExit("error: --first-seed must be 0 or more.")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    names = select(args.labs)
    check_not_overwriting(names, seeds, args.out, args.overwrite)
    if args.design_from:  # before any training: a missing design run is found now, not at the end
        for name in names:
            try:
                load_result(args.design_from / f"{name}.json")
            except (FileNotFoundError, ValueError) as error:
                raise SystemExit(f"error: {error}") from None
    for name in names:
        print(f"{name}: seeds {seed_span(seeds)}", flush=True)
        result = run_lab(name, seeds=seeds, preset=args.preset, device=args.device)
        if args.design_from:
            result = attach_design(result, args.design_from)
        path = save_result(result, args.out)
        print(f"  {describe(result)}\n  {result['seconds']:.0f} s -> {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
