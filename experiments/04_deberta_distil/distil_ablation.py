"""DistilBERT's ablation (Sanh et al. 2019, Table 4) at mini scale: the full triple loss with a
teacher-initialised student, against dropping L_ce, dropping L_cos, dropping L_mlm, and a randomly
initialised student with the full loss. Equal steps, several seeds.

The paper reports the change of the GLUE macro-score; here the downstream score is the accuracy
on the offline 10-way topic task (see distil_common.topic_task) after fine-tuning, with the
held-out MLM loss/accuracy beside it. Deltas are paired by seed (a variant and the full model see
the same batches and masks for a given seed), reported as mean ± std over seeds.

    python experiments/04_deberta_distil/distil_ablation.py            # committed results
    python experiments/04_deberta_distil/distil_ablation.py --fast --out /tmp/x

Writes <out>/distil_ablation.json and <out>/distil_ablation.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from distil_common import (
    PAPER_TABLE4,
    RESULTS_DIR,
    TEACHER_DIR,
    VARIANTS,
    build_data,
    finetune,
    load_teacher,
    mean_std,
    paired_comparison,
    pretrain_student,
    progress,
    run_header,
    seeds_for,
    topic_task,
    write_json,
)

from course_lib.stats import RULE

ABLATIONS = (
    "triple loss",
    "no L_ce",
    "no L_cos",
    "no L_mlm",
    "random init",
    "L_ce all tokens",
    "teacher init, MLM only",
)
METRICS = ("task_accuracy", "eval_mlm_accuracy", "eval_mlm_loss")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="distillation steps of each student")
    p.add_argument("--finetune-steps", type=int, default=100)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--teacher", type=Path, default=TEACHER_DIR, help="teacher checkpoint folder")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the outputs")
    p.add_argument(
        "--fast", action="store_true", help="a few steps, one seed: checks the script runs"
    )
    p.add_argument(
        "--variants",
        nargs="+",
        choices=ABLATIONS,
        default=list(ABLATIONS),
        help="train only these variants (with --merge: keep the others' runs from <out>)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="merge the new runs into <out>/distil_ablation.json (runs are paired by seed)",
    )
    p.add_argument(
        "--plot-only", action="store_true", help="redraw <out>/distil_ablation.png from its JSON"
    )
    p.add_argument(
        "--restat",
        action="store_true",
        help="recompute the paired deltas in <out>/distil_ablation.json from its runs",
    )
    return p.parse_args(argv)


def paired_deltas(runs: list[dict], metric: str) -> dict[str, dict]:
    """Per ablation: variant minus the full model, seed by seed, judged by the course's one rule
    for "beyond seed noise" (course_lib.stats: paired t-test p < 0.05 and the sign in every seed
    but at most one); mean ± std, t, p and the seeds agreeing in sign."""
    full = {r["seed"]: r[metric] for r in runs if r["variant"] == "triple loss"}
    out = {}
    for variant in ABLATIONS[1:]:
        mine = {r["seed"]: r[metric] for r in runs if r["variant"] == variant}
        out[variant] = paired_comparison(mine, full)
    return out


def restat(out_dir: Path) -> dict:
    """Recompute the paired deltas of the saved JSON from its per-seed runs (no training)."""
    path = out_dir / "distil_ablation.json"
    payload = json.loads(path.read_text())
    payload["paired_deltas"] = {m: paired_deltas(payload["runs"], m) for m in METRICS}
    payload["noise_rule"] = RULE
    write_json(path, payload)
    print(f"recomputed the paired deltas in {path.name} ({RULE})")
    return payload


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.restat:
        return restat(args.out)
    if args.plot_only:
        payload = json.loads((args.out / "distil_ablation.json").read_text())
        figure = plot(payload)
        figure.savefig(args.out / "distil_ablation.png", dpi=80, bbox_inches="tight")
        plt.close(figure)
        return payload
    if args.merge and not (args.out / "distil_ablation.json").is_file():
        raise SystemExit(
            f"{args.out / 'distil_ablation.json'}: nothing to merge into; run every variant "
            "once without --merge."
        )
    if not args.merge and set(args.variants) != set(ABLATIONS):
        raise SystemExit(
            "every variant is compared with the triple loss: run them all, or add --merge to "
            "keep the saved runs of the others."
        )
    torch.set_num_threads(args.threads)
    steps = 6 if args.fast else args.steps
    ft_steps = 4 if args.fast else args.finetune_steps
    header = run_header(args, "distil_ablation.py", argv)
    start = time.perf_counter()
    teacher, tokenizer = load_teacher(args.teacher)
    data = build_data(tokenizer, max_documents=30 if args.fast else None)
    task = topic_task(data, 3, 12, 4) if args.fast else topic_task(data)
    if args.fast:
        data.validation = data.validation[:64]

    runs: list[dict] = []
    for seed in seeds_for(args.fast, args.seeds):
        for variant in args.variants:
            student, info = pretrain_student(teacher, data, variant, steps, seed)
            info.update(finetune(student, task, ft_steps, seed))
            runs.append(info)
            progress(
                f"seed {seed} {variant}: " + str({k: v for k, v in info.items() if k != "history"})
            )

    reproduced = None
    if args.merge:
        runs, reproduced = merge_runs(args.out / "distil_ablation.json", runs)
    missing = [v for v in ABLATIONS if not any(r["variant"] == v for r in runs)]
    if missing:
        raise SystemExit(
            f"no runs of {', '.join(missing)} in {args.out / 'distil_ablation.json'}: run every "
            "variant once without --merge."
        )
    summary = {
        variant: {m: mean_std([r[m] for r in runs if r["variant"] == variant]) for m in METRICS}
        for variant in ABLATIONS
    }
    deltas = {m: paired_deltas(runs, m) for m in METRICS}
    payload = {
        **header,
        "description": __doc__.split("\n\n")[0],
        "config": {
            "student_steps": steps,
            "finetune_steps": ft_steps,
            "seeds": seeds_for(args.fast, args.seeds),
            "variants": {v: VARIANTS[v] for v in ABLATIONS},
            "temperature": 2.0,
            "teacher_config": teacher.config.to_dict(),
            "task": {
                "name": "module topic (10-way)",
                "classes": task["classes"],
                "train": len(task["train"]),
                "test": len(task["test"]),
            },
            "mlm_eval_examples": len(data.validation),
        },
        "runs": runs,
        "summary": summary,
        "paired_deltas": deltas,
        "noise_rule": RULE,
        "paper_table4_glue_points": PAPER_TABLE4,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    if reproduced is not None:
        payload["reproduced"] = reproduced
    write_json(args.out / "distil_ablation.json", payload)
    figure = plot(payload)
    figure.savefig(args.out / "distil_ablation.png", dpi=80, bbox_inches="tight")
    plt.close(figure)
    return payload


def merge_runs(path: Path, new_runs: list[dict]) -> tuple[list[dict], dict[str, float]]:
    """The saved runs with the new ones in place of any saved run of the same (variant, seed);
    for every replaced run, how far the rerun landed from the saved one (max |difference| over
    METRICS: 0.0 means the saved run reproduced exactly)."""
    if not path.is_file():
        raise SystemExit(f"{path}: nothing to merge into; run every variant first.")
    saved = json.loads(path.read_text())["runs"]
    fresh = {(r["variant"], r["seed"]): r for r in new_runs}
    reproduced = {}
    for r in saved:
        key = (r["variant"], r["seed"])
        if key in fresh:
            gap = max(abs(r[m] - fresh[key][m]) for m in METRICS)
            reproduced[f"{key[0]} seed {key[1]}"] = gap
    kept = [r for r in saved if (r["variant"], r["seed"]) not in fresh]
    return kept + new_runs, reproduced


def plot(payload: dict):
    """Paired deltas against the full model (points = seeds), beside the paper's Table 4."""
    names = list(payload["paired_deltas"]["task_accuracy"])  # every variant but the full model
    paper = payload["paper_table4_glue_points"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].barh(names, [paper.get(n, 0.0) for n in names], color="#888888")
    for i, n in enumerate(names):
        if n not in paper:
            axes[0].text(0.05, i, "not in Table 4", va="center", fontsize=8, color="0.4")
    axes[0].set(title="paper: Δ GLUE macro-score (points)", xlabel="points")
    for ax, metric, scale, label in (
        (axes[1], "task_accuracy", 100, "here: Δ topic-task accuracy (points)"),
        (axes[2], "eval_mlm_loss", 1, "here: Δ held-out MLM loss (nats; > 0 is worse)"),
    ):
        d = payload["paired_deltas"][metric]
        means = [d[n]["mean"] * scale for n in names]
        stds = [(d[n]["std"] or 0.0) * scale for n in names]
        ax.barh(names, means, xerr=stds, color="#4c72b0", alpha=0.6, capsize=4)
        for i, n in enumerate(names):
            ax.scatter(
                [v * scale for v in d[n]["per_seed"]],
                [i] * len(d[n]["per_seed"]),
                color="black",
                s=10,
                zorder=3,
            )
        ax.axvline(0, color="black", lw=0.8)
        ax.set(title=label, xlabel="mean ± std over seeds; dots: seeds")
        if metric == "eval_mlm_loss":  # random init dwarfs the rest: a log scale beyond ±0.001
            ax.set_xscale("symlog", linthresh=1e-3)
    for ax in axes:
        ax.invert_yaxis()
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
