"""One training loop for every pretraining objective.

The loop knows nothing about MLM or NSP: it asks an *objective* for `(loss, metrics)` given the
model and a batch. The default objective is the model's own `.loss` (MLM, MLM+NSP, MLM+SOP, and
DeBERTa's, whose enhanced mask decoder is part of the model); distillation plugs in as another
objective object (course_lib.objectives.DistillationObjective).

Big batches are exact: a step of batch_size x accumulation x processes gives the gradient of one
batch that size, because every micro-batch's mean loss is weighted by its share of the step's
targets (masked tokens for MLM, sentence labels for NSP/SOP), counted before the first backward.

Everything random is derived from (seed, step): the data order (a seeded permutation per epoch),
the dynamic masking (a torch.Generator per micro-batch) and dropout (re-seeded per micro-batch).
So the data position *is* the step number, and a run resumed from a checkpoint continues exactly
as the uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.labels import IGNORE_INDEX
from course_lib.objectives.targets import (
    OBJECTIVES,
    Batch,
    LossAndMetrics,
    Shares,
    count_targets,
)
from course_lib.training import distributed
from course_lib.training.checkpoint import load_checkpoint, read_state, save_checkpoint
from course_lib.training.device import autocast, needs_grad_scaler, select_device, select_precision
from course_lib.training.optim import SCHEDULES, build_optimizer, lr_factor, set_lr

MODEL_INPUTS = (
    "input_ids",
    "attention_mask",
    "token_type_ids",
    "labels",
    "next_sentence_label",
    "sentence_order_label",
)


class TrainingDiverged(RuntimeError):
    """The loss or the gradient became NaN/inf; the weights were not updated with it."""


@dataclass
class TrainingConfig:
    """How to train: budget, optimizer, schedule, evaluation, checkpoints, device, precision.

    `batch_size` is per process and per micro-batch; the effective batch of one optimizer step is
    batch_size x gradient_accumulation_steps x number of processes. Give `max_steps`,
    `max_minutes` or both (training stops at whichever comes first).
    """

    objective: str = "mlm"
    batch_size: int = 32
    gradient_accumulation_steps: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    schedule: str = "linear"
    warmup: float = 0.06  # fraction of the run
    max_steps: int | None = None
    max_minutes: float | None = None
    max_grad_norm: float | None = 1.0
    seed: int = 0
    log_every: int = 10
    eval_every: int | None = None  # steps
    eval_every_minutes: float | None = None
    eval_batch_size: int = 64
    eval_max_examples: int | None = 512
    checkpoint_every: int | None = None  # steps
    checkpoint_every_minutes: float | None = None
    output_dir: str | None = None
    device: str = "auto"
    precision: str = "auto"
    progress: bool = True

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # JSON round trips turn tuples into lists
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field and what would be valid."""
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"objective={self.objective!r} is invalid: choose one of {OBJECTIVES}."
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} is invalid: choose one of {SCHEDULES}.")

        def is_int(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        def is_number(value: Any) -> bool:  # finite: inf and nan are refused everywhere
            return is_int(value) or (isinstance(value, float) and math.isfinite(value))

        for name in ("batch_size", "gradient_accumulation_steps", "log_every", "eval_batch_size"):
            value = getattr(self, name)
            if not is_int(value) or value <= 0:
                raise ValueError(f"{name}={value!r} is invalid: expected a positive integer.")
        for name in ("max_steps", "eval_every", "checkpoint_every", "eval_max_examples"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value <= 0):
                raise ValueError(
                    f"{name}={value!r} is invalid: expected a positive integer or None."
                )
        for name in (
            "max_minutes",
            "eval_every_minutes",
            "checkpoint_every_minutes",
            "max_grad_norm",
        ):
            value = getattr(self, name)
            if value is not None and not (is_number(value) and value > 0):
                raise ValueError(
                    f"{name}={value!r} is invalid: expected a finite positive number or None."
                )
        if self.max_steps is None and self.max_minutes is None:
            raise ValueError("give max_steps or max_minutes (or both): the run needs a budget.")
        if not (is_number(self.lr) and self.lr > 0):
            raise ValueError(
                f"lr={self.lr!r} is invalid: expected a finite positive learning rate."
            )
        for name in ("weight_decay", "eps"):
            value = getattr(self, name)
            if not (is_number(value) and value >= 0):
                raise ValueError(f"{name}={value!r} is invalid: expected a finite number >= 0.")
        if len(self.betas) != 2 or not all(is_number(b) and 0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas={self.betas!r} is invalid: expected two numbers in [0, 1).")
        if not (is_int(self.seed) and 0 <= self.seed < 2**63):
            raise ValueError(f"seed={self.seed!r} is invalid: expected an integer in [0, 2**63).")
        if not (is_number(self.warmup) and 0.0 <= self.warmup < 1.0):
            raise ValueError(f"warmup={self.warmup!r} is invalid: a fraction of the run in [0, 1).")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Objective(Protocol):
    """Anything that turns (model, batch) into a scalar loss and a dict of scalar metrics.

    Such an objective returns a *mean* loss per micro-batch, and the Trainer averages those over
    micro-batches and processes: exact only when every micro-batch has the same number of targets.
    An `ExactObjective` also says how many targets each batch holds, and the Trainer then weights
    every micro-batch by its share of the targets of the whole optimizer step (see below).
    """

    def __call__(self, model: nn.Module, batch: Batch) -> LossAndMetrics: ...


class ExactObjective(Protocol):
    """An objective whose big batches are exact whatever the split into micro-batches/processes.

    `target_counts(batch)` counts the batch's targets per kind, on the CPU before the batch moves
    to the device (see `count_targets`). The Trainer sums the counts over the optimizer step's
    micro-batches and processes (one all-reduce per step), then calls the objective with
    `shares={kind: this batch's count / the step's count}`: the objective returns every mean
    term (and metric) multiplied by the share of its kind, so that the sum over all micro-batches
    is the mean over all targets of the step: what one big batch would give. Without `shares`
    it behaves as a plain `Objective`.
    """

    def target_counts(self, batch: Batch) -> dict[str, float]: ...

    def __call__(
        self, model: nn.Module, batch: Batch, shares: Shares | None = None
    ) -> LossAndMetrics: ...


def model_inputs(batch: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """The keyword arguments `model` takes, from a collator's batch.

    The one place the sentence-pair label's two names meet: a batch carries NSP labels as
    `next_sentence_label` and SOP labels as `sentence_order_label` (their meanings), while a
    model has one binary sentence head and names it once: BERT `next_sentence_label` (so BERT
    trained with mlm+sop gets SOP labels there), ALBERT `sentence_order_label` (so ALBERT runs
    an NSP experiment unchanged). The label goes to the name the model's forward takes.
    """
    batch = dict(batch)
    for given, other in (PAIR_LABELS, PAIR_LABELS[::-1]):
        if given in batch and not _takes(model, given) and _takes(model, other):
            batch[other] = batch.pop(given)
    return {k: v for k, v in batch.items() if k in MODEL_INPUTS}


PAIR_LABELS = ("next_sentence_label", "sentence_order_label")


def _takes(model: nn.Module, argument: str) -> bool:
    """Whether the forward of `model` (unwrapped from DDP or torch.compile) names `argument`."""
    inner = getattr(model, "module", model)
    inner = getattr(inner, "_orig_mod", inner)
    return argument in inspect.signature(inner.forward).parameters


class ModelLoss:
    """The default objective: the model's own `.loss`, with its parts as metrics.

    Exact under accumulation and DDP: the MLM part is weighted by the share of masked tokens,
    the NSP/SOP part by the share of sentence labels (each is a mean over its own targets).
    """

    def target_counts(self, batch: Batch) -> dict[str, float]:
        return count_targets(batch)

    def __call__(
        self, model: nn.Module, batch: Batch, shares: Shares | None = None
    ) -> LossAndMetrics:
        out = model(**model_inputs(batch, model))
        parts = {
            name: getattr(out, name)
            for name in ("mlm_loss", "nsp_loss", "sop_loss")
            if getattr(out, name, None) is not None
        }
        if shares is None:
            return out.loss, {name: value.detach() for name, value in parts.items()}
        if not parts:  # e.g. a transformers MLM model: .loss alone, a mean over masked tokens
            parts = {"mlm_loss": out.loss}
        kinds = {"mlm_loss": "mlm", "nsp_loss": "sentence", "sop_loss": "sentence"}
        weighted = {name: value * shares[kinds[name]] for name, value in parts.items()}
        return sum(weighted.values()), {name: v.detach() for name, v in weighted.items()}


class History(list):
    """The metrics of a run: one dict per logged step ("step", "train_loss", "lr", ...)."""

    def plot(self, **kwargs: Any) -> Any:
        """Loss, accuracy and learning-rate curves in one figure (course_lib.viz.training)."""
        from course_lib.viz.training import plot_history  # matplotlib only when asked for

        return plot_history(list(self), **kwargs)

    def last(self, key: str) -> Any:
        """The most recent logged value of `key` (e.g. 'eval_mlm_accuracy'), or None."""
        return next((row[key] for row in reversed(self) if key in row), None)


def derived_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (seed, step, slot, purpose): no correlated streams."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint64)[0] >> 1)


_PURPOSE_DATA, _PURPOSE_MASK, _PURPOSE_DROPOUT, _PURPOSE_EVAL, _PURPOSE_SAMPLE = 1, 2, 3, 4, 5


class EpochSampler:
    """Which examples each micro-batch gets: a seeded permutation per epoch, cut into steps.

    The position in the data is a pure function of the step, so resuming needs only the step.
    Each epoch drops its last incomplete global batch (at most one batch of examples).
    """

    def __init__(self, num_examples: int, global_batch_size: int, micro_batch_size: int, seed: int):
        if num_examples < global_batch_size:
            raise ValueError(
                f"the training set has {num_examples} examples, fewer than one global batch of "
                f"{global_batch_size}; lower batch_size or gradient_accumulation_steps, or add data."
            )
        self.num_examples, self.global_batch_size = num_examples, global_batch_size
        self.micro_batch_size, self.seed = micro_batch_size, seed
        self.steps_per_epoch = num_examples // global_batch_size
        self._epoch, self._perm = -1, torch.empty(0, dtype=torch.long)

    def permutation(self, epoch: int) -> Tensor:
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(derived_seed(self.seed, epoch, _PURPOSE_DATA))
            self._epoch, self._perm = epoch, torch.randperm(self.num_examples, generator=generator)
        return self._perm

    def position(self, step: int) -> dict[str, int]:
        """Where step `step` reads: epoch and offset into that epoch's permutation."""
        epoch, index = divmod(step, self.steps_per_epoch)
        return {"epoch": epoch, "offset": index * self.global_batch_size}

    def indices(self, step: int, slot: int) -> list[int]:
        """Example indices of micro-batch `slot` (0 .. world*accumulation-1) of optimizer step `step`."""
        pos = self.position(step)
        start = pos["offset"] + slot * self.micro_batch_size
        return self.permutation(pos["epoch"])[start : start + self.micro_batch_size].tolist()


@torch.no_grad()
def evaluate_pretraining(
    model: nn.Module,
    dataset: Sequence[Any],
    collate_fn: Callable[..., dict[str, Tensor]],
    objective: str = "mlm",
    batch_size: int = 64,
    seed: int = 0,
    precision: str = "fp32",
) -> dict[str, float]:
    """MLM loss and masked-token accuracy (and NSP/SOP accuracy) of `model` on held-out examples.

    The masking is drawn from a generator seeded by `seed` alone, so every evaluation of a run
    sees the same masks and the numbers are comparable from step to step. `objective="rtd"`
    evaluates an ELECTRA generator + discriminator instead (see `evaluate_rtd`). Under DDP the sums
    are pooled over all processes (each passes its own share of the examples).
    """
    if objective == "rtd":
        return evaluate_rtd(model, dataset, collate_fn, batch_size, seed, precision)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(derived_seed(seed, _PURPOSE_EVAL))
    # sums: MLM loss, correct masked tokens, masked tokens, correct sentence labels, pairs
    sums = torch.zeros(5, dtype=torch.float64)
    for start in range(0, len(dataset), batch_size):
        batch = collate_fn(list(dataset[start : start + batch_size]), generator=generator)
        if "labels" not in batch:
            raise ValueError(
                "evaluate_pretraining needs masked batches with 'labels', but the collator "
                f"returned only {sorted(batch)}; pass a collator with masking (e.g. "
                "PretrainingCollator(tokenizer)) as eval_collate_fn."
            )
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast(device, precision):
            out = model(**model_inputs(batch, model))
        sums[:3] += torch.tensor(_masked_lm_sums(out, batch["labels"]), dtype=torch.float64)
        sentence = batch.get("next_sentence_label", batch.get("sentence_order_label"))
        pair_logits = getattr(out, "nsp_logits", None)
        if pair_logits is None:  # ALBERT's sentence head is SOP
            pair_logits = getattr(out, "sop_logits", None)
        if sentence is not None and pair_logits is not None:
            sums[3] += (pair_logits.argmax(-1) == sentence).sum().item()
            sums[4] += sentence.numel()
    sums = distributed.all_reduce_sum(sums)
    model.train(was_training)
    result = {
        "eval_mlm_loss": float(sums[0] / max(sums[2], 1)),
        "eval_mlm_accuracy": float(sums[1] / max(sums[2], 1)),
    }
    if sums[4] > 0:
        task = "sop" if objective == "mlm+sop" else "nsp"
        result[f"eval_{task}_accuracy"] = float(sums[3] / sums[4])
    return result


# The discriminator's probabilities are pooled as a histogram of this many bins (processes can
# sum it); the AUC read from it differs from the exact one by at most the ties it creates.
AUC_BINS = 4096


def _masked_lm_sums(out: Any, labels: Tensor) -> list[float]:
    """Cross-entropy sum, correct predictions and count at the masked positions of `labels`."""
    masked = labels != IGNORE_INDEX
    logits = getattr(out, "mlm_logits", None)
    if logits is None:  # a transformers model: MaskedLMOutput.logits
        logits = out.logits
    if logits.dim() == 3:  # a model that returns every position
        logits = logits[masked]
    target = labels[masked]
    return [
        F.cross_entropy(logits.float(), target, reduction="sum").item(),
        (logits.argmax(-1) == target).sum().item(),
        target.numel(),
    ]


def auc_from_histograms(positives: Tensor, negatives: Tensor) -> float:
    """ROC AUC (the chance that a random positive scores above a random negative; ties count
    half) from the two classes' counts per score bin, lowest bin first."""
    positives, negatives = positives.double(), negatives.double()
    below = torch.cumsum(negatives, 0) - negatives  # negatives in lower bins
    pairs = float(positives.sum() * negatives.sum())
    if pairs == 0:
        return float("nan")
    return float((positives * (below + 0.5 * negatives)).sum() / pairs)


@torch.no_grad()
def evaluate_rtd(
    model: nn.Module,
    dataset: Sequence[Any],
    collate_fn: Callable[..., dict[str, Tensor]],
    batch_size: int = 64,
    seed: int = 0,
    precision: str = "fp32",
) -> dict[str, float]:
    """ELECTRA (objectives.rtd.ElectraPretrainer) on held-out examples: the generator's MLM loss
    and masked-token accuracy, and the discriminator's replaced-token accuracy and AUC over
    every real token, beside the base rate (the accuracy of answering "original" everywhere).

    Masks and the generator's samples come from generators seeded by `seed` alone, so every
    evaluation of a run corrupts the same way. Under DDP the sums are pooled over processes.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(derived_seed(seed, _PURPOSE_EVAL))
    sampler = torch.Generator(device=device).manual_seed(derived_seed(seed, _PURPOSE_SAMPLE))
    # sums: MLM loss, correct masked tokens, masked tokens, correct RTD labels, replaced, real
    sums = torch.zeros(6, dtype=torch.float64)
    histogram = torch.zeros(2, AUC_BINS, dtype=torch.float64)  # [original, replaced] x bins
    for start in range(0, len(dataset), batch_size):
        batch = collate_fn(list(dataset[start : start + batch_size]), generator=generator)
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast(device, precision):
            out = model(**model_inputs(batch, model), sample_generator=sampler)
        sums[:3] += torch.tensor(_masked_lm_sums(out, batch["labels"]), dtype=torch.float64)
        real = batch["attention_mask"].bool()
        logits, labels = out.logits[real].float(), out.disc_labels[real]
        sums[3] += ((logits > 0).long() == labels).sum().item()
        sums[4] += labels.sum().item()
        sums[5] += labels.numel()
        bins = (torch.sigmoid(logits) * AUC_BINS).long().clamp(max=AUC_BINS - 1)
        flat = torch.bincount(labels * AUC_BINS + bins, minlength=2 * AUC_BINS)
        histogram += flat.view(2, AUC_BINS).cpu().double()
    pooled = distributed.all_reduce_sum(torch.cat([sums, histogram.flatten()]))
    sums, histogram = pooled[:6], pooled[6:].view(2, AUC_BINS)
    model.train(was_training)
    return {
        "eval_mlm_loss": float(sums[0] / max(sums[2], 1)),
        "eval_mlm_accuracy": float(sums[1] / max(sums[2], 1)),
        "eval_rtd_accuracy": float(sums[3] / max(sums[5], 1)),
        "eval_rtd_auc": auc_from_histograms(histogram[1], histogram[0]),
        "eval_rtd_base_rate": float(1.0 - sums[4] / max(sums[5], 1)),
        "eval_replaced": float(sums[4] / max(sums[5], 1)),
    }


class Trainer:
    """Pretrains `model` on `train_dataset` (a list of examples) batched by `collate_fn`.

    `collate_fn(examples, generator=...)` builds a batch of tensors (with dynamic masking drawn
    from the generator). `eval_dataset` enables held-out evaluation; `objective` defaults to the
    model's own loss. Callbacks get `(trainer, record)` after every optimizer step.
    `eval_collate_fn` masks the held-out set (default: `collate_fn`); `run_info` is plain data
    stored in every checkpoint (what corpus and recipe made this run).
    """

    def __init__(
        self,
        model: nn.Module,
        train_dataset: Sequence[Any],
        collate_fn: Callable[..., dict[str, Tensor]],
        config: TrainingConfig,
        eval_dataset: Sequence[Any] | None = None,
        objective: Objective | None = None,
        tokenizer: Any | None = None,
        callbacks: Sequence[Callable[[Trainer, dict], None]] = (),
        eval_collate_fn: Callable[..., dict[str, Tensor]] | None = None,
        run_info: dict[str, Any] | None = None,
    ):
        self.config = config
        self.dist = distributed.context()
        self.device = select_device(config.device)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
        self.precision = select_precision(self.device, config.precision)
        self.model = model.to(self.device)
        self.train_model: nn.Module = self.model
        if self.dist.enabled:
            self.train_model = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.collate_fn, self.tokenizer = collate_fn, tokenizer
        self.eval_collate_fn = eval_collate_fn  # e.g. standard 15% masking for comparable numbers
        self.run_info = dict(run_info or {})  # plain data saved with checkpoints (corpus, recipe)
        self.objective: Objective = objective or ModelLoss()
        self.callbacks = list(callbacks)
        self.optimizer = build_optimizer(
            self.model, config.lr, config.weight_decay, config.betas, config.eps
        )
        self.scaler = torch.amp.GradScaler(
            self.device.type, enabled=needs_grad_scaler(self.device, self.precision)
        )
        self.slots = distributed.micro_batch_slots(
            self.dist.rank, self.dist.world_size, config.gradient_accumulation_steps
        )
        self.global_batch_size = (
            config.batch_size * config.gradient_accumulation_steps * self.dist.world_size
        )
        self.sampler = EpochSampler(
            len(train_dataset), self.global_batch_size, config.batch_size, config.seed
        )
        self.step = 0
        self.elapsed_s = 0.0  # training wall-clock of all sessions of this run (resumes included)
        self.history = History()
        self.stop_reason: str | None = None
        self._stop_requested: str | None = None

    # --- public API ---------------------------------------------------------------------------

    @property
    def checkpoint_dir(self) -> Path | None:
        return Path(self.config.output_dir) / "checkpoint" if self.config.output_dir else None

    def request_stop(self, reason: str = "requested") -> None:
        """Finish the current step, save a checkpoint and return from `train()`."""
        self._stop_requested = reason

    def progress(self) -> float:
        """How far through its budget the run is, in [0, 1] (drives the learning-rate schedule)."""
        parts = []
        if self.config.max_steps:
            # Mid-step progress, so neither the first nor the last step gets a zero learning rate.
            parts.append((self.step + 0.5) / self.config.max_steps)
        if self.config.max_minutes:
            parts.append(self.elapsed_s / (60.0 * self.config.max_minutes))
        return min(1.0, max(parts))

    def current_lr(self) -> float:
        return self.config.lr * lr_factor(self.config.schedule, self.progress(), self.config.warmup)

    def train(self) -> History:
        """Run until the step or time budget is spent (or a stop signal); return the history."""
        cfg = self.config
        self.stop_reason, self._stop_requested = None, None
        finished = self._check_stop(False)
        if finished is not None:  # e.g. a resumed run that had already finished: no extra step
            import warnings

            warnings.warn(
                f"the run already spent its budget ({finished}: step {self.step}, "
                f"{self.elapsed_s / 60:.1f} min); raise max_steps or max_minutes to train further.",
                stacklevel=2,
            )
            self.stop_reason = finished
            return self.history
        if self.checkpoint_dir is not None and self.dist.is_main:
            # Refuse a folder that is not a checkpoint now, not after minutes of training.
            from course_lib.training.checkpoint import check_checkpoint_target, recover_checkpoint

            recover_checkpoint(self.checkpoint_dir)
            check_checkpoint_target(self.checkpoint_dir)
        self.model.train()
        previous_handlers = self._install_signal_handlers()
        bar = self._progress_bar()
        session_start, elapsed_before = time.perf_counter(), self.elapsed_s
        last_eval, last_ckpt = self.elapsed_s, self.elapsed_s
        window = {"tokens": 0.0, "start": time.perf_counter()}
        try:
            while self.stop_reason is None:
                lr = self.current_lr()
                set_lr(self.optimizer, lr)
                loss, metrics, tokens, grad_norm = self._optimizer_step()
                self.step += 1
                window["tokens"] += tokens
                # Agree across processes on the clock and on stop requests (a signal may reach
                # one rank first), so that every rank stops after the same step.
                flags = torch.tensor(
                    [time.perf_counter() - session_start, float(self._stop_requested is not None)],
                    dtype=torch.float64,
                )
                flags = distributed.all_reduce_max(flags)
                self.elapsed_s = elapsed_before + float(flags[0])
                self.stop_reason = self._check_stop(bool(flags[1]))

                record: dict[str, Any] = {"step": self.step}
                if self.step % cfg.log_every == 0 or self.step == 1 or self.stop_reason:
                    record.update(self._train_record(loss, lr, metrics, grad_norm, window))
                    if bar is not None:
                        bar.set_postfix(
                            loss=f"{loss:.3f}",
                            tok_s=f"{record['tokens_per_s']:,.0f}",
                            lr=f"{lr:.2e}",
                        )
                finished = self.stop_reason in ("max_steps", "time")  # end with a measurement
                due = self._due(cfg.eval_every, cfg.eval_every_minutes, last_eval)
                if self.eval_dataset and (due or finished):
                    record.update(self.evaluate())
                    last_eval = self.elapsed_s
                    if bar is not None:
                        bar.write(_format_eval(record))
                self._update_bar(bar)
                if len(record) > 1:
                    record.setdefault("elapsed_s", self.elapsed_s)
                    self.history.append(record)
                for callback in self.callbacks:
                    callback(self, record)
                if self.stop_reason is None and self._stop_requested and not self.dist.enabled:
                    # A callback (or a signal that arrived just now) asked to stop. Under DDP the
                    # request waits for the next step's all-reduce, so every rank stops together.
                    self.stop_reason = self._stop_requested
                due = self._due(cfg.checkpoint_every, cfg.checkpoint_every_minutes, last_ckpt)
                if (self.stop_reason or due) and self.checkpoint_dir is not None:
                    self.save()
                    last_ckpt = self.elapsed_s
        finally:
            self._restore_signal_handlers(previous_handlers)
            if bar is not None:
                bar.close()
        return self.history

    def _train_record(
        self, loss: float, lr: float, metrics: dict[str, float], grad_norm: float, window: dict
    ) -> dict[str, Any]:
        """The logged training numbers; tokens/s is averaged since the previous log line."""
        now = time.perf_counter()
        tokens_per_s = window["tokens"] * self.dist.world_size / max(now - window["start"], 1e-9)
        window["tokens"], window["start"] = 0.0, now
        record = {
            "train_loss": loss,
            "lr": lr,
            "tokens_per_s": tokens_per_s,
            "grad_norm": grad_norm,
            "elapsed_s": self.elapsed_s,
        }
        record.update({f"train_{k}": v for k, v in metrics.items()})
        return record

    def evaluate(self, dataset: Sequence[Any] | None = None) -> dict[str, float]:
        """Held-out MLM loss, masked-token accuracy and sentence-task accuracy (see
        `evaluate_pretraining`); each process evaluates a strided share, then sums are pooled."""
        cfg = self.config
        dataset = self.eval_dataset if dataset is None else dataset
        if not dataset:
            raise ValueError("evaluate() needs an eval_dataset (held-out examples).")
        if cfg.eval_max_examples is not None:
            dataset = dataset[: cfg.eval_max_examples]
        return evaluate_pretraining(
            self.model,
            list(dataset)[self.dist.rank :: self.dist.world_size],
            self.eval_collate_fn or self.collate_fn,
            objective=cfg.objective,
            batch_size=cfg.eval_batch_size,
            seed=cfg.seed,
            precision=self.precision,
        )

    def save(self, directory: str | Path | None = None) -> Path | None:
        """Write a checkpoint (rank 0 only; other ranks wait for it)."""
        directory = Path(directory) if directory is not None else self.checkpoint_dir
        if directory is None:
            raise ValueError("save() needs a directory (or TrainingConfig.output_dir).")
        if self.dist.is_main:
            save_checkpoint(
                directory, self.model, self.optimizer, self.state_dict(), self.tokenizer
            )
        distributed.barrier()
        return directory

    def state_dict(self) -> dict[str, Any]:
        """The trainer's plain-data state: step, time, schedule, data position, history."""
        position = self.sampler.position(self.step)
        return {
            "step": self.step,
            "elapsed_s": self.elapsed_s,
            "training_config": self.config.to_dict(),
            "schedule": {
                "name": self.config.schedule,
                "warmup": self.config.warmup,
                "progress": self.progress(),
                "lr": self.current_lr(),
            },
            "data": {
                "seed": self.config.seed,
                "num_examples": self.sampler.num_examples,
                "global_batch_size": self.global_batch_size,
                "epoch": position["epoch"],
                "offset": position["offset"],
                "examples_seen": self.step * self.global_batch_size,
            },
            "grad_scaler": {
                k: v for k, v in self.scaler.state_dict().items() if isinstance(v, (int, float))
            },
            "world_size": self.dist.world_size,
            "run": self.run_info,
            "stop_reason": self.stop_reason,
            "history": list(self.history),
        }

    def resume(self, directory: str | Path) -> dict[str, Any]:
        """Continue from a checkpoint: weights, optimizer, step, time, history, RNG states."""
        state = read_state(directory)
        data = state.get("data", {})
        if data.get("num_examples") != self.sampler.num_examples:
            raise ValueError(
                f"checkpoint {directory} was trained on {data.get('num_examples')} examples, this "
                f"training set has {self.sampler.num_examples}: resume with the same data "
                "(same corpus, tokenizer, max_length and seed)."
            )
        if data.get("global_batch_size") != self.global_batch_size:
            raise ValueError(
                f"checkpoint {directory} used a global batch of {data.get('global_batch_size')}, "
                f"this run uses {self.global_batch_size}; keep batch_size x accumulation x "
                "processes the same to resume at the same data position."
            )
        state = load_checkpoint(directory, self.model, self.optimizer)
        self.step, self.elapsed_s = int(state["step"]), float(state["elapsed_s"])
        self.history = History(state.get("history", []))
        if state.get("grad_scaler") and self.scaler.is_enabled():
            self.scaler.load_state_dict(state["grad_scaler"])
        return state

    def plot(self, **kwargs: Any) -> Any:
        """Plot this run's history (see History.plot)."""
        return self.history.plot(**kwargs)

    # --- internals ------------------------------------------------------------------------------

    def _optimizer_step(self) -> tuple[float, dict[str, float], float, float]:
        """Forward/backward over this rank's micro-batches, then one clipped AdamW step.

        With an exact objective (the default), each micro-batch's loss is weighted by its share
        of the step's targets, counted over all micro-batches and processes before the first
        backward: the step's gradient is the one big batch's, however it is split.
        """
        cfg = self.config
        accumulation = len(self.slots)
        batches = []
        tokens = 0.0
        for slot in self.slots:
            examples = [self.train_dataset[j] for j in self.sampler.indices(self.step, slot)]
            generator = torch.Generator().manual_seed(
                derived_seed(cfg.seed, self.step, slot, _PURPOSE_MASK)
            )
            batch = self.collate_fn(examples, generator=generator)
            mask = batch.get("attention_mask")  # counted on the CPU: no GPU sync for a log number
            tokens += float(mask.sum()) if mask is not None else float(batch["input_ids"].numel())
            batches.append(batch)
        shares = self._target_shares(batches)
        # DDP averages gradients over processes; exact shares already divide by the global count.
        scale = float(self.dist.world_size) if shares is not None else 1.0 / accumulation
        values: list[Tensor] = []  # per micro-batch: loss, then metrics (one transfer at the end)
        names: list[str] = []
        for i, (slot, batch) in enumerate(zip(self.slots, batches)):
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            # Dropout draws depend on (seed, step, slot) only: resume- and world-size-invariant.
            torch.manual_seed(derived_seed(cfg.seed, self.step, slot, _PURPOSE_DROPOUT))
            last = i == accumulation - 1
            sync = self.train_model.no_sync() if self.dist.enabled and not last else nullcontext()
            with sync:
                with autocast(self.device, self.precision):
                    if shares is None:
                        loss, metrics = self.objective(self.train_model, batch)
                    else:
                        loss, metrics = self.objective(self.train_model, batch, shares=shares[i])
                self.scaler.scale(loss * scale).backward()
            if i == 0:
                names = list(metrics)
            values.append(
                torch.stack([loss.detach().float(), *(metrics[n].float() for n in names)])
            )
        sums = torch.stack(values).cpu().double().sum(0)
        if shares is None:  # the mean of the micro-batch means, and of the processes' means
            sums = distributed.all_reduce_mean(sums / accumulation)
        else:  # shares of the step's means: their sum over micro-batches and processes
            sums = distributed.all_reduce_sum(sums)
        loss_value = float(sums[0])
        metrics_out = {name: float(sums[1 + k]) for k, name in enumerate(names)}
        if not math.isfinite(loss_value):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingDiverged(self._diverged_message("loss", loss_value))
        self.scaler.unscale_(self.optimizer)
        params = [p for p in self.model.parameters() if p.grad is not None]
        if cfg.max_grad_norm is not None:
            grad_norm = float(nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
        else:
            grad_norm = float(
                torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
            )
        if not math.isfinite(grad_norm) and not self.scaler.is_enabled():
            # fp16's GradScaler skips such steps itself and lowers the scale; elsewhere it is fatal.
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingDiverged(self._diverged_message("gradient norm", grad_norm))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_value, metrics_out, tokens, grad_norm

    def _target_shares(self, batches: list[dict[str, Tensor]]) -> list[dict[str, float]] | None:
        """Each micro-batch's share of the step's targets, per kind (None: a plain objective).

        Counted on the CPU and summed over processes in one all-reduce per optimizer step.
        """
        count = getattr(self.objective, "target_counts", None)
        if count is None:
            return None
        counts = [count(batch) for batch in batches]
        kinds = sorted(set().union(*counts))
        local = torch.tensor(
            [sum(c.get(kind, 0.0) for c in counts) for kind in kinds], dtype=torch.float64
        )
        total = dict(zip(kinds, distributed.all_reduce_sum(local).tolist()))
        return [
            {kind: c.get(kind, 0.0) / total[kind] if total[kind] > 0 else 0.0 for kind in kinds}
            for c in counts
        ]

    def _diverged_message(self, what: str, value: float) -> str:
        where = self.checkpoint_dir
        kept = (
            f"the last good checkpoint is kept at {where}"
            if where and where.exists()
            else "no checkpoint was written yet"
        )
        return (
            f"training diverged: the {what} became {value} at step {self.step + 1} "
            f"(lr={self.current_lr():.2e}, precision={self.precision}); the weights were not "
            f"updated with it and {kept}. Try a lower lr, a longer warmup, max_grad_norm=1.0, "
            "or pre_layer_norm=True."
        )

    def _due(self, every_steps: int | None, every_minutes: float | None, last_time: float) -> bool:
        if every_steps is not None and self.step % every_steps == 0:
            return True
        return every_minutes is not None and self.elapsed_s - last_time >= 60.0 * every_minutes

    def _check_stop(self, any_rank_requested: bool) -> str | None:
        if any_rank_requested or self._stop_requested:
            return self._stop_requested or "signal"
        if self.config.max_steps is not None and self.step >= self.config.max_steps:
            return "max_steps"
        if self.config.max_minutes is not None and self.elapsed_s >= 60.0 * self.config.max_minutes:
            return "time"
        return None

    def _install_signal_handlers(self) -> dict[int, Any]:
        """SIGINT/SIGTERM finish the current step, save, and return; a second signal acts at once."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}

        def handler(signum: int, frame: Any) -> None:
            self._stop_requested = signal.Signals(signum).name
            signal.signal(signum, previous[signum])

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        return previous

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _progress_bar(self) -> Any:
        if not (self.config.progress and self.dist.is_main):
            return None
        from tqdm.auto import tqdm

        if self.config.max_steps is not None:
            return tqdm(
                total=self.config.max_steps, initial=self.step, desc="pretrain", unit="step"
            )
        total = 60.0 * self.config.max_minutes
        return tqdm(
            total=round(total),
            initial=round(self.elapsed_s),
            desc="pretrain",
            unit="s",
            bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}s [{elapsed}<{remaining}{postfix}]",
        )

    def _update_bar(self, bar: Any) -> None:
        if bar is None:
            return
        if self.config.max_steps is not None:
            bar.update(self.step - bar.n)
        else:
            bar.update(min(self.elapsed_s, bar.total) - bar.n)


def _format_eval(record: dict[str, Any]) -> str:
    parts = [
        f"step {record['step']}",
        f"eval MLM loss {record['eval_mlm_loss']:.3f}",
        f"masked-token accuracy {record['eval_mlm_accuracy']:.1%}",
    ]
    for task in ("nsp", "sop"):
        if f"eval_{task}_accuracy" in record:
            parts.append(f"{task.upper()} accuracy {record[f'eval_{task}_accuracy']:.1%}")
    if "eval_rtd_accuracy" in record:
        parts.append(
            f"replaced-token accuracy {record['eval_rtd_accuracy']:.1%} (base rate "
            f"{record['eval_rtd_base_rate']:.1%}), AUC {record['eval_rtd_auc']:.3f}"
        )
    return " | ".join(parts)


__all__ = [
    "Trainer",
    "TrainingConfig",
    "TrainingDiverged",
    "History",
    "Objective",
    "ExactObjective",
    "ModelLoss",
    "EpochSampler",
    "evaluate_pretraining",
    "evaluate_rtd",
    "model_inputs",
    "derived_seed",
    "count_targets",
]
