"""DeBERTa's ablation (He et al. 2021, Table 4) in miniature: full vs -C2P vs -P2C vs -EMD.

The paper pretrained base-size models on Wikipedia + BookCorpus and removed one piece at a time:
the enhanced mask decoder (-EMD), the content-to-position term (-C2P), the position-to-content
term (-P2C). Here the same tiny DebertaForMaskedLM is pretrained with masked-LM on the course's
built-in corpus (Unigram tokenizer, as DeBERTa v3) for the SAME number of optimizer steps in every
arm, with several seeds, and scored on held-out validation documents (MLM loss and masked-token
accuracy, the same fixed masks for every run). Two extra arms put the differences in scale:

- paper-p2c: the full model with the p2c term indexed as the paper's equation 4 writes it,
  delta(j, i), instead of the released code's delta(i, j) (see notebook 02);
- no-positions: no relative terms and no EMD, a bag of words (how much do positions matter at all?);
- absolute: the real comparator, BERT's way of seeing positions: no relative terms and no EMD, but
  a learned absolute position embedding added to the token embedding at the input
  (DebertaConfig(relative_attention=False, position_biased_input=True), as in transformers).

Every run is scored on the held-out set every 50 steps (one mask draw), so the curves show, run
by run, when the model discovers how to use positions.

    python experiments/04_deberta_distil/deberta_ablation.py                 # full: results/
    python experiments/04_deberta_distil/deberta_ablation.py --fast --out /tmp/x   # seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from course_lib import DebertaConfig, DebertaForMaskedLM
from course_lib.data import (
    Corpus,
    PretrainingCollator,
    build_pretraining_dataset,
    load_builtin_corpus,
)
from course_lib.stats import RULE, compare
from course_lib.tokenization import CourseTokenizer, train_tokenizer
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.device import select_device
from course_lib.training.engine import evaluate_pretraining

NAME = "deberta_ablation"
HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
# Config overrides of each arm, relative to the full model (c2p + p2c + EMD).
ARMS: dict[str, dict[str, Any]] = {
    "full": {},
    "-EMD": {"use_emd": False},
    "-C2P": {"pos_att_type": ["p2c"]},
    "-P2C": {"pos_att_type": ["c2p"]},
    "paper-p2c": {"paper_p2c": True},
    "no-positions": {
        "pos_att_type": [],
        "relative_attention": False,
        "norm_rel_ebd": "none",
        "use_emd": False,
    },
    "absolute": {
        "pos_att_type": [],
        "relative_attention": False,
        "norm_rel_ebd": "none",
        "use_emd": False,
        "position_biased_input": True,
    },
}
TABLE4_ARMS = ("full", "-EMD", "-C2P", "-P2C")
LABELS = {
    "full": "DeBERTa (full)",
    "-EMD": "-EMD",
    "-C2P": "-C2P",
    "-P2C": "-P2C",
    "paper-p2c": "p2c as in the paper",
    "no-positions": "no positions",
    "absolute": "absolute positions (BERT)",
}
# Paired comparisons beyond "arm - full": what BERT's absolute positions are worth over none, and
# absolute vs relative positions with nothing else different (neither has EMD).
EXTRA_COMPARISONS = (("no-positions", "absolute"), ("absolute", "-EMD"))  # (arm, reference)
EVAL_EVERY = 50  # held-out curve: one score every this many optimizer steps
DISCOVERY_MARGIN = 0.1  # nats below the bag-of-words track: a run "has found the positions"
PAPER = {
    "source": "He et al. 2021, DeBERTa, Table 4 (base models pretrained on Wikipedia + "
    "BookCorpus; dev-set results)",
    "metric": "MNLI-m accuracy",
    "MNLI-m": {"full": 86.3, "-EMD": 86.1, "-C2P": 85.9, "-P2C": 86.0},
    "conclusion": "removing any one component lowers every task; the MNLI-m differences are "
    "0.2-0.4 points",
}
EVAL_MASK_SEEDS = (1234, 1235, 1236, 1237)  # the same held-out masks for every run


# ----- model ----------------------------------------------------------------------------------


@dataclass
class TinyDeberta:
    """Every arm's size. The relative table has 2 x position_buckets rows: distances up to 16
    exact, 17..63 in log buckets (DeBERTa v3: 256 buckets over 512 positions, same ratio)."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 256
    position_buckets: int = 32
    emd_steps: int = 2
    hidden_dropout_prob: float = 0.0  # under one epoch: nothing to regularise
    attention_probs_dropout_prob: float = 0.0

    def config(self, tokenizer: CourseTokenizer, max_length: int, arm: str) -> DebertaConfig:
        """The DebertaConfig of one arm for this tokenizer and sequence length."""
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; choose from {list(ARMS)}.")
        base = dict(
            asdict(self),
            vocab_size=tokenizer.vocab_size,
            pad_token_id=tokenizer.pad_token_id,
            max_position_embeddings=max_length,
            max_relative_positions=max_length,
            use_emd=True,
        )
        return DebertaConfig(**{**base, **ARMS[arm]})


def build_model(config: DebertaConfig, seed: int) -> DebertaForMaskedLM:
    """A freshly initialised model; the seed fixes the initial weights."""
    torch.manual_seed(seed)
    return DebertaForMaskedLM(config)


# ----- data -----------------------------------------------------------------------------------


@dataclass
class Data:
    tokenizer: CourseTokenizer
    train: list[dict[str, Any]]
    eval_examples: list[dict[str, Any]]
    max_length: int
    info: dict[str, Any] = field(default_factory=dict)


def build_data(
    max_length: int = 64,
    vocab_size: int = 4000,
    max_documents: int | None = None,
    max_eval_examples: int = 256,
) -> Data:
    """Built-in corpus -> cased Unigram tokenizer (DeBERTa v3's family) -> packed MLM examples.

    Training examples pack whole sentences up to max_length (RoBERTa's FULL-SENTENCES, which
    DeBERTa followed); held-out examples are validation documents packed without crossing a
    document boundary.
    """
    corpus = load_builtin_corpus(progress=False)
    if max_documents is not None:  # fast mode: fewer documents, same pipeline
        corpus = Corpus(
            corpus.train[:max_documents],
            corpus.validation,
            name=corpus.name + f"[:{max_documents}]",
            build_info=corpus.build_info,
        )
    tokenizer = train_tokenizer(
        "deberta", corpus.texts("train"), vocab_size=vocab_size, lowercase=False
    )
    train = list(build_pretraining_dataset(corpus.train, tokenizer, "mlm", max_length))
    held_out = build_pretraining_dataset(
        corpus.validation, tokenizer, "mlm", max_length, format="doc-sentences"
    )
    eval_examples = list(held_out)[:max_eval_examples]
    info = {
        "corpus": corpus.name,
        "corpus_hash": corpus.content_hash,
        "train_documents": len(corpus.train),
        "validation_documents": len(corpus.validation),
        "tokenizer": f"Unigram, cased, vocab {tokenizer.vocab_size}",
        "max_length": max_length,
        "train_examples": len(train),
        "eval_examples": len(eval_examples),
        "eval_tokens": sum(len(e["input_ids"]) for e in eval_examples),
    }
    return Data(tokenizer, train, eval_examples, max_length, info)


# ----- one run --------------------------------------------------------------------------------


def evaluate(
    model: torch.nn.Module, data: Data, mask_seeds: Sequence[int] = EVAL_MASK_SEEDS
) -> dict[str, float]:
    """Held-out MLM loss and accuracy, averaged over several fixed mask draws (less noise than
    one draw: each draw masks only ~15% of the held-out tokens)."""
    collate = PretrainingCollator(data.tokenizer)  # standard 15%, 80/10/10
    scores = [evaluate_pretraining(model, data.eval_examples, collate, seed=s) for s in mask_seeds]
    return {
        k: statistics.fmean(s[k] for s in scores) for k in ("eval_mlm_loss", "eval_mlm_accuracy")
    }


def train_model(
    arm: str,
    seed: int,
    data: Data,
    steps: int,
    model: TinyDeberta | None = None,
    batch_size: int = 16,
    lr: float = 2e-3,
    callbacks: Sequence[Any] = (),
    progress: bool = False,
) -> tuple[DebertaForMaskedLM, Any]:
    """Pretrain one arm with MLM for `steps` optimizer steps; `seed` fixes the initial weights,
    the data order and the masks. Returns (model, training history)."""
    config = (model or TinyDeberta()).config(data.tokenizer, data.max_length, arm)
    net = build_model(config, seed)
    training = TrainingConfig(
        objective="mlm",
        batch_size=batch_size,
        lr=lr,
        max_steps=steps,
        warmup=0.06,
        schedule="linear",
        seed=seed,
        log_every=max(1, steps // 25),
        device="auto",
        precision="fp32",
        progress=progress,
    )
    trainer = Trainer(
        net, data.train, PretrainingCollator(data.tokenizer), training, callbacks=list(callbacks)
    )
    return net, trainer.train()


def run_one(
    arm: str,
    seed: int,
    data: Data,
    steps: int,
    model: TinyDeberta | None = None,
    batch_size: int = 16,
    lr: float = 2e-3,
    eval_every: int = EVAL_EVERY,
) -> dict[str, Any]:
    """One run of the ablation: train, then score on the held-out set; returns its final
    scores, a held-out curve (one mask draw, every `eval_every` steps) and the training curve.
    The curve's evaluations draw their masks from their own generator: they do not change the
    training run."""
    torch.set_num_threads(1)  # the same numbers whatever the number of worker processes
    every = max(1, eval_every)
    curve: list[dict[str, Any]] = []

    def score(trainer: Trainer, record: dict[str, Any]) -> None:
        if trainer.step % every == 0 and trainer.step < steps:  # one mask draw: a cheap curve
            curve.append(
                {"step": trainer.step, **evaluate(trainer.model, data, EVAL_MASK_SEEDS[:1])}
            )

    start, cpu_start = time.perf_counter(), time.process_time()
    net, history = train_model(arm, seed, data, steps, model, batch_size, lr, [score])
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    final = evaluate(net, data)
    curve.append({"step": steps, **evaluate(net, data, EVAL_MASK_SEEDS[:1])})
    return {
        "arm": arm,
        "seed": seed,
        **final,
        "final_train_loss": history.last("train_loss"),
        "parameters": sum(p.numel() for p in net.parameters()),
        "steps": steps,
        "wall_s": round(wall, 1),
        "train_cpu_s": round(cpu, 1),  # CPU time of training + the curve's held-out scores
        "curve": curve,
        "train_curve": [
            {"step": r["step"], "train_loss": r["train_loss"]} for r in history if "train_loss" in r
        ],
    }


def run_all(
    jobs: Sequence[tuple[str, int]], data: Data, steps: int, workers: int = 1, **kwargs: Any
) -> list[dict[str, Any]]:
    """Every (arm, seed) job, sequentially or on forked processes (data built once before)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(jobs), desc="runs", unit="run", file=sys.stderr)
    results: list[dict[str, Any]] = []
    if workers <= 1 or len(jobs) == 1:
        for arm, seed in jobs:
            results.append(run_one(arm, seed, data, steps, **kwargs))
            bar.update()
    else:
        global _JOB
        _JOB = (data, steps, kwargs)
        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            for result in pool.imap(_run_job, jobs):
                results.append(result)
                bar.update()
    bar.close()
    return results


_JOB: tuple[Data, int, dict[str, Any]] | None = None


def _run_job(job: tuple[str, int]) -> dict[str, Any]:
    assert _JOB is not None
    data, steps, kwargs = _JOB
    return run_one(job[0], job[1], data, steps, **kwargs)


# ----- statistics -----------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (n - 1) and n."""
    values = [float(v) for v in values]
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def summarize(results: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """{arm: {metric: mean/std/n over seeds}} in the order of ARMS."""
    arms = [a for a in ARMS if any(r["arm"] == a for r in results)]
    return {
        a: {m: mean_std([r[m] for r in results if r["arm"] == a]) for m in metrics} for a in arms
    }


def paired_comparison(
    results: Sequence[dict[str, Any]], arm: str, metric: str, reference: str = "full"
) -> dict[str, Any]:
    """arm - reference per seed (same seed: same initial weights of the shared parameters and
    same data order and masks), judged by the course's one rule (course_lib.stats: paired
    t-test p < 0.05 and the sign of the mean in every seed but at most one)."""
    ref = {r["seed"]: r[metric] for r in results if r["arm"] == reference}
    pairs = [(r[metric], ref[r["seed"]]) for r in results if r["arm"] == arm and r["seed"] in ref]
    if not pairs:
        return {
            "arm": arm,
            "reference": reference,
            "metric": metric,
            "diff": {"mean": float("nan"), "std": float("nan"), "n": 0},
            "t": None,
            "p": None,
            "beyond_noise": False,
            "exceeds_seed_noise": False,
            "same_sign_all_seeds": False,
        }
    c = compare([x for x, _ in pairs], [y for _, y in pairs])
    diffs = c["per_seed"]
    return {
        "arm": arm,
        "reference": reference,
        "metric": metric,
        "diff": {"mean": c["mean"], "std": c["std"], "n": c["n"]},
        "per_seed": diffs,
        "t": c["t"],
        "df": c["df"],
        "p": c["p"],
        "agree": c["agree"],
        "beyond_noise": c["beyond_noise"],
        "verdict": c["verdict"],
        "exceeds_seed_noise": c["beyond_noise"],  # the name older readers use
        "same_sign_all_seeds": all(d > 0 for d in diffs) or all(d < 0 for d in diffs),
    }


# ----- output ---------------------------------------------------------------------------------


def arm_colour(arm: str) -> str:
    """One colour per arm, the same in every panel and every figure."""
    return f"C{list(ARMS).index(arm) % 10}"


CURVE_PANELS = {
    "Table 4's arms": ("full", "-EMD", "-C2P", "-P2C"),
    "comparators": ("full", "absolute", "no-positions", "paper-p2c"),
}


def plot(results: Sequence[dict[str, Any]], title: str) -> Any:
    """Held-out MLM loss and accuracy per arm (small dots = seeds, large dot and bar = mean ±
    std; no truncated bars), and the held-out loss curves: one thin line per run (seed), one
    colour per arm, Table 4's arms on one panel and the comparators on the other."""
    from matplotlib.figure import Figure

    arms = [a for a in ARMS if any(r["arm"] == a for r in results)]
    fig = Figure(figsize=(13, 7.6), layout="constrained")
    axes = fig.subplots(2, 2)
    for ax, metric, label in (
        (axes[0, 0], "eval_mlm_loss", "held-out MLM loss (lower is better)"),
        (axes[0, 1], "eval_mlm_accuracy", "masked-token accuracy"),
    ):
        for i, arm in enumerate(arms):
            values = [r[metric] for r in results if r["arm"] == arm]
            stats = mean_std(values)
            ax.errorbar(
                i,
                stats["mean"],
                yerr=stats["std"],
                fmt="o",
                color=arm_colour(arm),
                markersize=8,
                capsize=5,
                elinewidth=2,
            )
            ax.scatter([i + 0.18] * len(values), values, color=arm_colour(arm), s=14, alpha=0.7)
        ax.set_xlim(-0.5, len(arms) - 0.3)
        ax.set_xticks(
            range(len(arms)), [LABELS[a] for a in arms], rotation=25, fontsize=8, ha="right"
        )
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    every = curve_every(results)
    for ax, (panel, group) in zip(axes[1], CURVE_PANELS.items()):
        for arm in (a for a in group if a in arms):
            for k, run in enumerate(r for r in results if r["arm"] == arm):
                ax.plot(
                    [row["step"] for row in run["curve"]],
                    [row["eval_mlm_loss"] for row in run["curve"]],
                    color=arm_colour(arm),
                    lw=1.0,
                    alpha=0.85,
                    label=LABELS[arm] if k == 0 else None,
                )
        ax.set_xlabel("optimizer step")
        ax.set_title(f"{panel}: one line per seed", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[1, 0].set_ylabel(
        "held-out MLM loss (one mask draw"
        + (f", every {every} step{'s' if every > 1 else ''})" if every else ")")
    )
    axes[1, 1].sharey(axes[1, 0])
    fig.suptitle(title)
    return fig


def curve_every(results: Sequence[dict[str, Any]]) -> int | None:
    """The step between two held-out evaluations of the curves (None with fewer than 2)."""
    steps = [row["step"] for row in results[0]["curve"]] if results else []
    return steps[1] - steps[0] if len(steps) > 1 else None


def discovery_steps(
    results: Sequence[dict[str, Any]], margin: float = DISCOVERY_MARGIN
) -> dict[str, Any]:
    """When does each run discover positions? The first evaluated step from which its held-out
    loss stays at least `margin` nats below the bag-of-words track (the no-positions arm's mean
    curve, same mask draw) until the end; None if it never does. Needs the no-positions arm."""
    bag = [r for r in results if r["arm"] == "no-positions"]
    if not bag:
        return {}
    track = {
        step: statistics.fmean(
            row["eval_mlm_loss"] for r in bag for row in r["curve"] if row["step"] == step
        )
        for step in {row["step"] for row in bag[0]["curve"]}
    }
    runs = []
    for r in results:
        if r["arm"] == "no-positions":
            continue
        found = None
        for row in reversed(r["curve"]):
            if row["step"] not in track or row["eval_mlm_loss"] > track[row["step"]] - margin:
                break
            found = row["step"]
        runs.append({"arm": r["arm"], "seed": r["seed"], "step": found})
    return {
        "definition": f"first evaluated step from which the run's held-out loss (one mask draw) "
        f"stays at least {margin} nats below the no-positions arm's mean curve to the end; "
        "null = not by the last step",
        "margin": margin,
        "runs": runs,
    }


def plot_title(payload: dict[str, Any]) -> str:
    training = payload["config"]["training"]
    return (
        f"DeBERTa ablation in miniature: {training['steps']} steps x batch "
        f"{training['batch_size']} x {payload['config']['data']['max_length']} tokens, "
        f"{len(payload['config']['seeds'])} seeds"
    )


def describe(summary: dict[str, Any]) -> str:
    """One line per arm: held-out loss and accuracy, mean ± std over seeds."""
    return "\n".join(
        f"{arm:>13s}: loss {s['eval_mlm_loss']['mean']:.4f} ± {s['eval_mlm_loss']['std']:.4f}"
        f"  accuracy {s['eval_mlm_accuracy']['mean']:.2%} ± {s['eval_mlm_accuracy']['std']:.2%}"
        f"  (n={s['eval_mlm_loss']['n']})"
        for arm, s in summary.items()
    )


def command_line(argv: Sequence[str]) -> str:
    """How to reproduce the run, from the repository root; an absolute (temporary) --out
    folder is left out so that no local path ends up in the results."""
    shown: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--out" and i + 1 < len(argv) and os.path.isabs(argv[i + 1]):
            skip = True
        elif not (arg.startswith("--out=") and os.path.isabs(arg[len("--out=") :])):
            shown.append(arg)
    return " ".join(["python", f"experiments/04_deberta_distil/{NAME}.py", *shown])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--fast",
        action="store_true",
        help="a tiny version in seconds (smoke test / live demo), not the results",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=RESULTS_DIR,
        help="folder for deberta_ablation.json/.png (default: results/ beside this)",
    )
    p.add_argument("--seeds", type=int, default=None, help="seeds per arm (default 3; fast 2)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run")
    p.add_argument(
        "--arms", default=None, help=f"comma-separated subset of {','.join(ARMS)} (default: all)"
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"held-out curve: steps between evaluations (default {EVAL_EVERY}; fast 1)",
    )
    p.add_argument(
        "--replot",
        action="store_true",
        help="only redraw deberta_ablation.png from the JSON already in --out",
    )
    p.add_argument(
        "--restat",
        action="store_true",
        help="only recompute the comparisons in the JSON already in --out from its "
        "per-seed numbers (no training)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel processes, 1 thread each (default: 2; fast mode 1)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.replot:
        payload = json.loads((args.out / f"{NAME}.json").read_text(encoding="utf-8"))
        plot(payload["runs"], plot_title(payload)).savefig(args.out / f"{NAME}.png", dpi=110)
        print(f"redrew {NAME}.png from {NAME}.json")
        return payload
    if args.restat:
        path = args.out / f"{NAME}.json"
        payload = json.loads(path.read_text(encoding="utf-8"))
        payload["comparisons"] = [
            paired_comparison(payload["runs"], c["arm"], c["metric"], c["reference"])
            for c in payload["comparisons"]
        ]
        present = {r["arm"] for r in payload["runs"]}
        listed = {(c["arm"], c["reference"], c["metric"]) for c in payload["comparisons"]}
        payload["comparisons"] += [  # extra comparisons added since the run
            paired_comparison(payload["runs"], arm, m, reference)
            for arm, reference in EXTRA_COMPARISONS
            if {arm, reference} <= present
            for m in ("eval_mlm_loss", "eval_mlm_accuracy")
            if (arm, reference, m) not in listed
        ]
        payload["discovery"] = discovery_steps(payload["runs"])
        payload["noise_rule"] = RULE
        path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        print(f"recomputed the comparisons in {path.name} ({RULE})")
        return payload
    arms = list(ARMS) if args.arms is None else [a.strip() for a in args.arms.split(",")]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}; choose from {list(ARMS)}")
    seeds = args.seeds or (2 if args.fast else 3)
    steps = args.steps or (3 if args.fast else 1000)
    batch_size, lr, max_length = 16, 2e-3, 64
    size = TinyDeberta()

    start = time.perf_counter()
    data = build_data(
        max_length,
        max_documents=25 if args.fast else None,
        max_eval_examples=16 if args.fast else 256,
    )
    jobs = [(arm, seed) for seed in range(seeds) for arm in arms]
    workers = args.workers or (1 if args.fast else 2)
    eval_every = args.eval_every or (1 if args.fast else EVAL_EVERY)
    results = run_all(
        jobs, data, steps, workers, batch_size=batch_size, lr=lr, eval_every=eval_every
    )
    metrics = ("eval_mlm_loss", "eval_mlm_accuracy", "final_train_loss")
    summary = summarize(results, metrics)
    comparisons = [
        paired_comparison(results, arm, m)
        for arm in arms
        if arm != "full" and "full" in arms
        for m in ("eval_mlm_loss", "eval_mlm_accuracy")
    ] + [
        paired_comparison(results, arm, m, reference)
        for arm, reference in EXTRA_COMPARISONS
        if arm in arms and reference in arms
        for m in ("eval_mlm_loss", "eval_mlm_accuracy")
    ]
    configs = {arm: size.config(data.tokenizer, max_length, arm) for arm in arms}
    payload = {
        "experiment": NAME,
        "question": "Which of DeBERTa's parts (c2p, p2c, EMD) matter for masked-LM pretraining, "
        "and how does the full model compare with BERT's absolute positions, "
        "at equal steps, in miniature?",
        "mode": "fast" if args.fast else "full",
        "command": command_line(argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "threads_per_run": 1,
        "config": {
            "model": {
                "class": "DebertaForMaskedLM",
                **asdict(size),
                "max_position_embeddings": max_length,
                "max_relative_positions": max_length,
            },
            "arms": {
                arm: {
                    "label": LABELS[arm],
                    "overrides": ARMS[arm],
                    "pos_att_type": configs[arm].pos_att_type,
                    "use_emd": configs[arm].use_emd,
                    "paper_p2c": configs[arm].paper_p2c,
                    "relative_attention": configs[arm].relative_attention,
                    "position_biased_input": configs[arm].position_biased_input,
                }
                for arm in arms
            },
            "training": {
                "objective": "mlm (15%, 80/10/10, dynamic masks)",
                "steps": steps,
                "batch_size": batch_size,
                "lr": lr,
                "schedule": "linear, 6% warmup",
                "optimizer": "AdamW (0.9, 0.98), weight decay 0.01",
                "precision": "fp32",
                "device": str(select_device("auto")),
                "workers": workers,
            },
            "evaluation": {
                "mask_seeds": list(EVAL_MASK_SEEDS),
                "curve_every": eval_every,
                "note": "final scores average the same 4 fixed mask draws over the "
                f"held-out examples; curves use the first draw, every {eval_every} steps",
            },
            "data": data.info,
            "seeds": list(range(seeds)),
        },
        "runs": results,
        "summary": summary,
        "comparisons": comparisons,
        "discovery": discovery_steps(results),
        "noise_rule": RULE,
        "paper": PAPER,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{NAME}.json"
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    plot(results, plot_title(payload)).savefig(args.out / f"{NAME}.png", dpi=110)
    print(describe(summary))
    print(f"wrote {path.name} and {NAME}.png in {payload['wall_s']:.0f} s")
    return payload


if __name__ == "__main__":
    main()
