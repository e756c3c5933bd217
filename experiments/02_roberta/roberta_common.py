"""Shared machinery of chapter 02's mini-ablations: data, tiny models, runs, statistics, output.

Every experiment script (dynamic_masking.py, input_formats.py, batch_size.py) builds its data
once, defines a list of runs (arm x seed), trains each with course_lib's Trainer at EQUAL STEPS
(step counts, not minutes: the machine is shared, so only step-based results are reproducible),
evaluates every model on the same held-out examples with the same fixed masks, and writes
`results/<name>.json` (config, per-seed numbers, summary, paired comparisons, command, date,
versions) and `results/<name>.png`.

Runs are independent, so they can go to a few worker processes (`--workers`); each worker uses
one thread, which makes the numbers identical whatever the number of workers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from course_lib.data import (
    Corpus,
    PretrainingCollator,
    load_builtin_corpus,
    make_format_examples,
)
from course_lib.models.bert import BertForPreTraining
from course_lib.models.roberta import RobertaConfig, RobertaForMaskedLM, RobertaLMHead, RobertaModel
from course_lib.stats import RULE, compare
from course_lib.tokenization import train_tokenizer
from course_lib.tokenization.tokenizer import CourseTokenizer
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.engine import evaluate_pretraining

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
EVAL_SEED = 1234  # one fixed set of held-out masks for every run of every experiment


# ----- models ----------------------------------------------------------------------------------


@dataclass
class TinyModel:
    """The size of every model in the chapter's ablations (the paper used BERT-base)."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 256

    def config(self, tokenizer: CourseTokenizer, max_length: int, **extra: Any) -> RobertaConfig:
        """RobertaConfig for this size, the tokenizer's vocabulary and `max_length` tokens."""
        return RobertaConfig(
            vocab_size=tokenizer.vocab_size,
            pad_token_id=tokenizer.pad_token_id,
            max_position_embeddings=max_length + tokenizer.pad_token_id + 1,  # fairseq offset
            **asdict(self),
            **extra,
        )


class RobertaForPreTrainingWithNSP(BertForPreTraining):
    """RoBERTa's backbone and MLM head plus BERT's NSP head on the pooled <s> vector.

    RoBERTa itself has no such model (it dropped NSP); the format ablation needs one so that
    the four input formats are compared on the same network, with and without the NSP loss.
    """

    config_class = RobertaConfig
    base_model_class = RobertaModel
    mlm_head_class = RobertaLMHead


def build_model(config: RobertaConfig, nsp: bool, seed: int) -> torch.nn.Module:
    """A freshly initialised model; the seed fixes the initial weights."""
    torch.manual_seed(seed)
    return RobertaForPreTrainingWithNSP(config) if nsp else RobertaForMaskedLM(config)


# ----- data ------------------------------------------------------------------------------------


@dataclass
class Data:
    """The corpus (possibly cut down in fast mode), the byte-level BPE tokenizer, eval examples."""

    corpus: Corpus
    tokenizer: CourseTokenizer
    max_length: int
    eval_examples: list[dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)


def build_data(
    max_length: int,
    vocab_size: int = 4000,
    max_documents: int | None = None,
    max_eval_examples: int = 256,
) -> Data:
    """Built-in corpus -> cased byte-level BPE (as RoBERTa) -> held-out DOC-SENTENCES blocks.

    The held-out examples are the validation documents packed into natural full-length blocks:
    every run of every experiment is scored on these, whatever format it was trained on.
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
        "roberta", corpus.texts("train"), vocab_size=vocab_size, lowercase=False
    )
    eval_examples = list(
        make_format_examples(corpus.validation, tokenizer, max_length, format="doc-sentences")
    )[:max_eval_examples]
    info = {
        "corpus": corpus.name,
        "corpus_hash": corpus.content_hash,
        "train_documents": len(corpus.train),
        "validation_documents": len(corpus.validation),
        "tokenizer": f"byte-level BPE, cased, vocab {tokenizer.vocab_size}",
        "max_length": max_length,
        "eval_examples": len(eval_examples),
        "eval_tokens": sum(len(e["input_ids"]) for e in eval_examples),
    }
    return Data(corpus, tokenizer, max_length, eval_examples, info)


def unigram_loss(
    train: Sequence[dict[str, Any]], held_out: Sequence[dict[str, Any]], tokenizer: CourseTokenizer
) -> float:
    """Cross-entropy (nats per token) of the training set's token frequencies (add-one smoothed)
    on the held-out tokens, special tokens left out: the loss of a model that ignores context,
    i.e. the plateau an MLM model sits on before it learns to use context."""
    special = set(tokenizer.special_ids)
    counts: dict[int, int] = {}
    for e in train:
        for t in e["input_ids"]:
            if t not in special:
                counts[t] = counts.get(t, 0) + 1
    total = sum(counts.values())
    targets = [t for e in held_out for t in e["input_ids"] if t not in special]
    return -math.fsum(
        math.log((counts.get(t, 0) + 1) / (total + tokenizer.vocab_size)) for t in targets
    ) / len(targets)


def mean_length(examples: Sequence[dict[str, Any]]) -> float:
    return statistics.fmean(len(e["input_ids"]) for e in examples)


# ----- one run ---------------------------------------------------------------------------------


@dataclass
class Run:
    """One training run: which arm, which seed, what to train on and how."""

    arm: str
    seed: int
    train: Sequence[dict[str, Any]]
    collate: Callable[..., dict[str, torch.Tensor]]
    model_config: RobertaConfig
    steps: int
    batch_size: int
    lr: float
    nsp: bool = False
    accumulation: int = 1
    eval_every: int | None = None
    extra_eval: dict[str, Sequence[dict[str, Any]]] = field(default_factory=dict)


def run_one(run: Run, data: Data) -> dict[str, Any]:
    """Train one model for `run.steps` optimizer steps; score it on the shared held-out set."""
    torch.set_num_threads(1)  # identical numbers with 1 or N workers
    model = build_model(run.model_config, run.nsp, run.seed)
    eval_collate = PretrainingCollator(data.tokenizer)  # standard 15% / 80-10-10, fixed masks
    config = TrainingConfig(
        objective="mlm+nsp" if run.nsp else "mlm",
        batch_size=run.batch_size,
        gradient_accumulation_steps=run.accumulation,
        lr=run.lr,
        max_steps=run.steps,
        warmup=0.06,
        schedule="linear",
        seed=run.seed,
        log_every=max(1, run.steps // 20),
        eval_every=None,  # the callback below scores on fixed masks instead
        device="auto",  # the engine's choice: a GPU where there is one, else the CPU
        precision="fp32",
        progress=False,
    )
    curve: list[dict[str, Any]] = []

    def score(trainer: Trainer, record: dict[str, Any]) -> None:
        """Held-out loss during training, on the same fixed masks as the final score."""
        if run.eval_every and (trainer.step % run.eval_every == 0 or trainer.step == run.steps):
            scores = evaluate_pretraining(model, data.eval_examples, eval_collate, seed=EVAL_SEED)
            curve.append(
                {
                    "step": trainer.step,
                    "sequences": trainer.step * trainer.global_batch_size,
                    **scores,
                }
            )

    trainer = Trainer(model, run.train, run.collate, config, callbacks=[score])
    start = time.perf_counter()
    history = trainer.train()
    wall = time.perf_counter() - start
    final = (
        dict(curve[-1])
        if curve and curve[-1]["step"] == run.steps
        else evaluate_pretraining(model, data.eval_examples, eval_collate, seed=EVAL_SEED)
    )
    final.pop("step", None), final.pop("sequences", None)
    result: dict[str, Any] = {
        "arm": run.arm,
        "seed": run.seed,
        "eval_mlm_loss": final["eval_mlm_loss"],
        "eval_mlm_accuracy": final["eval_mlm_accuracy"],
        "steps": run.steps,
        "batch_size": run.batch_size * run.accumulation,
        "lr": run.lr,
        "train_tokens": tokens_seen(trainer, run.train),
        "final_train_loss": history.last("train_loss"),
        "wall_s": round(wall, 1),
        "curve": curve,
        "train_curve": [
            {"step": r["step"], "train_loss": r["train_loss"]} for r in history if "train_loss" in r
        ],
    }
    for name, examples in run.extra_eval.items():
        extra = evaluate_pretraining(
            model, examples, run.collate, objective=config.objective, seed=EVAL_SEED
        )
        result.update({f"{name}_{k.removeprefix('eval_')}": v for k, v in extra.items()})
    return result


def tokens_seen(trainer: Trainer, train: Sequence[dict[str, Any]]) -> int:
    """Real (non-padding) tokens the run trained on, replayed from its deterministic sampler."""
    return sum(
        len(train[j]["input_ids"])
        for step in range(trainer.step)
        for slot in trainer.slots
        for j in trainer.sampler.indices(step, slot)
    )


def run_all(runs: Sequence[Run], data: Data, workers: int) -> list[dict[str, Any]]:
    """Run everything, on `workers` forked processes (the data is built once, before forking)."""
    from tqdm.auto import tqdm

    global _DATA, _RUNS
    _DATA, _RUNS = data, list(runs)
    results: list[dict[str, Any] | None] = [None] * len(runs)
    bar = tqdm(total=len(runs), desc="runs", unit="run", file=sys.stderr)
    if workers <= 1 or len(runs) == 1:
        for i in range(len(runs)):
            results[i] = _run_index(i)
            bar.update()
    else:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(min(workers, len(runs))) as pool:
            for i, result in pool.imap_unordered(_indexed, range(len(runs))):
                results[i] = result
                bar.update()
    bar.close()
    return [r for r in results if r is not None]


_DATA: Data | None = None
_RUNS: list[Run] = []


def _run_index(i: int) -> dict[str, Any]:
    assert _DATA is not None
    return run_one(_RUNS[i], _DATA)


def _indexed(i: int) -> tuple[int, dict[str, Any]]:
    return i, _run_index(i)


# ----- statistics ------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (n-1) and n."""
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "n": len(values)}


def summarize(
    results: Sequence[dict[str, Any]], arms: Sequence[str], metrics: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """{arm: {metric: mean/std/n over seeds}}."""
    return {
        arm: {
            m: mean_std([r[m] for r in results if r["arm"] == arm and r.get(m) is not None])
            for m in metrics
            if any(r.get(m) is not None for r in results if r["arm"] == arm)
        }
        for arm in arms
    }


def paired_comparison(
    results: Sequence[dict[str, Any]], a: str, b: str, metric: str
) -> dict[str, Any]:
    """b - a per seed (same seed = same initial weights and data order where possible), judged
    by the course's one rule (course_lib.stats): paired t-test p < 0.05 and the sign of the mean
    in every seed but at most one. Seeds that only one arm ran are left out."""
    by_seed = {r["seed"]: r[metric] for r in results if r["arm"] == a}
    pairs = [
        (r[metric], by_seed[r["seed"]]) for r in results if r["arm"] == b and r["seed"] in by_seed
    ]
    if not pairs:
        return {
            "metric": metric,
            "a": a,
            "b": b,
            "diff_b_minus_a": {"mean": float("nan"), "std": float("nan"), "n": 0},
            "t": None,
            "p": None,
            "beyond_noise": False,
            "exceeds_seed_noise": False,
            "same_sign_all_seeds": False,
        }
    c = compare([x for x, _ in pairs], [y for _, y in pairs])
    diffs = c["per_seed"]
    return {
        "metric": metric,
        "a": a,
        "b": b,
        "diff_b_minus_a": {"mean": c["mean"], "std": c["std"], "n": c["n"]},
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


def restat(out: Path, name: str, figure: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Recompute every comparison of a saved <name>.json from its per-seed runs with the
    course's rule (no training), rewrite the JSON and the figure; returns the results."""
    path = out / f"{name}.json"
    payload = json.loads(path.read_text())
    payload["comparisons"] = [
        paired_comparison(payload["runs"], c["a"], c["b"], c["metric"])
        for c in payload["comparisons"]
    ]
    payload["noise_rule"] = RULE
    write_results(out, name, payload, figure(payload))
    return payload


# ----- command line and output -----------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--fast",
        action="store_true",
        help="a tiny version in seconds (smoke test / live demo), not the results",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=RESULTS_DIR,
        help="folder for <name>.json and <name>.png (default: results/ beside this script)",
    )
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3; fast 2)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel processes (default: 2 in full mode, 1 in fast mode)",
    )
    p.add_argument(
        "--replot",
        action="store_true",
        help="only redraw <name>.png from the <name>.json already in --out",
    )
    p.add_argument(
        "--restat",
        action="store_true",
        help="only recompute the comparisons of the <name>.json already in --out "
        "from its per-seed numbers (no training)",
    )
    return p


def replot(out: Path, name: str, figure: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Redraw a figure from saved results (no training); returns the results."""
    payload = json.loads((out / f"{name}.json").read_text())
    figure(payload).savefig(out / f"{name}.png", dpi=110, bbox_inches="tight")
    return payload


def environment() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "machine": platform.machine(),
        "threads_per_run": 1,
    }


def command_line(script: str, argv: Sequence[str]) -> str:
    """How to reproduce: the script relative to the repository root, with its arguments
    (an absolute --out folder, e.g. a temporary one, is shown as <dir>)."""
    shown = [str(a) if not os.path.isabs(str(a)) else "<dir>" for a in argv]
    return " ".join(["python", f"experiments/02_roberta/{Path(script).name}", *shown])


def finite_or_none(value: Any) -> Any:
    """JSON has no NaN: undefined statistics (one seed, zero spread) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def write_results(out: Path, name: str, payload: dict[str, Any], figure: Any) -> Path:
    """`<out>/<name>.json` and `<out>/<name>.png`; returns the JSON path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(finite_or_none(payload), indent=1, allow_nan=False) + "\n")
    figure.savefig(out / f"{name}.png", dpi=110, bbox_inches="tight")
    return path


def plot_arms(
    results: Sequence[dict[str, Any]],
    arms: Sequence[str],
    title: str,
    curve_metric: str = "eval_mlm_loss",
    labels: dict[str, str] | None = None,
    x: str = "step",
) -> Any:
    """Left: held-out MLM loss per arm (small dots = seeds, big dot = mean ± std over seeds).
    Right: the held-out loss during training, averaged over seeds."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    labels = labels or {}
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    colours = [f"C{i}" for i in range(len(arms))]
    for i, arm in enumerate(arms):
        values = [r["eval_mlm_loss"] for r in results if r["arm"] == arm]
        stats = mean_std(values)
        jitter = [
            i + 0.12 * (k - (len(values) - 1) / 2) / max(len(values), 1) for k in range(len(values))
        ]
        left.scatter(jitter, values, color=colours[i], alpha=0.6, s=14, zorder=2)
        left.errorbar(
            i + 0.25,
            stats["mean"],
            yerr=stats["std"],
            fmt="o",
            color=colours[i],
            capsize=4,
            zorder=3,
        )
        curves = [r["curve"] for r in results if r["arm"] == arm]
        steps = sorted({row[x] for c in curves for row in c if curve_metric in row})
        if steps:
            mean_curve = [
                statistics.fmean(
                    row[curve_metric]
                    for c in curves
                    for row in c
                    if row[x] == s and curve_metric in row
                )
                for s in steps
            ]
            right.plot(steps, mean_curve, color=colours[i], label=labels.get(arm, arm))
    left.set_xticks(
        range(len(arms)), [textwrap.fill(labels.get(a, a), 18) for a in arms], fontsize=8
    )
    left.set_xlim(-0.5, len(arms) - 0.5)
    left.grid(axis="y", alpha=0.3)
    left.set_ylabel("held-out MLM loss (lower is better)")
    left.set_title("final: seeds, and mean ± std")
    right.set_xlabel("optimizer step" if x == "step" else f"{x} seen")
    right.set_ylabel(curve_metric.replace("_", " "))
    right.set_title("during training (mean over seeds)")
    right.grid(alpha=0.3)
    if right.lines:
        right.legend(fontsize=8)
    fig.suptitle(title)
    return fig


def describe(summary: dict[str, dict[str, dict[str, float]]], metric: str) -> str:
    """One line per arm: 'arm: mean ± std (n seeds)'."""
    return "\n".join(
        f"{arm:>24s}: {s[metric]['mean']:.4f} ± {s[metric]['std']:.4f} (n={s[metric]['n']})"
        for arm, s in summary.items()
        if metric in s
    )
