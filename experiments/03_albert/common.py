"""Shared pieces of the chapter-03 experiments: data, tiny ALBERT configs, training, probes.

The experiment scripts (sop_vs_nsp.py, sharing_ablation.py) and the chapter's notebooks import
this file, so the live re-runs in the notebooks use exactly the code that made the committed
results. Everything is seeded; training is counted in optimizer steps, not minutes, because the
machine that runs it is shared and step counts are what make results reproducible.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.data import (
    PretrainingCollator,
    load_builtin_corpus,
    make_mlm_examples,
    make_nsp_examples,
    make_sop_examples,
    split_documents,
)
from course_lib.models.albert import AlbertConfig
from course_lib.stats import RULE, compare
from course_lib.tokenization import train_tokenizer
from course_lib.training import Trainer, TrainingConfig

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SENTENCE_KEYS = ("next_sentence_label", "sentence_order_label")


def set_threads(threads: int) -> None:
    """One thread by default: on a CPU shared with other jobs, extra threads mostly wait for
    each other (we measured 10x slower steps with 2 threads than with 1 under load)."""
    torch.set_num_threads(threads)


# ----- data ---------------------------------------------------------------------------------


@dataclass
class ExperimentData:
    """A Unigram tokenizer and the example sets built from one train/validation split."""

    tokenizer: Any
    train_documents: list
    validation_documents: list
    max_length: int
    info: dict[str, Any]

    def pairs(self, task: str, split: str, seed: int = 0) -> list[dict[str, Any]]:
        """NSP or SOP pairs ('nsp' / 'sop') of one split; `seed` draws the pairs."""
        builder = {"nsp": make_nsp_examples, "sop": make_sop_examples}[task]
        docs = self.train_documents if split == "train" else self.validation_documents
        return list(builder(docs, self.tokenizer, self.max_length, seed=seed))

    def blocks(self, split: str) -> list[dict[str, Any]]:
        """Contiguous blocks of max_length tokens, for MLM only."""
        docs = self.train_documents if split == "train" else self.validation_documents
        return list(make_mlm_examples(docs, self.tokenizer, self.max_length))


def build_data(
    max_length: int = 32,
    vocab_size: int = 4000,
    validation_fraction: float = 0.2,
    max_documents: int | None = None,
) -> ExperimentData:
    """The built-in corpus split by document (20% held out, more than the corpus default, so
    accuracies on held-out pairs have a usable standard error) and a Unigram tokenizer trained
    on the training documents only. `max_documents` shrinks everything for smoke runs."""
    corpus = load_builtin_corpus()
    documents = corpus.documents
    if max_documents is not None:
        documents = sorted(documents, key=lambda d: d.title)[:max_documents]
    train, validation = split_documents(documents, validation_fraction, seed=0)
    tokenizer = train_tokenizer("unigram", (d.text for d in train), vocab_size=vocab_size)
    info = {
        "corpus": corpus.name,
        "corpus_hash": corpus.content_hash,
        "documents": len(documents),
        "train_documents": len(train),
        "validation_documents": len(validation),
        "tokenizer": "unigram",
        "vocab_size": tokenizer.vocab_size,
        "max_length": max_length,
    }
    return ExperimentData(tokenizer, train, validation, max_length, info)


def without_sentence_labels(examples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same inputs with the NSP/SOP label removed: the model then trains on MLM alone."""
    return [{k: v for k, v in e.items() if k not in SENTENCE_KEYS} for e in examples]


def sentence_labels(examples: Sequence[dict[str, Any]]) -> Tensor:
    """The NSP or SOP label of each example (whichever the builder wrote)."""
    key = next(k for k in SENTENCE_KEYS if k in examples[0])
    return torch.tensor([int(e[key]) for e in examples])


def unigram_loss(
    train: Sequence[dict[str, Any]], test: Sequence[dict[str, Any]], tokenizer: Any
) -> float:
    """Cross-entropy (nats) of predicting each held-out token from its training frequency alone
    (add-one smoothing): the loss an MLM reaches before it uses any context."""
    special = set(tokenizer.special_ids)
    counts = Counter(t for e in train for t in e["input_ids"] if t not in special)
    total = sum(counts.values())
    held = Counter(t for e in test for t in e["input_ids"] if t not in special)
    log_likelihood = sum(
        n * math.log((counts[t] + 1) / (total + tokenizer.vocab_size)) for t, n in held.items()
    )
    return -log_likelihood / sum(held.values())


# ----- models and training ------------------------------------------------------------------


def tiny_config(
    vocab_size: int,
    hidden_size: int = 64,
    num_hidden_layers: int = 2,
    embedding_size: int = 32,
    sharing: str = "all",
    max_length: int = 32,
    **changes: Any,
) -> AlbertConfig:
    """A tiny ALBERT: heads of 32 dimensions, feed-forward 4H, pre-LN (stable at the short,
    high-learning-rate schedules a CPU budget needs; the paper's models are post-LN)."""
    return AlbertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=max(1, hidden_size // 32),
        intermediate_size=4 * hidden_size,
        embedding_size=embedding_size,
        sharing=sharing,
        max_position_embeddings=max_length,
        pre_layer_norm=True,
        **changes,
    )


def pretrain(
    model: nn.Module,
    train_examples: Sequence[dict[str, Any]],
    collator: PretrainingCollator,
    objective: str,
    steps: int,
    seed: int,
    lr: float = 2e-3,
    batch_size: int = 16,
    eval_examples: Sequence[dict[str, Any]] | None = None,
    eval_every: int | None = None,
    progress: bool = False,
) -> tuple[Trainer, list[dict[str, Any]]]:
    """Train with course_lib's Trainer for exactly `steps` optimizer steps (fp32, on the device
    the engine selects: a GPU where there is one, else the CPU)."""
    config = TrainingConfig(
        objective=objective,
        batch_size=batch_size,
        max_steps=steps,
        lr=lr,
        warmup=0.06,
        seed=seed,
        log_every=max(1, steps // 20),
        eval_every=eval_every,
        eval_max_examples=None,
        device="auto",
        precision="fp32",
        progress=progress,
    )
    trainer = Trainer(model, list(train_examples), collator, config, eval_dataset=eval_examples)
    history = trainer.train()
    return trainer, list(history)


# ----- probing a frozen encoder -------------------------------------------------------------


@torch.no_grad()
def pooled_features(
    model: nn.Module,
    examples: Sequence[dict[str, Any]],
    collator: PretrainingCollator,
    batch_size: int = 128,
) -> Tensor:
    """The pooled [CLS] vector (what the NSP/SOP head reads) of each example, unmasked inputs."""
    was_training = model.training
    model.eval()
    unmasked = PretrainingCollator(collator.tokenizer, masking=None)
    device = next(model.parameters()).device
    rows = []
    for start in range(0, len(examples), batch_size):
        batch = unmasked(without_sentence_labels(examples[start : start + batch_size]))
        out = model.backbone(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
            token_type_ids=batch["token_type_ids"].to(device),
        )
        rows.append(out.pooler_output.cpu())
    model.train(was_training)
    return torch.cat(rows)


@torch.no_grad()
def head_accuracy(
    model: nn.Module, examples: Sequence[dict[str, Any]], collator: PretrainingCollator
) -> float:
    """Accuracy of the model's own sentence head (trained with the model) on `examples`."""
    features = pooled_features(model, examples, collator)
    was_training = model.training
    model.eval()
    predictions = model.sop_head(features.to(next(model.parameters()).device)).argmax(-1).cpu()
    model.train(was_training)
    return float((predictions == sentence_labels(examples)).float().mean())


def linear_probe(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    steps: int = 300,
    lr: float = 0.05,
    weight_decay: float = 1e-3,
    seed: int = 0,
) -> dict[str, float]:
    """Logistic regression on frozen features: a fresh 2-way linear head, full-batch Adam.

    Features are standardised with the training set's statistics first, so one learning rate
    suits every model (a trained pooler's tanh outputs and a random one's differ in scale).
    """
    mean, std = train_features.mean(0), train_features.std(0) + 1e-6
    x_train, x_test = (train_features - mean) / std, (test_features - mean) / std
    generator = torch.Generator().manual_seed(seed)
    head = nn.Linear(x_train.shape[1], 2)
    with torch.no_grad():
        head.weight.normal_(0.0, 0.01, generator=generator)
        head.bias.zero_()
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        loss = F.cross_entropy(head(x_train), train_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        train_acc = (head(x_train).argmax(-1) == train_labels).float().mean()
        test_acc = (head(x_test).argmax(-1) == test_labels).float().mean()
    return {"train_accuracy": float(train_acc), "accuracy": float(test_acc)}


# ----- what happens across depth (the paper's Figure 1) -------------------------------------


@torch.no_grad()
def depth_dynamics(model: nn.Module, batch: dict[str, Tensor]) -> dict[str, list[float]]:
    """For each applied layer: mean L2 distance and mean cosine similarity between its input
    and its output, over the real (non-padding) tokens of `batch`. Pre-LN hidden states are
    the raw residual stream, so each is LayerNorm-free; distances are divided by sqrt(H) to be
    comparable across widths."""
    backbone = getattr(model, "backbone", model)
    was_training = backbone.training
    backbone.eval()
    device = next(backbone.parameters()).device
    token_type_ids = batch.get("token_type_ids")
    out = backbone(
        input_ids=batch["input_ids"].to(device),
        attention_mask=batch["attention_mask"].to(device),
        token_type_ids=None if token_type_ids is None else token_type_ids.to(device),
        output_hidden_states=True,
    )
    backbone.train(was_training)
    real = batch["attention_mask"].bool().to(device)
    width = out.hidden_states[0].shape[-1] ** 0.5
    l2, cosine = [], []
    for before, after in zip(out.hidden_states[:-1], out.hidden_states[1:]):
        a, b = before[real], after[real]
        l2.append(float((b - a).norm(dim=-1).mean() / width))
        cosine.append(float(F.cosine_similarity(a, b, dim=-1).mean()))
    return {"l2": l2, "cosine": cosine}


# ----- bookkeeping --------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (n - 1) of per-seed numbers."""
    array = np.asarray(values, dtype=float)
    std = float(array.std(ddof=1)) if len(array) > 1 else 0.0
    return {"mean": float(array.mean()), "std": std, "n": len(array)}


def paired(a: dict[Any, float], b: dict[Any, float] | float) -> dict[str, Any]:
    """a - b seed by seed ({seed: value}; b may be a constant such as the majority class),
    judged by the course's one rule for "beyond seed noise" (course_lib.stats.compare)."""
    return compare(a, b)


def run_metadata(argv: Sequence[str], script: str) -> dict[str, Any]:
    """What made a result file: the command, when, and with which software."""
    return {
        "command": " ".join(["python", f"experiments/03_albert/{script}", *argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }


def parse_overrides(items: Sequence[str], settings: dict[str, Any]) -> dict[str, Any]:
    """`["lr=0.001", "seeds=[0,1]"]` -> {"lr": 0.001, "seeds": [0, 1]}; only known keys."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in settings:
            raise SystemExit(
                f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(settings)}."
            )
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def write_json(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def load_results(name: str) -> dict[str, Any]:
    """A committed result file by name, e.g. load_results('sop_vs_nsp')."""
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path.name} is missing: run `python experiments/03_albert/{name}.py` to create it."
        )
    return json.loads(path.read_text())


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def restat(
    name: str,
    summarize: Callable[[dict[str, Any]], dict[str, Any]],
    out: Path,
    plot: Callable[[dict[str, Any], Path], None] | None,
) -> dict[str, Any]:
    """Recompute the summary of a saved <out>/<name>.json from its per-seed runs (no training)
    with `summarize(results)`, rewrite the JSON (and the figure unless `plot` is None)."""
    path = out / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"--restat: {path} does not exist; run the experiment first.")
    results = json.loads(path.read_text())
    results["summary"] = summarize(results)
    results["noise_rule"] = RULE
    write_json(path, results)
    if plot is not None:
        plot(results, out / f"{name}.png")
    log(f"recomputed the summary of {path.name} from its runs ({RULE})")
    return results


def run_and_write(
    name: str,
    run: Callable[..., dict[str, Any]],
    settings: dict[str, Any],
    args: Any,
    argv: Sequence[str] | None,
    paper: dict[str, Any],
    plot: Callable[[dict[str, Any], Path], None],
) -> dict[str, Any]:
    """Run an experiment, then write <out>/<name>.json (settings, provenance, the paper's
    numbers, results, wall time) and, unless --no-plot, <out>/<name>.png."""
    start = time.perf_counter()
    results = run(settings, progress=True)
    results = {
        "experiment": name,
        "settings": settings,
        "fast": args.fast,
        **run_metadata(sys.argv[1:] if argv is None else argv, f"{name}.py"),
        "paper": paper,
        **results,
        "noise_rule": RULE,
        "wall_seconds": round(time.perf_counter() - start, 1),
    }
    path = write_json(args.out / f"{name}.json", results)
    if not args.no_plot:
        plot(results, args.out / f"{name}.png")
    log(f"wrote {path.name} ({results['wall_seconds']:.0f}s)")
    return results
