"""Does pretraining help fine-tuning? A pretrained tiny BERT vs the same encoder from random init.

BERT's central claim (Devlin et al. 2019): pretraining with masked-LM once, then fine-tuning
every task with a small head, beats training each task from scratch. Here, in miniature: the
course's tiny recipe is pretrained once on the built-in corpus (its 32-token sequences, then a
short second phase at 128 tokens so that the positions the tasks use are trained too, as BERT
went from 128 to 512 tokens for its last 10% of steps); then each
offline task (course_lib.data.tasks) is fine-tuned from that encoder and from a random encoder of
the same shape, with the same head initialisation, data, data order, steps, learning rate and
seeds. Tagging runs twice, with 100 and with 2,000 labelled sentences, to see how the gap depends
on the amount of labelled data. Scores are on held-out documents, unseen in pretraining and
fine-tuning.

    python experiments/01_bert/finetune_comparison.py           # full: results/finetune_comparison.*
    python experiments/01_bert/finetune_comparison.py --fast --out /tmp/x   # seconds
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from course_lib.data import build_pretraining_dataset, load_builtin_corpus
from course_lib.data.tasks import build_task
from course_lib.stats import RULE, compare
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.finetune import finetune, task_model
from course_lib.training.recipes import TINY, prepare_run

NAME = "finetune_comparison"
RESULTS = Path(__file__).parent / "results"
INITS = ("pretrained", "random")


@dataclass(frozen=True)
class Setting:
    """One fine-tuning comparison: a task, its labelled-data size and its step budget."""

    key: str
    task: str
    title: str
    train_size: int
    steps: int
    metrics: tuple[str, ...] = ("accuracy",)  # the first one is the headline score
    options: tuple[tuple[str, Any], ...] = ()


SETTINGS = (
    Setting("source", "source", "source: reference or library? (classification, 500)", 500, 150),
    Setting("word_class_100", "word_class", "word classes (tagging, 100 sentences)", 100, 150),
    Setting("word_class_2000", "word_class", "word classes (tagging, 2,000 sentences)", 2000, 150),
    Setting(
        "cloze_qa",
        "cloze_qa",
        "cloze QA (extractive, 8,000)",
        8000,
        300,
        ("exact_match", "f1"),
        (("context_sentences", 2),),
    ),
)
# The recipe the committed results were measured with: the course's CPU recipe as it was then,
# 4 x 128 (2 heads, FFN 512, init 0.05), 32-token sequences. The default has since become
# 2 x 192 (training/recipes.py, benchmarks/README.md); these sizes stay so that a rerun
# reproduces the committed results and notebook 06's live run matches them.
RECIPE = TINY.replace(
    model={
        **TINY.model,
        "hidden_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "intermediate_size": 512,
        "initializer_range": 0.05,
    },
    description="4 layers x 128 hidden, 32-token sequences, pre-LN, no dropout, lr 2e-3",
)
# Phase 2: the tasks' inputs are up to 128 tokens long, so positions 32..127 need training too.
# Same tokens per step (16 x 128 = 64 x 32), half the peak learning rate, fresh warmup.
LONG_LENGTH, LONG_BATCH, LONG_LR = 128, 16, 1e-3
PAPER = {
    "source": "Devlin et al. 2019, BERT: fine-tuning a pretrained encoder (GLUE, SQuAD); "
    "training the same architecture from scratch on each task is far worse "
    "(e.g. Peters et al. 2018; Hao et al. 2019 measured ~10-30 points on GLUE "
    "tasks for BERT-base trained from random init)",
    "conclusion": "pretraining helps most where the task data are small and the task needs "
    "knowledge of the language (syntax, word meaning) that the labels alone do "
    "not teach",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="seconds: a smoke test, not results")
    p.add_argument("--seeds", type=int, default=None, help="fine-tuning seeds (default 3)")
    p.add_argument("--pretrain-steps", type=int, default=None, help="at 32 tokens (default 3000)")
    p.add_argument("--long-steps", type=int, default=None, help="then at 128 tokens (default 400)")
    p.add_argument("--finetune-steps", type=int, default=None, help="default: per setting")
    p.add_argument("--lr", type=float, default=1e-3, help="fine-tuning peak learning rate")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--restat",
        action="store_true",
        help="only recompute the summary of <out>/finetune_comparison.json from its "
        "per-seed runs (no training)",
    )
    return p.parse_args(argv)


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def pretrain(
    run: Any, steps: int, long_steps: int, precision: str, fast: bool = False
) -> tuple[torch.nn.Module, list]:
    """Pretrain the recipe's model for `steps` at its length, then `long_steps` at 128 tokens
    (equal steps, not minutes: reproducible). History rows carry the phase's sequence length.
    `fast` (a smoke test) keeps the long phase as small as the short one."""
    config = RECIPE.training_config(
        max_minutes=None,
        max_steps=steps,
        eval_every_minutes=None,
        eval_every=max(1, steps // 5),
        precision=precision,
        progress=False,
        seed=0,
    )
    trainer = Trainer(run.model, run.train, run.collator, config, eval_dataset=run.held_out)
    history = [{**r, "max_length": RECIPE.max_length} for r in trainer.train()]
    if long_steps:
        train, held_out = (
            build_pretraining_dataset(docs, run.tokenizer, "mlm", LONG_LENGTH, 0)
            for docs in (run.corpus.train, run.corpus.validation)
        )
        if fast:
            train, held_out = train[: len(run.train)], held_out[: len(run.held_out)]
        config = RECIPE.training_config(
            max_minutes=None,
            max_steps=long_steps,
            eval_every_minutes=None,
            eval_every=max(1, long_steps // 2),
            precision=precision,
            progress=False,
            seed=1,
            batch_size=LONG_BATCH,
            lr=LONG_LR,
            warmup=0.1,
        )
        trainer = Trainer(run.model, train, run.collator, config, eval_dataset=held_out)
        history += [
            {**r, "step": r["step"] + steps, "max_length": LONG_LENGTH} for r in trainer.train()
        ]
    return run.model, history


def finetune_one(
    setting: Setting,
    task: Any,
    init: str,
    pretrained: Any,
    seed: int,
    steps: int,
    lr: float,
    precision: str,
) -> dict[str, Any]:
    """One fine-tuning run; the random arm gets the same config, head seed, data and steps."""
    source = pretrained if init == "pretrained" else pretrained.config
    # The recipe pretrains without dropout; fine-tuning on a few thousand examples uses BERT's
    # 0.1 in both arms.
    model = task_model(
        task.kind,
        source,
        num_labels=task.num_labels,
        seed=seed,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    config = TrainingConfig(
        max_steps=steps,
        batch_size=32,
        lr=lr,
        warmup=0.1,
        schedule="linear",
        seed=seed,
        log_every=max(1, steps // 10),
        precision=precision,
        progress=False,
    )
    start = time.perf_counter()
    result = finetune(model, task, config, eval_every=max(1, steps // 5))
    curve = [
        {k: v for k, v in r.items() if k == "step" or k.startswith("eval_")}
        for r in result.history
        if any(k.startswith("eval_") for k in r)
    ]
    return {
        "setting": setting.key,
        "task": task.name,
        "init": init,
        "seed": seed,
        **{k.removeprefix("eval_"): v for k, v in result.metrics.items()},
        "curve": curve,
        "seconds": time.perf_counter() - start,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± std over seeds per setting and init, and the gap pretrained - random paired by seed
    (same seed: same head initialisation, data order and dropout), judged by the course's one
    rule for "beyond seed noise" (course_lib.stats). `separated`: every pretrained seed beats
    every random one (a fact about the runs, not the verdict)."""
    summary: dict[str, Any] = {}
    for setting in SETTINGS:
        summary[setting.key] = {}
        for metric in setting.metrics:
            arms = {
                init: {
                    r["seed"]: r[metric]
                    for r in runs
                    if r["setting"] == setting.key and r["init"] == init
                }
                for init in INITS
            }
            if not all(arms.values()):
                continue
            (pm, ps), (rm, rs) = (mean_std(list(arms[i].values())) for i in INITS)
            gap = compare(arms["pretrained"], arms["random"])
            summary[setting.key][metric] = {
                "pretrained_mean": pm,
                "pretrained_std": ps,
                "random_mean": rm,
                "random_std": rs,
                "gap_mean": gap["mean"],
                "gap_std": gap["std"],
                "gap_t": gap["t"],
                "gap_p": gap["p"],
                "gap_agree": gap["agree"],
                "beyond_noise": gap["beyond_noise"],
                "verdict": gap["verdict"],
                "separated": min(arms["pretrained"].values()) > max(arms["random"].values()),
            }
    return summary


def plot(payload: dict[str, Any], path: Path) -> None:
    """Per setting: bars (mean ± std, seeds as dots) of the headline score, and held-out curves."""
    from course_lib.viz import CourseFigure

    runs, settings = payload["runs"], payload["settings"]
    fig = CourseFigure(figsize=(4 * len(settings), 6.6), layout="constrained")
    axes = fig.subplots(2, len(settings), squeeze=False)
    colours = {"pretrained": "#4c72b0", "random": "#dd8452"}
    for col, setting in enumerate(settings):
        key, metric = setting["key"], setting["metrics"][0]
        label = f"held-out {metric.replace('_', ' ')}"
        mine = [r for r in runs if r["setting"] == key]
        ax = axes[0, col]
        for i, init in enumerate(INITS):
            values = [r[metric] for r in mine if r["init"] == init]
            if not values:
                continue
            m, s = mean_std(values)
            ax.bar(i, m, yerr=s, color=colours[init], capsize=6, alpha=0.85)
            ax.scatter([i] * len(values), values, color="black", s=12, zorder=3)
            ax.text(i, m / 2, f"{m:.3f}\n± {s:.3f}", ha="center", color="white", fontsize=9)
        baseline = payload["baselines"].get(key)
        if baseline is not None:
            ax.axhline(
                baseline,
                color="grey",
                linestyle="--",
                linewidth=1,
                label=f"majority class {baseline:.2f}",
            )
            ax.legend(fontsize=8, loc="lower right")
        ax.set_xticks(range(len(INITS)), INITS)
        ax.set_title(setting["title"], fontsize=9)
        ax.set_ylabel(label)
        ax = axes[1, col]
        for init in INITS:
            curves = [r["curve"] for r in mine if r["init"] == init]
            if not curves:
                continue
            steps = [c["step"] for c in curves[0]]
            values = [[c[f"eval_{metric}"] for c in curve] for curve in curves]
            for v in values:
                ax.plot(steps, v, color=colours[init], alpha=0.25, linewidth=1)
            mean = [statistics.fmean(v) for v in zip(*values)]
            ax.plot(steps, mean, color=colours[init], marker="o", markersize=3, label=init)
        ax.set_xlabel("fine-tuning step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        "Pretrained vs random-init encoder: same head, data, steps and seeds "
        f"({len(payload['config']['seeds'])} seeds; held-out documents)"
    )
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.restat:
        path = args.out / f"{NAME}.json"
        payload = json.loads(path.read_text())
        payload["summary"] = summarize(payload["runs"])
        payload["noise_rule"] = RULE
        path.write_text(json.dumps(payload, indent=1))
        print(f"recomputed the summary of {path} ({RULE})")
        return payload
    torch.set_num_threads(args.threads)
    fast = args.fast
    seeds = list(range(args.seeds or (2 if fast else 3)))
    # 3000 steps: what the tiny recipe makes in its 5 minutes on 2 free CPU threads.
    pretrain_steps = args.pretrain_steps or (8 if fast else 3000)
    long_steps = args.long_steps if args.long_steps is not None else (4 if fast else 400)
    test_size = 16 if fast else 500
    start = time.perf_counter()

    corpus = load_builtin_corpus(progress=False)
    run = prepare_run(RECIPE, "bert", "mlm", corpus, seed=0)
    if fast:
        run.train, run.held_out = run.train[:256], run.held_out[:32]
    print(f"{corpus.summary()}\n{RECIPE.description}; {run.model.num_parameters():,} parameters")
    tasks, steps = {}, {}
    for setting in SETTINGS:
        size = min(setting.train_size, 32) if fast else setting.train_size
        tasks[setting.key] = build_task(
            setting.task,
            corpus,
            run.tokenizer,
            train_size=size,
            test_size=test_size,
            seed=0,
            **dict(setting.options),
        )
        steps[setting.key] = args.finetune_steps or (2 if fast else setting.steps)
        print(f"  {setting.key:16s} {tasks[setting.key].summary()}, {steps[setting.key]} steps")

    t = time.perf_counter()
    pretrained, history = pretrain(run, pretrain_steps, long_steps, args.precision, fast)
    pretrain_seconds = time.perf_counter() - t
    for length in dict.fromkeys(r["max_length"] for r in history):
        final = [r for r in history if r["max_length"] == length and "eval_mlm_loss" in r][-1]
        print(
            f"pretrained to step {final['step']} at {length} tokens: held-out MLM loss "
            f"{final['eval_mlm_loss']:.3f}, masked-token accuracy "
            f"{final['eval_mlm_accuracy']:.1%}"
        )
    print(f"pretraining took {pretrain_seconds:.0f}s")

    runs = []
    for setting in SETTINGS:
        for seed in seeds:
            for init in INITS:
                r = finetune_one(
                    setting,
                    tasks[setting.key],
                    init,
                    pretrained,
                    seed,
                    steps[setting.key],
                    args.lr,
                    args.precision,
                )
                runs.append(r)
                scores = ", ".join(f"{m} {r[m]:.3f}" for m in setting.metrics)
                print(
                    f"  {setting.key:16s} {init:10s} seed {seed}: {scores} ({r['seconds']:.0f}s)",
                    flush=True,
                )

    summary = summarize(runs)
    payload = {
        "name": NAME,
        "question": "Does MLM pretraining beat random initialisation at equal fine-tuning budget?",
        "config": {
            "recipe": RECIPE.name,
            "model": RECIPE.model,
            "vocab_size": run.tokenizer.vocab_size,
            "max_length": RECIPE.max_length,
            "pretrain_steps": pretrain_steps,
            "long_steps": long_steps,
            "long_max_length": LONG_LENGTH,
            "long_batch_size": LONG_BATCH,
            "long_lr": LONG_LR,
            "pretrain_batch_size": RECIPE.training["batch_size"],
            "pretrain_lr": RECIPE.training["lr"],
            "finetune_batch_size": 32,
            "finetune_lr": args.lr,
            "finetune_warmup": 0.1,
            "finetune_dropout": 0.1,
            "seeds": seeds,
            "precision": args.precision,
            "threads": args.threads,
            "parameters": run.model.num_parameters(),
        },
        "settings": [
            {
                "key": s.key,
                "task": s.task,
                "title": s.title,
                "metrics": list(s.metrics),
                "options": dict(s.options),
                "steps": steps[s.key],
                "kind": tasks[s.key].kind,
                "train": len(tasks[s.key].train),
                "test": len(tasks[s.key].test),
                "description": tasks[s.key].description,
            }
            for s in SETTINGS
        ],
        "corpus": corpus.summary(),
        "pretraining": {
            "seconds": pretrain_seconds,
            "eval": [
                {k: r[k] for k in ("step", "max_length", "eval_mlm_loss", "eval_mlm_accuracy")}
                for r in history
                if "eval_mlm_loss" in r
            ],
            "uniform_loss": math.log(run.tokenizer.vocab_size),
        },
        "baselines": {
            key: task.majority_baseline() for key, task in tasks.items() if task.kind != "qa"
        },
        "runs": runs,
        "summary": summary,
        "noise_rule": RULE,
        "paper": PAPER,
        "command": "python "
        + " ".join(
            shlex.quote(a)
            for a in [
                "experiments/01_bert/finetune_comparison.py",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        ),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0],
        "seconds": time.perf_counter() - start,
        "fast": fast,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.json").write_text(json.dumps(payload, indent=1))
    plot(payload, args.out / f"{NAME}.png")
    print("\nheld-out score, mean ± std over seeds (pretrained vs random init):")
    for key, metrics in summary.items():
        for metric, s in metrics.items():
            print(
                f"  {key:16s} {metric:12s} {s['pretrained_mean']:.3f} ± {s['pretrained_std']:.3f}"
                f"  vs  {s['random_mean']:.3f} ± {s['random_std']:.3f}   gap "
                f"{s['gap_mean']:+.3f} ± {s['gap_std']:.3f}  ({s['verdict'].split(':')[0]})"
            )
    print(f"wrote {args.out / NAME}.json and .png in {payload['seconds']:.0f}s")
    return payload


if __name__ == "__main__":
    main()
