"""Batches for pre-training: pad, build attention masks, and mask tokens for MLM.

Dynamic masking (RoBERTa): `PretrainingCollator` masks every batch afresh, so each epoch
sees new masks. Static masking (BERT): `StaticMaskedDataset` masks each example `duplicates`
times once, up front; the collator then only pads, and the masks repeat every epoch.

Randomness is explicit. The training engine may pass a per-step `torch.Generator`, so a run
that is interrupted and resumed masks identically. Without one, the collator uses its own
generator, re-seeded in each DataLoader worker from the worker's seed: workers differ from
each other and from epoch to epoch, and a DataLoader given a seeded `generator=` repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset, get_worker_info

from course_lib.data.pairs import build_pretraining_dataset  # noqa: F401  (re-exported)
from course_lib.labels import IGNORE_INDEX
from course_lib.objectives.masking import MaskingConfig, build_special_tokens_mask, mask_tokens
from course_lib.tokenization.tokenizer import NO_WORD, CourseTokenizer

SENTENCE_LABELS = ("next_sentence_label", "sentence_order_label")


def _as_list(value: Any) -> list[int]:
    return value.tolist() if isinstance(value, torch.Tensor) else list(value)


def pad_rows(rows: Sequence[Sequence[int]], width: int, fill: int) -> torch.Tensor:
    """Stack rows of different lengths into a [len(rows), width] LongTensor."""
    out = torch.full((len(rows), width), fill, dtype=torch.long)
    for i, row in enumerate(rows):  # one copy per example, not per token
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


class PretrainingCollator:
    """Turn example dicts into padded tensors: input_ids, attention_mask, token_type_ids,
    labels (MLM targets, -100 elsewhere) and next_sentence_label / sentence_order_label."""

    def __init__(
        self,
        tokenizer: CourseTokenizer,
        masking: MaskingConfig | None = MaskingConfig(),
        pad_to_multiple_of: int | None = None,
        seed: int = 0,
    ) -> None:
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of={pad_to_multiple_of} must be >= 1 or None.")
        self.tokenizer = tokenizer
        self.masking = masking
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = seed
        self.pad_token_id = tokenizer.pad_token_id
        self.mask_token_id = tokenizer.mask_token_id
        self.vocab_size = tokenizer.vocab_size
        self.special_ids = torch.tensor(tokenizer.special_ids, dtype=torch.long)
        every_id = torch.arange(self.vocab_size)
        self.non_special_ids = every_id[~torch.isin(every_id, self.special_ids)]
        self._generator = torch.Generator().manual_seed(seed)
        self._worker_key: tuple[int, int] | None = None

    def _default_generator(self) -> torch.Generator:
        """The internal generator, re-seeded once per DataLoader worker (and per epoch)."""
        info = get_worker_info()
        key = None if info is None else (info.id, info.seed)
        if key != self._worker_key:
            self._worker_key = key
            # info.seed = the loader's per-epoch base seed + worker id; mix in our own seed.
            mixed = (info.seed + self.seed * 0x9E3779B97F4A7C15) % (2**63) if info else self.seed
            self._generator = torch.Generator().manual_seed(mixed)
        return self._generator

    def __call__(
        self, examples: Sequence[dict[str, Any]], generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        if len(examples) == 0:
            raise ValueError("Cannot collate an empty list of examples.")
        if any("input_ids" not in e for e in examples):
            raise ValueError("Every example needs 'input_ids' (build them with data.pairs).")
        ids = [_as_list(e["input_ids"]) for e in examples]
        width = max(len(r) for r in ids)
        if self.pad_to_multiple_of:
            m = self.pad_to_multiple_of
            width = -(-width // m) * m
        input_ids = pad_rows(ids, width, self.pad_token_id)
        attention_mask = pad_rows([[1] * len(r) for r in ids], width, 0)
        types = [_as_list(e.get("token_type_ids", [0] * len(r))) for e, r in zip(examples, ids)]
        batch = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": pad_rows(types, width, 0),
        }

        has_labels = ["labels" in e for e in examples]
        if all(has_labels):  # already masked (StaticMaskedDataset): pad only
            batch["labels"] = pad_rows(
                [_as_list(e["labels"]) for e in examples], width, IGNORE_INDEX
            )
        elif any(has_labels):
            raise ValueError(
                "Some examples carry 'labels' and some do not; do not mix "
                "statically masked examples with unmasked ones in one batch."
            )
        elif self.masking is not None:
            word_ids = None
            if self.masking.whole_word:
                if not all("word_ids" in e for e in examples):
                    raise ValueError(
                        "Whole-word masking needs 'word_ids' in every example; "
                        "build examples with course_lib.data.pairs."
                    )
                word_ids = pad_rows([_as_list(e["word_ids"]) for e in examples], width, NO_WORD)
            special = build_special_tokens_mask(input_ids, self.special_ids, attention_mask)
            batch["input_ids"], batch["labels"] = mask_tokens(
                input_ids,
                special,
                self.mask_token_id,
                self.vocab_size,
                self.masking,
                generator if generator is not None else self._default_generator(),
                word_ids=word_ids,
                non_special_ids=self.non_special_ids,
            )

        for key in SENTENCE_LABELS:
            present = [key in e for e in examples]
            if all(present):
                batch[key] = torch.tensor([int(e[key]) for e in examples], dtype=torch.long)
            elif any(present):
                raise ValueError(f"Only some examples have {key!r}; build them with one builder.")
        return batch


class StaticMaskedDataset(Dataset):
    """BERT-style static masking: `duplicates` masked copies of each example, fixed forever.

    Item i is copy i // len(examples) of example i % len(examples); every epoch sees the
    same masks. Masked ids and labels are stored as int32 tensors, not Python lists.
    """

    def __init__(
        self,
        examples: Sequence[dict[str, Any]],
        masking: PretrainingCollator | MaskingConfig,
        duplicates: int = 10,
        seed: int = 0,
        tokenizer: CourseTokenizer | None = None,
        batch_size: int = 512,
    ) -> None:
        if duplicates < 1:
            raise ValueError(f"duplicates={duplicates} must be >= 1 (BERT used 10).")
        if not examples:
            raise ValueError("No examples to mask; build them with data.pairs first.")
        if isinstance(masking, PretrainingCollator):
            collator = masking
        elif tokenizer is None:
            raise ValueError("Pass tokenizer=... with a MaskingConfig (or pass a collator).")
        else:
            collator = PretrainingCollator(tokenizer, masking)
        if collator.masking is None:
            raise ValueError("The collator has masking=None; give it a MaskingConfig.")
        self.examples = [{k: v for k, v in e.items() if k != "labels"} for e in examples]
        self.duplicates = duplicates
        self.lengths = torch.tensor([len(e["input_ids"]) for e in self.examples])
        width = int(self.lengths.max())
        generator = torch.Generator().manual_seed(seed)
        self.masked_ids = torch.empty(duplicates, len(self.examples), width, dtype=torch.int32)
        self.labels = torch.empty_like(self.masked_ids)
        for copy in range(duplicates):
            for start in range(0, len(self.examples), batch_size):
                chunk = self.examples[start : start + batch_size]
                batch = collator(chunk, generator=generator)
                w = min(batch["input_ids"].shape[1], width)  # pad_to_multiple_of may overshoot
                rows = slice(start, start + len(chunk))
                self.masked_ids[copy, rows, :w] = batch["input_ids"][:, :w].int()
                self.labels[copy, rows, :w] = batch["labels"][:, :w].int()

    def __len__(self) -> int:
        return self.duplicates * len(self.examples)

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} items.")
        copy, j = divmod(index % len(self), len(self.examples))
        n = int(self.lengths[j])
        item = dict(self.examples[j])
        item["input_ids"] = self.masked_ids[copy, j, :n].tolist()
        item["labels"] = self.labels[copy, j, :n].tolist()
        return item
