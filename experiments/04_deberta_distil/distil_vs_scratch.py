"""Distillation vs training from scratch, at equal steps: a half-depth student distilled from the
committed teacher (triple loss, teacher-initialised) against the same student architecture trained
with MLM alone from random weights, and against the teacher itself.

Measured per seed: held-out MLM loss/accuracy (the same masks for every model) and accuracy on a
downstream task after fine-tuning (which module's documentation a sentence comes from, 10 classes,
built offline from the corpus: see distil_common.topic_task). Then parameter counts (tiny and real sizes) and CPU inference
time (batch 1, as in the paper's Table 3).

    python experiments/04_deberta_distil/distil_vs_scratch.py           # committed results
    python experiments/04_deberta_distil/distil_vs_scratch.py --fast --out /tmp/x

Writes <out>/distil_vs_scratch.json and <out>/distil_vs_scratch.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from distil_common import (
    PAPER_TABLE1_GLUE,
    PAPER_TABLE3,
    RESULTS_DIR,
    TEACHER_DIR,
    build_data,
    finetune,
    inference_seconds,
    load_teacher,
    make_student,
    mean_std,
    mlm_eval,
    paired_comparison,
    pretrain_student,
    progress,
    run_header,
    seeds_for,
    topic_task,
    write_json,
)

from course_lib.config import BertConfig
from course_lib.counting import count_parameters
from course_lib.models.bert import BertModel
from course_lib.models.distilbert import DistilBertConfig, DistilBertModel
from course_lib.stats import RULE

MODELS = ("teacher", "distilled", "scratch", "copied")  # copied: the student at step 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="pretraining steps of each student")
    p.add_argument("--finetune-steps", type=int, default=100)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--teacher", type=Path, default=TEACHER_DIR, help="teacher checkpoint folder")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the outputs")
    p.add_argument(
        "--fast", action="store_true", help="a few steps, one seed: checks the script runs"
    )
    p.add_argument(
        "--plot-only", action="store_true", help="redraw <out>/distil_vs_scratch.png from its JSON"
    )
    p.add_argument(
        "--restat",
        action="store_true",
        help="recompute the comparisons in <out>/distil_vs_scratch.json from its runs",
    )
    return p.parse_args(argv)


def compare_models(runs: list[dict]) -> dict:
    """Distilled minus scratch, paired by seed (same seed: same data order, masks and
    fine-tuning head), judged by the course's one rule for "beyond seed noise"."""
    by_seed = {m: {} for m in MODELS}
    for r in runs:
        by_seed[r["model"]][r["seed"]] = r
    return {
        f"distilled - scratch: {key}": paired_comparison(
            {s: r[key] for s, r in by_seed["distilled"].items()},
            {s: r[key] for s, r in by_seed["scratch"].items()},
        )
        for key in ("eval_mlm_loss", "eval_mlm_accuracy", "task_accuracy")
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def parameter_counts(teacher_config: BertConfig, student_config: DistilBertConfig) -> dict:
    """Encoder parameters (no task head) of the tiny pair and of bert-base / distilbert-base."""

    def split(counts: dict) -> dict:
        return {"total": counts["total"], "embeddings": counts["embeddings"]}

    tiny = {
        "teacher": split(count_parameters(teacher_config, "BertModel")),
        "student": split(count_parameters(student_config, "DistilBertModel")),
    }
    real = {
        "bert-base": split(count_parameters(BertConfig.from_preset("bert-base"), "BertModel")),
        "distilbert-base": split(
            count_parameters(DistilBertConfig.from_preset("distilbert-base"), "DistilBertModel")
        ),
    }
    for pair, (big, small) in (
        ("tiny", ("teacher", "student")),
        ("real", ("bert-base", "distilbert-base")),
    ):
        counts = tiny if pair == "tiny" else real
        counts["ratio"] = counts[small]["total"] / counts[big]["total"]
        for name in (big, small):
            counts[name]["embedding_share"] = counts[name]["embeddings"] / counts[name]["total"]
    return {"tiny": tiny, "real": real}


def speed(teacher, student, fast: bool) -> dict:
    """CPU seconds per forward pass at batch 1 (fastest of several): the tiny pair (64 tokens)
    and the real sizes (random weights: speed does not depend on their values; 64 tokens)."""
    tiny = inference_seconds({"teacher": teacher, "student": student}, repeats=5 if fast else 100)
    out = {"tiny": {**tiny, "speedup": tiny["teacher"] / tiny["student"]}}
    torch.manual_seed(0)
    if fast:  # the real sizes take a minute on a shared CPU; a smaller stand-in checks the code
        big = BertModel(BertConfig.from_preset("bert-mini", vocab_size=1000))
        small = DistilBertModel(
            DistilBertConfig.from_preset(
                "distilbert-base",
                hidden_size=256,
                num_attention_heads=4,
                intermediate_size=1024,
                num_hidden_layers=2,
                vocab_size=1000,
            )
        )
        real = inference_seconds(
            {"bert-base": big, "distilbert-base": small}, repeats=2, vocab_size=1000
        )
    else:
        big = BertModel(BertConfig.from_preset("bert-base"))
        small = DistilBertModel(DistilBertConfig.from_preset("distilbert-base"))
        real = inference_seconds(
            {"bert-base": big, "distilbert-base": small}, repeats=15, vocab_size=30522
        )
    out["real"] = {**real, "speedup": real["bert-base"] / real["distilbert-base"]}
    return out


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.restat:
        path = args.out / "distil_vs_scratch.json"
        payload = json.loads(path.read_text())
        payload["comparisons"] = compare_models(payload["runs"])
        payload["noise_rule"] = RULE
        write_json(path, payload)
        print(f"recomputed the comparisons in {path.name} ({RULE})")
        return payload
    if args.plot_only:
        payload = json.loads((args.out / "distil_vs_scratch.json").read_text())
        figure = plot(payload)
        figure.savefig(args.out / "distil_vs_scratch.png", dpi=80, bbox_inches="tight")
        plt.close(figure)
        return payload
    torch.set_num_threads(args.threads)
    steps = 6 if args.fast else args.steps
    ft_steps = 4 if args.fast else args.finetune_steps
    header = run_header(args, "distil_vs_scratch.py", argv)
    start = time.perf_counter()
    teacher, tokenizer = load_teacher(args.teacher)
    data = build_data(tokenizer, max_documents=30 if args.fast else None)
    task = topic_task(data, 3, 12, 4) if args.fast else topic_task(data)
    if args.fast:
        data.validation = data.validation[:64]

    runs: list[dict] = []
    teacher_mlm = mlm_eval(teacher, data)
    students = {}
    for seed in seeds_for(args.fast, args.seeds):
        runs.append(
            {
                "model": "teacher",
                "seed": seed,
                **teacher_mlm,
                **finetune(teacher, task, ft_steps, seed),
            }
        )
        progress(f"seed {seed} teacher: {runs[-1]}")
        copied = make_student(teacher, "teacher", seed).eval()  # before any distillation step
        runs.append(
            {
                "model": "copied",
                "seed": seed,
                **mlm_eval(copied, data),
                **finetune(copied, task, ft_steps, seed),
            }
        )
        progress(f"seed {seed} copied: {runs[-1]}")
        for model, variant in (("distilled", "triple loss"), ("scratch", "scratch")):
            student, info = pretrain_student(teacher, data, variant, steps, seed)
            info.update(finetune(student, task, ft_steps, seed))
            runs.append({"model": model, **info})
            students[model] = student
            progress(
                f"seed {seed} {model}: " + str({k: v for k, v in info.items() if k != "history"})
            )

    summary: dict = {}
    for model in MODELS:
        rows = [r for r in runs if r["model"] == model]
        summary[model] = {
            key: mean_std([r[key] for r in rows])
            for key in ("eval_mlm_loss", "eval_mlm_accuracy", "task_accuracy")
        }
    comparisons = compare_models(runs)
    t_acc = summary["teacher"]["task_accuracy"]["mean"]
    d_acc = summary["distilled"]["task_accuracy"]["mean"]
    s_acc = summary["scratch"]["task_accuracy"]["mean"]
    chance = 1 / len(task["classes"])
    retained = {
        "distilled / teacher (task accuracy)": ratio(d_acc, t_acc),
        "distilled / teacher (accuracy above chance)": ratio(d_acc - chance, t_acc - chance),
        "scratch / teacher (accuracy above chance)": ratio(s_acc - chance, t_acc - chance),
        "paper: DistilBERT / BERT-base (GLUE macro-score)": PAPER_TABLE1_GLUE["DistilBERT"]
        / PAPER_TABLE1_GLUE["BERT-base"],
    }
    params = parameter_counts(teacher.config, students["distilled"].config)
    timing = speed(teacher, students["distilled"], args.fast)
    paper = {
        "parameter ratio (DistilBERT / BERT-base)": PAPER_TABLE3["DistilBERT"][0]
        / PAPER_TABLE3["BERT-base"][0],
        "speedup (BERT-base time / DistilBERT time)": PAPER_TABLE3["BERT-base"][1]
        / PAPER_TABLE3["DistilBERT"][1],
        "GLUE retained": retained["paper: DistilBERT / BERT-base (GLUE macro-score)"],
    }
    payload = {
        **header,
        "description": __doc__.split("\n\n")[0],
        "config": {
            "student_steps": steps,
            "finetune_steps": ft_steps,
            "seeds": seeds_for(args.fast, args.seeds),
            "teacher_config": teacher.config.to_dict(),
            "student_layers_from_teacher": students["distilled"].teacher_layers,
            "distillation": {
                "temperature": 2.0,
                "alpha_ce": 5.0,
                "alpha_mlm": 2.0,
                "alpha_cos": 1.0,
            },
            "task": {
                "name": "module topic (10-way)",
                "classes": task["classes"],
                "train": len(task["train"]),
                "test": len(task["test"]),
                "chance": chance,
            },
            "mlm_eval_examples": len(data.validation),
        },
        "runs": runs,
        "summary": summary,
        "comparisons": comparisons,
        "noise_rule": RULE,
        "retained": retained,
        "parameters": params,
        "inference_seconds": timing,
        "paper": paper,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    write_json(args.out / "distil_vs_scratch.json", payload)
    figure = plot(payload)
    figure.savefig(args.out / "distil_vs_scratch.png", dpi=80, bbox_inches="tight")
    plt.close(figure)
    return payload


def plot(payload: dict):
    """Held-out MLM accuracy curves of the students, and the final numbers with seed spread."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    colours = {
        "teacher": "#555555",
        "distilled": "#4c72b0",
        "scratch": "#dd8452",
        "copied": "#8fbc8f",
    }
    for run in payload["runs"]:
        if "history" not in run:
            continue
        xs = [r["step"] for r in run["history"] if "train_mlm_loss" in r]
        ys = [r["train_mlm_loss"] for r in run["history"] if "train_mlm_loss" in r]
        axes[0].plot(
            xs,
            ys,
            color=colours[run["model"]],
            alpha=0.7,
            label=run["model"] if run["seed"] == 0 else None,
        )
    axes[0].set(xlabel="step", ylabel="training MLM loss", title="students, one line per seed")
    axes[0].legend()
    for ax, key, label in (
        (axes[1], "eval_mlm_accuracy", "held-out MLM accuracy"),
        (axes[2], "task_accuracy", "topic task accuracy"),
    ):
        order = ("teacher", "copied", "distilled", "scratch")  # from the teacher down
        for i, model in enumerate(order):
            values = [r[key] for r in payload["runs"] if r["model"] == model]
            stats = payload["summary"][model][key]
            ax.bar(i, stats["mean"], yerr=stats["std"], color=colours[model], alpha=0.6, capsize=4)
            ax.scatter([i] * len(values), values, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(order)), order)
        ax.set_title(label + " (mean ± std, dots: seeds)")
        lows = [r[key] for r in payload["runs"]]
        ax.set_ylim(max(0.0, min(lows) - 0.05), min(1.0, max(lows) + 0.05))
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
