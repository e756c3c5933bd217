"""Shared pieces of the DistilBERT experiments (chapter 04, notebooks 06-10).

The data (the built-in corpus, the teacher's tokenizer), the committed teacher, students built
the four ways the experiments compare, a small offline downstream task with fine-tuning, CPU
inference timing, and the results-file format. Everything trains with course_lib's Trainer at
equal steps, and every random draw comes from a seed, so a rerun gives the same numbers.

The notebooks import this file (it is the experiment's own code, so a live rerun in a notebook
is the same code as the committed run).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import random
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from course_lib.data import PretrainingCollator, build_pretraining_dataset, load_builtin_corpus
from course_lib.data.corpus import Corpus
from course_lib.models.bert import BertForMaskedLM, BertForSequenceClassification
from course_lib.models.distilbert import DistilBertForMaskedLM, DistilBertForSequenceClassification
from course_lib.objectives.distillation import DistillationObjective, init_student_from_teacher
from course_lib.objectives.masking import MaskingConfig
from course_lib.stats import compare
from course_lib.tokenization import CourseTokenizer, train_tokenizer
from course_lib.training import Trainer, TrainingConfig, load_pretrained, save_checkpoint
from course_lib.training.engine import evaluate_pretraining

EXPERIMENT_DIR = Path(__file__).resolve().parent
RESULTS_DIR = EXPERIMENT_DIR / "results"
TEACHER_DIR = RESULTS_DIR / "distil_teacher"  # the committed teacher checkpoint

# The data: a WordPiece vocabulary trained on the corpus's training split, packed 64-token
# blocks for MLM. A small vocabulary keeps the MLM head (V x H at every masked token) cheap.
VOCAB_SIZE = 4000
MAX_LENGTH = 64
# The teacher: a 4-layer pre-LN BERT (pre-LN trains stably at lr 1e-3 in a short run).
# The student keeps its width and takes layers 0 and 3 (default_student_layers(4)).
TEACHER_SIZES: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=2,
    intermediate_size=256,
    max_position_embeddings=MAX_LENGTH,
    pre_layer_norm=True,
)
# Table 4 of Sanh et al. (2019): change of the GLUE macro-score against the full model.
PAPER_TABLE4 = {"no L_ce": -2.96, "no L_cos": -1.46, "no L_mlm": -0.31, "random init": -3.69}
# Tables 1 and 3 of the paper: GLUE macro-score, parameters (millions), CPU inference seconds.
PAPER_TABLE1_GLUE = {"BERT-base": 79.5, "DistilBERT": 77.0}
PAPER_TABLE3 = {"BERT-base": (110, 668), "DistilBERT": (66, 410)}

# The student variants: loss weights (the reference script's 5/2/1, T=2) and the initialisation.
VARIANTS: dict[str, dict[str, Any]] = {
    "triple loss": dict(alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=1.0, init="teacher"),
    "no L_ce": dict(alpha_ce=0.0, alpha_mlm=2.0, alpha_cos=1.0, init="teacher"),
    "no L_cos": dict(alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=0.0, init="teacher"),
    "no L_mlm": dict(alpha_ce=5.0, alpha_mlm=0.0, alpha_cos=1.0, init="teacher"),
    "random init": dict(alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=1.0, init="random"),
    # Not a distillation: the same student architecture, random init, MLM loss only.
    "scratch": dict(alpha_ce=0.0, alpha_mlm=1.0, alpha_cos=0.0, init="random"),
    # The reference script's default L_ce: every real token, not only the masked ones.
    "L_ce all tokens": dict(
        alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=1.0, init="teacher", restrict_ce_to_mask=False
    ),
    # The fourth corner of "distilled vs scratch": the teacher's layers, no soft targets.
    "teacher init, MLM only": dict(alpha_ce=0.0, alpha_mlm=1.0, alpha_cos=0.0, init="teacher"),
}


def training_config(steps: int, seed: int, lr: float = 1e-3, **changes: Any) -> TrainingConfig:
    """The recipe every run here shares (the engine's defaults: AdamW, linear decay, 6% warmup,
    clipping at 1.0), in fp32 so results do not depend on the machine's bf16 support, on the
    device the engine selects (a GPU where there is one, else the CPU)."""
    values: dict[str, Any] = dict(
        max_steps=steps,
        batch_size=32,
        lr=lr,
        seed=seed,
        device="auto",
        precision="fp32",
        progress=False,
        log_every=max(1, steps // 20),
        eval_max_examples=None,
    )
    values.update(changes)
    return TrainingConfig(**values)


# --- data -----------------------------------------------------------------------------------------


@dataclass
class Data:
    """What every run reads: the tokenizer, MLM blocks of the train/validation split, a collator."""

    corpus: Corpus
    tokenizer: CourseTokenizer
    train: list[dict[str, Any]]
    validation: list[dict[str, Any]]
    collate: PretrainingCollator


def build_data(tokenizer: CourseTokenizer | None = None, max_documents: int | None = None) -> Data:
    """The built-in corpus cut into MLM blocks; trains the tokenizer unless one is given
    (the experiments pass the teacher's own, saved in its checkpoint). `max_documents` keeps
    the first documents of each split only (fast mode: a smoke test, not a result)."""
    corpus = load_builtin_corpus(progress=False)
    if max_documents is not None:
        corpus = Corpus(
            train=corpus.train[:max_documents],
            validation=corpus.validation[:max_documents],
            name=corpus.name + f" (first {max_documents} documents per split)",
            build_info=corpus.build_info,
        )
    if tokenizer is None:
        tokenizer = train_tokenizer("bert", corpus.texts("train"), vocab_size=VOCAB_SIZE)
    train = list(build_pretraining_dataset(corpus.train, tokenizer, "mlm", max_length=MAX_LENGTH))
    val = list(
        build_pretraining_dataset(corpus.validation, tokenizer, "mlm", max_length=MAX_LENGTH)
    )
    return Data(corpus, tokenizer, train, val, PretrainingCollator(tokenizer, MaskingConfig()))


def load_teacher(directory: str | Path = TEACHER_DIR) -> tuple[BertForMaskedLM, CourseTokenizer]:
    """The committed teacher (weights + config) and the tokenizer saved with it."""
    directory = Path(directory)
    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"no teacher checkpoint in {directory.name}/: run "
            "`python experiments/04_deberta_distil/distil_teacher.py` first."
        )
    teacher = load_pretrained(directory)
    return teacher, CourseTokenizer.load(directory / "tokenizer.json")


# --- students -------------------------------------------------------------------------------------


def make_student(teacher: BertForMaskedLM, init: str, seed: int) -> DistilBertForMaskedLM:
    """A half-depth DistilBERT student: copied from the teacher (init='teacher') or the same
    architecture with fresh random weights (init='random'), drawn from `seed`."""
    torch.manual_seed(seed)
    copied = init_student_from_teacher(teacher)
    if init == "teacher":
        return copied
    if init == "random":
        torch.manual_seed(seed)
        return DistilBertForMaskedLM(copied.config)
    raise ValueError(f"init={init!r} is unknown; use 'teacher' or 'random'.")


def pretrain_student(
    teacher: BertForMaskedLM,
    data: Data,
    variant: str,
    steps: int,
    seed: int,
    temperature: float = 2.0,
) -> tuple[DistilBertForMaskedLM, dict[str, Any]]:
    """Train one student variant (see VARIANTS) for `steps` steps; return it (in eval mode) and
    its numbers: held-out MLM loss/accuracy at the end, the logged training history."""
    spec = VARIANTS[variant]
    student = make_student(teacher, spec["init"], seed)
    # MLM only (scratch, teacher init + MLM only): the model's own MLM loss, as the teacher's.
    objective = None
    if spec["alpha_ce"] or spec["alpha_cos"]:
        objective = DistillationObjective(
            teacher,
            temperature=temperature,
            alpha_ce=spec["alpha_ce"],
            alpha_mlm=spec["alpha_mlm"],
            alpha_cos=spec["alpha_cos"],
            # The ablation's variants take L_ce at the masked positions only (the reference
            # script's --restrict_ce_to_mask), except "L_ce all tokens" (the library's default).
            restrict_ce_to_mask=spec.get("restrict_ce_to_mask", True),
        )
    trainer = Trainer(
        student, data.train, data.collate, training_config(steps, seed), objective=objective
    )
    start = time.perf_counter()
    history = trainer.train()
    student.eval()
    return student, {
        "variant": variant,
        "seed": seed,
        "steps": steps,
        "wall_s": round(time.perf_counter() - start, 1),
        **mlm_eval(student, data),  # the same masks for every model, whatever its seed
        "history": [_rounded(row) for row in history],
    }


def mlm_eval(model: nn.Module, data: Data, seed: int = 0) -> dict[str, float]:
    """Held-out MLM loss and accuracy with the masks the Trainer's evaluation uses for `seed`."""
    return evaluate_pretraining(model, data.validation, data.collate, seed=seed)


# --- a downstream task: which module's documentation is this sentence from? -------------------


def topic_task(
    data: Data,
    num_classes: int = 10,
    train_per_class: int = 64,
    test_per_class: int = 80,
    seed: int = 0,
) -> dict[str, Any]:
    """A 10-way sentence classification built offline: the label is the document (a standard
    library module's documentation: builtins, typing, logging, ...) a sentence comes from.

    The classes are the `num_classes` longest documents of the training split; each gives
    `train_per_class` labelled sentences to fine-tune on and `test_per_class` others to test on
    (a small labelled set, where what pretraining taught matters most). The sentences were part
    of the MLM pretraining text of every model compared here (the labels were not).
    """
    rng = random.Random(seed)
    documents = sorted(data.corpus.train, key=lambda d: (-len(d.sentences), d.title))[:num_classes]
    train: list[tuple[str, int]] = []
    test: list[tuple[str, int]] = []
    for label, document in enumerate(documents):
        sentences = [s for s in document.sentences if 5 <= len(s.split()) <= 60]
        rng.shuffle(sentences)
        if len(sentences) < train_per_class + test_per_class:
            raise ValueError(f"{document.title} has only {len(sentences)} usable sentences.")
        train += [(s, label) for s in sentences[:train_per_class]]
        test += [(s, label) for s in sentences[train_per_class : train_per_class + test_per_class]]
    rng.shuffle(train)

    def encode(items: list[tuple[str, int]]) -> list[dict[str, Any]]:
        texts = [text for text, _ in items]
        encoded = data.tokenizer.batch_encode(
            texts, max_length=MAX_LENGTH, padding=False, return_tensors=None
        )
        return [
            {"input_ids": ids, "labels": label}
            for ids, (_, label) in zip(encoded["input_ids"], items)
        ]

    return {
        "train": encode(train),
        "test": encode(test),
        "classes": [d.title for d in documents],
    }


def collate_classification(
    examples: Sequence[dict[str, Any]], generator: torch.Generator | None = None, pad_id: int = 0
) -> dict[str, Tensor]:
    """Pad a list of {input_ids, labels} into tensors (the generator is unused: nothing random)."""
    del generator
    width = max(len(e["input_ids"]) for e in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, example in enumerate(examples):
        n = len(example["input_ids"])
        input_ids[row, :n] = torch.tensor(example["input_ids"])
        attention_mask[row, :n] = 1
    labels = torch.tensor([e["labels"] for e in examples], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def classification_loss(
    model: nn.Module, batch: dict[str, Tensor]
) -> tuple[Tensor, dict[str, Tensor]]:
    """The Trainer objective for fine-tuning: the model's cross-entropy, plus batch accuracy."""
    out = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
    )
    accuracy = (out.logits.argmax(-1) == batch["labels"]).float().mean()
    return out.loss, {"accuracy": accuracy.detach()}


def classifier_from(pretrained: nn.Module, num_labels: int, seed: int) -> nn.Module:
    """A sequence classifier whose encoder is `pretrained`'s (a BERT or DistilBERT MLM model);
    the head (BERT: pooler + linear; DistilBERT: dense + linear) starts random."""
    torch.manual_seed(seed)
    config = pretrained.config.replace(num_labels=num_labels)
    if isinstance(pretrained, DistilBertForMaskedLM):
        model: nn.Module = DistilBertForSequenceClassification(config)
    elif isinstance(pretrained, BertForMaskedLM):
        model = BertForSequenceClassification(config)
    else:
        raise TypeError(
            f"expected a BERT or DistilBERT MLM model, got {type(pretrained).__name__}."
        )
    missing, unexpected = model.backbone.load_state_dict(
        pretrained.backbone.state_dict(), strict=False
    )
    # Only BERT's pooler is new: the MLM teacher was trained without one (no NSP).
    if unexpected or any(not k.startswith("pooler.") for k in missing):
        raise RuntimeError(
            f"encoder weights did not transfer: missing {missing}, unexpected {unexpected}"
        )
    return model


@torch.no_grad()
def accuracy(model: nn.Module, examples: Sequence[dict[str, Any]], batch_size: int = 128) -> float:
    """Share of `examples` whose label is the model's argmax."""
    model.eval()
    device = next(model.parameters()).device
    correct = 0
    for start in range(0, len(examples), batch_size):
        batch = {
            k: v.to(device)
            for k, v in collate_classification(examples[start : start + batch_size]).items()
        }
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        correct += int((logits.argmax(-1) == batch["labels"]).sum())
    return correct / len(examples)


def finetune(
    pretrained: nn.Module, task: dict[str, Any], steps: int, seed: int, lr: float = 1e-3
) -> dict[str, Any]:
    """Fine-tune a copy of `pretrained`'s encoder with a fresh head for `steps` steps; return
    the test accuracy (and the last logged training accuracy, to see under- or over-fitting)."""
    model = classifier_from(pretrained, len(task["classes"]), seed)
    config = training_config(steps, seed, lr=lr, warmup=0.1, log_every=max(1, steps // 5))
    trainer = Trainer(
        model, task["train"], collate_classification, config, objective=classification_loss
    )
    history = trainer.train()
    return {
        "task_accuracy": accuracy(model, task["test"]),
        "task_train_accuracy": history.last("train_accuracy"),
    }


# --- size and speed -------------------------------------------------------------------------------


@torch.no_grad()
def inference_seconds(
    models: dict[str, nn.Module],
    batch_size: int = 1,
    seq_len: int = MAX_LENGTH,
    repeats: int = 30,
    vocab_size: int = VOCAB_SIZE,
) -> dict[str, float]:
    """Seconds of one forward pass (encoder only) per model: the fastest of `repeats` runs, the
    models interleaved. On a shared machine other processes only ever add time, so the minimum
    (as `timeit` recommends) is the most stable estimate. Batch size 1, as in the paper."""
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=g)
    attention_mask = torch.ones_like(input_ids)
    times: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():  # CPU inference time (the paper's Table 3), wherever they trained
        model.cpu()
        model.eval()
        _encoder(model)(input_ids=input_ids, attention_mask=attention_mask)  # warm-up
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            _encoder(model)(input_ids=input_ids, attention_mask=attention_mask)
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def _encoder(model: nn.Module) -> nn.Module:
    return getattr(model, "backbone", model)


# --- statistics and the results file ------------------------------------------------------------


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (n-1) of per-seed numbers."""
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else float("nan")
    return {"mean": statistics.fmean(values), "std": std, "n": len(values)}


def difference_vs_noise(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """mean(a) - mean(b), its standard error (unpaired) and the signed ratio diff / SE, for
    scale only: verdicts use the paired test of `paired_comparison` (the course's one rule)."""
    ma, mb = mean_std(a), mean_std(b)
    se = math.sqrt(ma["std"] ** 2 / ma["n"] + mb["std"] ** 2 / mb["n"])
    diff = ma["mean"] - mb["mean"]
    return {"diff": diff, "se": se, "z": diff / se if se > 0 else float("nan")}


def paired_comparison(a: dict[int, float], b: dict[int, float]) -> dict[str, Any]:
    """a - b seed by seed ({seed: value}; the same seed means the same data order, masks and
    fine-tuning head), judged by the course's one rule for "beyond seed noise"
    (course_lib.stats: paired t-test p < 0.05 and the sign in every seed but at most one)."""
    c = compare(a, b)
    return {"diff": c["mean"], **c, "exceeds_noise": c["beyond_noise"]}


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}


def run_header(args: Any, script: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """What produced a results file: the exact command (`argv`, default the process's own
    arguments), date, versions, threads."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(
        ["python", f"experiments/04_deberta_distil/{script}", *map(shlex.quote, argv)]
    )
    return {
        "command": command,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "fast": bool(getattr(args, "fast", False)),
    }


def _finite(value: Any) -> Any:
    """NaN/inf (a std of one seed, a ratio over zero) become null: strict JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json(path: Path, payload: dict[str, Any]) -> Path:
    """Strict JSON (no NaN), indented, so the committed file diffs line by line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(payload), indent=1, allow_nan=False) + "\n")
    return path


def save_teacher(
    directory: Path, teacher: BertForMaskedLM, tokenizer: CourseTokenizer, info: dict
) -> Path:
    """Weights, config and tokenizer only (no optimizer state): what load_teacher needs."""
    return save_checkpoint(directory, teacher, state={"run": info}, tokenizer=tokenizer)


def seeds_for(fast: bool, n: int = 3) -> list[int]:
    return [0] if fast else list(range(n))


def progress(message: str) -> None:
    print(message, flush=True)
