"""Checks on model inputs, so mistakes fail with a clear message before any computation."""

from __future__ import annotations

import torch
from torch import Tensor

from course_lib.config.bert import EncoderConfig
from course_lib.labels import IGNORE_INDEX


def check_inputs(
    config: EncoderConfig,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    token_type_ids: Tensor | None = None,
    check_values: bool | None = None,
) -> None:
    """Raise ValueError for wrong shapes, dtypes or ranges (instead of an IndexError deep inside).

    Shapes and dtypes are metadata and always checked. The id ranges need the tensor's values:
    `check_values=None` (the default) reads them for CPU tensors only. On an accelerator,
    `int(ids.max())` would make the host wait for the device at every forward (a sync that
    stalls the pipeline of queued kernels on the hot path); there an out-of-range id still fails,
    as the embedding lookup's device-side assert. Pass True to check anyway (e.g. when debugging).
    """
    if not isinstance(input_ids, Tensor):
        raise ValueError(f"input_ids must be a torch.Tensor, got {type(input_ids).__name__}.")
    if input_ids.dim() != 2:
        hint = " Add a batch dimension with input_ids.unsqueeze(0)." if input_ids.dim() == 1 else ""
        raise ValueError(
            f"input_ids must be [batch, seq], got shape {tuple(input_ids.shape)}.{hint}"
        )
    if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}.")
    seq_len = input_ids.shape[1]
    if seq_len > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {seq_len} exceeds max_position_embeddings="
            f"{config.max_position_embeddings}; truncate the inputs (tokenizer max_length) "
            f"or build the model with a larger max_position_embeddings."
        )
    if check_values is None:
        check_values = input_ids.device.type == "cpu"
    if check_values and input_ids.numel():
        low, high = map(int, torch.aminmax(input_ids))  # one pass for both ends
        if low < 0 or high >= config.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"token id {bad} is outside the vocabulary [0, {config.vocab_size}); was the "
                f"tokenizer trained with a larger vocabulary than config.vocab_size?"
            )
    for name, other in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if other is not None and tuple(other.shape) != tuple(input_ids.shape):
            raise ValueError(
                f"{name} has shape {tuple(other.shape)} but input_ids has "
                f"{tuple(input_ids.shape)}; they must match."
            )
    if check_values and token_type_ids is not None and token_type_ids.numel():
        n_types = config.type_vocab_size
        low, high = map(int, torch.aminmax(token_type_ids))
        if low < 0 or high >= max(n_types, 1):
            raise ValueError(
                f"token_type_ids contain {high if high >= n_types else low}, but the model has "
                f"type_vocab_size={n_types} segment types (valid ids 0..{max(n_types, 1) - 1})."
            )


def check_labels(labels: Tensor, num_classes: int, what: str = "labels") -> None:
    """Raise ValueError for a label outside [0, num_classes) other than -100 (ignored).

    Checked on CPU tensors only: there it costs a min/max over a few hundred targets, while on
    an accelerator it would wait for the device at every step (and CUDA reports such a label
    itself, as a device-side assert).
    """
    if labels.device.type != "cpu" or labels.numel() == 0:
        return
    kept = labels[labels != IGNORE_INDEX]
    if kept.numel() == 0:
        return
    low, high = int(kept.min()), int(kept.max())
    if low < 0 or high >= num_classes:
        bad = low if low < 0 else high
        raise ValueError(
            f"{what} contain {bad}, outside [0, {num_classes}) (use -100 where no prediction is "
            f"wanted); was the tokenizer trained with a larger vocabulary than the model's "
            f"vocab_size={num_classes}?"
        )
