"""The pretraining objectives by name, and how many targets of each kind a batch holds.

Data (which examples to build), the training config (which objective to run) and the objectives
(how to weight each micro-batch of an exact big batch) all read these definitions.
"""

from __future__ import annotations

from torch import Tensor

from course_lib.labels import IGNORE_INDEX

# "rtd": replaced-token detection (ELECTRA), on the same examples as "mlm".
OBJECTIVES = ("mlm", "mlm+nsp", "mlm+sop", "rtd")

# The types an objective works with (course_lib.training.engine.Objective):
Batch = dict[str, Tensor]  # a collator's batch: input_ids, attention_mask, labels, ...
Shares = dict[str, float]  # per kind of target: this micro-batch's share of the step's targets
LossAndMetrics = tuple[Tensor, dict[str, Tensor]]  # a scalar loss, and scalar metrics


def count_targets(batch: Batch) -> dict[str, float]:
    """How many targets each kind of mean loss averages over, in this batch (CPU tensors: cheap).

    "mlm": the masked tokens (labels != -100), "sentence": the NSP/SOP labels (one per pair),
    "tokens": the real tokens (attention_mask == 1; DistilBERT's cosine loss averages over them).
    """
    counts: dict[str, float] = {}
    labels = batch.get("labels")
    if labels is not None:
        counts["mlm"] = float((labels != IGNORE_INDEX).sum())
    sentence = batch.get("next_sentence_label", batch.get("sentence_order_label"))
    if sentence is not None:
        counts["sentence"] = float((sentence != IGNORE_INDEX).sum())
    mask = batch.get("attention_mask")
    counts["tokens"] = float(mask.sum()) if mask is not None else float(batch["input_ids"].numel())
    return counts


__all__ = ["OBJECTIVES", "Batch", "LossAndMetrics", "Shares", "count_targets"]
