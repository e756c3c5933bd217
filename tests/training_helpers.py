"""Tiny models and a toy learnable dataset for the training-engine tests (seconds, not minutes).

The toy data repeat a motif of one or two random words ("7 7 7 7", "9 4 9 4 9"): a masked token
is a copy of a visible one, so a 2-layer model learns it in a few dozen steps and "it learns"
can be asserted.
The collator masks with the generator it is given, as the real PretrainingCollator does.
"""

from __future__ import annotations

import random

import torch

from course_lib import BertConfig
from course_lib.models import BertForMaskedLM, BertForPreTraining

PAD, CLS, SEP, MASK = 0, 1, 2, 3
FIRST_WORD = 4
VOCAB = 64


def tiny_config(**changes) -> BertConfig:
    sizes = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        pre_layer_norm=True,
    )
    sizes.update(changes)
    return BertConfig(**sizes)


def tiny_mlm(seed: int = 0, **changes) -> BertForMaskedLM:
    torch.manual_seed(seed)
    return BertForMaskedLM(tiny_config(**changes))


def tiny_pretraining(seed: int = 0, **changes) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(tiny_config(**changes))


def toy_examples(n: int, seed: int = 0, sentence_labels: bool = False) -> list[dict]:
    """n motif sequences of 8-20 words; with sentence_labels, a label that is 1 when the
    sequence runs backwards (a stand-in for SOP that the [CLS] vector can learn)."""
    rng = random.Random(seed)
    span = VOCAB - FIRST_WORD
    examples = []
    for _ in range(n):
        length, motif = rng.randint(8, 20), [rng.randrange(span) for _ in range(rng.randint(1, 2))]
        words = [FIRST_WORD + motif[i % len(motif)] for i in range(length)]
        example = {"input_ids": [CLS, *words, SEP]}
        if sentence_labels:
            flip = rng.random() < 0.5
            if flip:
                example["input_ids"] = [CLS, *reversed(words), SEP]
            example["sentence_order_label"] = int(flip)
        examples.append(example)
    return examples


class ToyCollator:
    """Pads, masks 15% of word tokens (at least one per batch) with the given generator."""

    def __init__(self, mask_prob: float = 0.15):
        self.mask_prob = mask_prob

    def __call__(self, examples: list[dict], generator: torch.Generator | None = None) -> dict:
        width = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), width), PAD, dtype=torch.long)
        for row, example in enumerate(examples):
            ids[row, : len(example["input_ids"])] = torch.tensor(example["input_ids"])
        attention_mask = (ids != PAD).long()
        words = ids >= FIRST_WORD
        masked = (torch.rand(ids.shape, generator=generator) < self.mask_prob) & words
        masked[0, 1] = True  # never an empty loss
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        batch = {
            "input_ids": ids.masked_fill(masked, MASK),
            "attention_mask": attention_mask,
            "token_type_ids": torch.zeros_like(ids),
            "labels": labels,
        }
        if "sentence_order_label" in examples[0]:
            batch["sentence_order_label"] = torch.tensor(
                [e["sentence_order_label"] for e in examples], dtype=torch.long
            )
        return batch
