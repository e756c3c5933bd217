"""Fine-tuning with the pretraining engine: a task head on a pretrained (or random) encoder.

There is no second training loop. Fine-tuning is the same `Trainer` with a different collator
(pad only, no masking) and a different objective (the task model's own loss); evaluation on
held-out examples runs in a callback. What is new is small:

- `load_backbone` copies a pretrained encoder (e.g. a BertForMaskedLM's `backbone`) into a task
  model and reports what stays newly initialised (the task head, and the pooler if the source
  had none), as transformers warns "Some weights ... were not initialized from the checkpoint".
- `task_model(kind, source)` builds the task model of the source's family: from a config it is
  randomly initialised, from a pretrained model or checkpoint directory it gets its encoder.
- `evaluate_task` scores held-out examples: accuracy for classification and tagging, exact match
  and F1 of the predicted span for extractive QA.

    from course_lib.data.tasks import build_task
    task = build_task("word_order", corpus, tokenizer)
    model = task_model(task.kind, pretrained_mlm, num_labels=task.num_labels)
    result = finetune(model, task, TrainingConfig(max_steps=300, lr=3e-4, batch_size=32))
    result.metrics  # {'eval_accuracy': ...}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from course_lib.data.collator import pad_rows
from course_lib.labels import IGNORE_INDEX
from course_lib.training.engine import History, Trainer, TrainingConfig

KINDS = ("classification", "tagging", "qa")
TASK_HEADS = {
    "classification": "ForSequenceClassification",
    "tagging": "ForTokenClassification",
    "qa": "ForQuestionAnswering",
}
# Inputs a task model's forward takes; anything else in an example (text, words...) is metadata.
TASK_INPUTS = (
    "input_ids",
    "attention_mask",
    "token_type_ids",
    "labels",
    "start_positions",
    "end_positions",
)
# Config fields a fine-tuning run may change without changing the encoder's weights' meaning.
FREE_FIELDS = ("num_labels", "hidden_dropout_prob", "attention_probs_dropout_prob")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is invalid: choose one of {KINDS}.")


# ----- models -------------------------------------------------------------------------------------


def task_model_class(kind: str, config: Any) -> type[nn.Module]:
    """The task class of `config`'s family: ("qa", BertConfig) -> BertForQuestionAnswering."""
    from course_lib.models import MODEL_CLASSES

    _check_kind(kind)
    suffix = TASK_HEADS[kind]
    for name, cls in MODEL_CLASSES.items():
        if name.endswith(suffix) and cls.config_class is type(config):
            return cls
    raise ValueError(f"no {suffix} model for {type(config).__name__} in course_lib.models.")


class BackboneReport(NamedTuple):
    """What `load_backbone` did: tensors copied, tensors left newly initialised, tensors unused."""

    loaded: list[str]
    initialised: list[str]
    unused: list[str]

    def __str__(self) -> str:
        def short(names: list[str]) -> str:
            return ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")

        return (
            f"loaded {len(self.loaded)} encoder tensors from the pretrained model\n"
            f"newly initialised (trained from scratch in fine-tuning): {short(self.initialised)}\n"
            f"not used (pretraining heads): {short(self.unused) or 'none'}"
        )


def _as_model(source: nn.Module | str | Path) -> nn.Module:
    if isinstance(source, (str, Path)):
        from course_lib.training.checkpoint import load_pretrained

        return load_pretrained(source)
    if not isinstance(source, nn.Module):
        raise TypeError(
            f"source should be a pretrained model or a checkpoint directory, got "
            f"{type(source).__name__}."
        )
    return source


def load_backbone(model: nn.Module, source: nn.Module | str | Path) -> BackboneReport:
    """Copy the pretrained encoder of `source` (a model with a `.backbone`, or a checkpoint
    directory written by the Trainer / `course pretrain`) into `model.backbone`.

    The configs must agree except on FREE_FIELDS (labels, dropout). Tensors are copied, not
    shared: fine-tuning never changes the source model.
    """
    source = _as_model(source)
    for name, m in (("model", model), ("source", source)):
        if not hasattr(m, "backbone"):
            raise TypeError(
                f"the {name} ({type(m).__name__}) has no .backbone: pass a task model and a "
                "pretraining model such as BertForMaskedLM."
            )
    mine, theirs = model.config.to_dict(), source.config.to_dict()
    diff = sorted(
        k for k in set(mine) | set(theirs) if k not in FREE_FIELDS and mine.get(k) != theirs.get(k)
    )
    if diff:
        details = ", ".join(f"{k}: {theirs.get(k)!r} (source) vs {mine.get(k)!r}" for k in diff)
        raise ValueError(
            f"the source encoder has a different architecture ({details}); build the task model "
            "from the source's config, e.g. task_model(kind, source)."
        )
    target = model.backbone.state_dict()
    pretrained = source.backbone.state_dict()
    shared = {k: v for k, v in pretrained.items() if k in target}
    model.backbone.load_state_dict(shared, strict=False)
    loaded = [f"backbone.{k}" for k in shared]
    initialised = [f"backbone.{k}" for k in target if k not in shared]
    initialised += [k for k in model.state_dict() if not k.startswith("backbone.")]
    unused = [f"backbone.{k}" for k in pretrained if k not in target]
    unused += [k for k in source.state_dict() if not k.startswith("backbone.")]
    return BackboneReport(loaded, initialised, unused)


def task_model(
    kind: str,
    source: Any,
    num_labels: int = 2,
    seed: int = 0,
    **config_changes: Any,
) -> nn.Module:
    """A task model ("classification", "tagging" or "qa") of the source's family.

    `source` is a config (random initialisation: the baseline), or a pretrained model or
    checkpoint directory (its encoder is loaded; the head starts random). `seed` fixes the
    random initialisation, so the pretrained and random models of one seed share a head init.
    """
    _check_kind(kind)
    is_config = hasattr(source, "to_dict") and not isinstance(source, nn.Module)
    pretrained = None if is_config else _as_model(source)
    config = source if is_config else pretrained.config
    if kind != "qa":
        config_changes["num_labels"] = num_labels
    config = config.replace(**config_changes)
    cls = task_model_class(kind, config)
    torch.manual_seed(seed)
    model = cls(config)
    if pretrained is not None:
        load_backbone(model, pretrained)
    return model


# ----- batches and loss ---------------------------------------------------------------------------


class TaskCollator:
    """Pad task examples into a batch: input_ids (pad id), attention_mask and token_type_ids (0),
    per-token labels (-100); sequence labels and answer positions stacked as they are.

    Takes (and ignores) the Trainer's `generator`: fine-tuning batches have nothing random.
    """

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(
        self, examples: Sequence[dict[str, Any]], generator: torch.Generator | None = None
    ) -> dict[str, Tensor]:
        del generator
        if not examples:
            raise ValueError("Cannot collate an empty list of examples.")
        if any("input_ids" not in e for e in examples):
            raise ValueError("Every example needs 'input_ids' (build them with data.tasks).")
        ids = [list(e["input_ids"]) for e in examples]
        width = max(len(r) for r in ids)
        batch = {
            "input_ids": pad_rows(ids, width, self.pad_token_id),
            "attention_mask": pad_rows([[1] * len(r) for r in ids], width, 0),
            "token_type_ids": pad_rows(
                [e.get("token_type_ids", [0] * len(r)) for e, r in zip(examples, ids)], width, 0
            ),
        }
        for key in ("labels", "start_positions", "end_positions"):
            present = [key in e for e in examples]
            if not any(present):
                continue
            if not all(present):
                raise ValueError(f"Only some examples have {key!r}; build them with one builder.")
            values = [e[key] for e in examples]
            if isinstance(values[0], (list, tuple)):  # one label per token
                batch[key] = pad_rows(values, width, IGNORE_INDEX)
            else:
                batch[key] = torch.tensor([int(v) for v in values], dtype=torch.long)
        return batch


def _batch_accuracy(out: Any, batch: dict[str, Tensor]) -> Tensor | None:
    """Accuracy on this batch, logged next to the loss (exact span match for QA)."""
    if "start_positions" in batch:
        hit = (out.start_logits.argmax(-1) == batch["start_positions"]) & (
            out.end_logits.argmax(-1) == batch["end_positions"]
        )
        return hit.float().mean()
    labels = batch.get("labels")
    if labels is None or out.logits is None:
        return None
    scored = labels != IGNORE_INDEX
    return (out.logits.argmax(-1)[scored] == labels[scored]).float().mean()


class TaskLoss:
    """The Trainer objective for fine-tuning: the task model's loss, and batch accuracy."""

    def __call__(
        self, model: nn.Module, batch: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        out = model(**{k: v for k, v in batch.items() if k in TASK_INPUTS})
        if out.loss is None:
            raise ValueError("the batch has no labels (or start/end positions) to learn from.")
        accuracy = _batch_accuracy(out, batch)
        return out.loss, ({} if accuracy is None else {"accuracy": accuracy.detach()})


# ----- prediction and evaluation ------------------------------------------------------------------


def _kind_of(model: nn.Module) -> str:
    name = type(model).__name__
    for kind, suffix in TASK_HEADS.items():
        if name.endswith(suffix):
            return kind
    raise TypeError(f"{name} is not a task model (expected a *{'/*'.join(TASK_HEADS.values())}).")


def best_span(
    start_logits: Tensor, end_logits: Tensor, lo: int, hi: int, max_answer_tokens: int = 10
) -> tuple[int, int]:
    """The (start, end) with start <= end < start + max_answer_tokens inside [lo, hi) that
    maximises start_logit + end_logit (the decoding of BERT's SQuAD fine-tuning)."""
    if not 0 <= lo < hi <= start_logits.shape[-1]:
        raise ValueError(f"context range [{lo}, {hi}) is empty or outside the sequence.")
    s, e = start_logits[lo:hi].float(), end_logits[lo:hi].float()
    scores = s[:, None] + e[None, :]
    n = hi - lo
    allowed = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer_tokens - 1)
    flat = scores.masked_fill(~allowed, float("-inf")).argmax()
    return lo + int(flat // n), lo + int(flat % n)


@torch.no_grad()
def predict(
    model: nn.Module,
    examples: Sequence[dict[str, Any]],
    batch_size: int = 64,
    pad_token_id: int = 0,
    max_answer_tokens: int = 10,
) -> list[Any]:
    """Predictions per example: a label (classification), a label per token (tagging) or an
    answer span (start, end) inside the example's context_start..context_end (QA)."""
    kind = _kind_of(model)
    if kind == "qa" and any("context_start" not in e for e in examples):
        raise ValueError("QA examples need 'context_start' and 'context_end' (see data.tasks).")
    collate = TaskCollator(pad_token_id)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    predictions: list[Any] = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = collate(
            [{k: e[k] for k in ("input_ids", "token_type_ids") if k in e} for e in chunk]
        )
        out = model(**{k: v.to(device) for k, v in batch.items()})
        if kind == "classification":
            predictions += out.logits.argmax(-1).tolist()
        elif kind == "tagging":
            tags = out.logits.argmax(-1).tolist()
            predictions += [row[: len(e["input_ids"])] for row, e in zip(tags, chunk)]
        else:
            for i, e in enumerate(chunk):
                predictions.append(
                    best_span(
                        out.start_logits[i],
                        out.end_logits[i],
                        e["context_start"],
                        e["context_end"],
                        max_answer_tokens,
                    )
                )
    model.train(was_training)
    return predictions


def span_f1(predicted: tuple[int, int], gold: tuple[int, int]) -> float:
    """Token-overlap F1 of two inclusive spans (SQuAD's F1, on token positions)."""
    overlap = min(predicted[1], gold[1]) - max(predicted[0], gold[0]) + 1
    if overlap <= 0:
        return 0.0
    precision = overlap / (predicted[1] - predicted[0] + 1)
    recall = overlap / (gold[1] - gold[0] + 1)
    return 2 * precision * recall / (precision + recall)


def evaluate_task(
    model: nn.Module,
    examples: Sequence[dict[str, Any]],
    batch_size: int = 64,
    pad_token_id: int = 0,
) -> dict[str, float]:
    """Held-out scores: {"accuracy"} for classification and tagging (scored tokens only),
    {"exact_match", "f1"} for QA (predicted vs gold token span)."""
    if not examples:
        raise ValueError("No examples to evaluate on.")
    kind = _kind_of(model)
    predictions = predict(model, examples, batch_size, pad_token_id)
    if kind == "classification":
        hits = [int(p == e["labels"]) for p, e in zip(predictions, examples)]
        return {"accuracy": sum(hits) / len(hits)}
    if kind == "tagging":
        hits = total = 0
        for p, e in zip(predictions, examples):
            for tag, label in zip(p, e["labels"]):
                if label != IGNORE_INDEX:
                    hits += int(tag == label)
                    total += 1
        return {"accuracy": hits / max(total, 1)}
    gold = [(e["start_positions"], e["end_positions"]) for e in examples]
    return {
        "exact_match": sum(p == g for p, g in zip(predictions, gold)) / len(gold),
        "f1": sum(span_f1(p, g) for p, g in zip(predictions, gold)) / len(gold),
    }


# ----- the fine-tuning run ------------------------------------------------------------------------


@dataclass
class FinetuneResult:
    """The run's history (train loss/accuracy, eval_* scores) and the final held-out scores."""

    history: History
    metrics: dict[str, float]

    def plot(self, **kwargs: Any) -> Any:
        return self.history.plot(**kwargs)


def finetune(
    model: nn.Module,
    task: Any,
    config: TrainingConfig,
    eval_every: int | None = None,
    eval_examples: Sequence[dict[str, Any]] | None = None,
    callbacks: Sequence[Callable[[Trainer, dict], None]] = (),
) -> FinetuneResult:
    """Fine-tune `model` on `task.train` with the course's Trainer; score `task.test` (or
    `eval_examples`) every `eval_every` steps and at the end, as "eval_<metric>" entries."""
    if not hasattr(task, "train") or not hasattr(task, "pad_token_id"):
        raise TypeError("task should be a data.tasks.Task (build_task(...)).")
    if _kind_of(model) != task.kind:
        raise ValueError(
            f"{type(model).__name__} cannot learn a {task.kind} task; build it "
            f"with task_model({task.kind!r}, ...)."
        )
    held_out = list(task.test if eval_examples is None else eval_examples)

    def evaluate(trainer: Trainer, record: dict) -> None:
        due = eval_every is not None and trainer.step % eval_every == 0
        if not (due or trainer.stop_reason is not None) or not held_out:
            return
        scores = evaluate_task(trainer.model, held_out, config.eval_batch_size, task.pad_token_id)
        record.update({f"eval_{k}": v for k, v in scores.items()})
        if not trainer.history or trainer.history[-1] is not record:
            trainer.history.append(record)  # a step the Trainer did not log: keep the scores

    trainer = Trainer(
        model,
        task.train,
        TaskCollator(task.pad_token_id),
        config,
        objective=TaskLoss(),
        callbacks=[evaluate, *callbacks],
    )
    history = trainer.train()
    metrics = {k: v for k, v in history[-1].items() if k.startswith("eval_")} if history else {}
    return FinetuneResult(history, metrics)


__all__ = [
    "KINDS",
    "TASK_HEADS",
    "BackboneReport",
    "FinetuneResult",
    "TaskCollator",
    "TaskLoss",
    "best_span",
    "evaluate_task",
    "finetune",
    "load_backbone",
    "predict",
    "span_f1",
    "task_model",
    "task_model_class",
]
