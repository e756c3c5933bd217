"""Mechanism labs of chapter 04 (DeBERTa), part B: where position information enters.

relative_length_generalization: DeBERTa's relative attention against learned absolute positions
on a task whose rule is relative ("copy the token SHIFT places to the left"), trained at length 32
and tested at length 64. The two arms are the course's DebertaConfig with one switch flipped:
relative attention (clipped at k, no absolute input) or absolute positions added at the input
(no relative table). Clipped relative distances are the same rows at every length (Shaw et al.
2018); absolute rows 32-63 were never trained.

emd_absolute_position: the enhanced mask decoder on a task where a masked word's identity is a
function of its ABSOLUTE position p, and where relative distances cannot reveal p: every row
starts after a random number of pads, drawn independently of the real tokens (all that a
relative-only model sees), so those tokens say nothing about p. The arms differ only in `use_emd`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib.config import DebertaConfig, tiny_config
from course_lib.labels import IGNORE_INDEX
from course_lib.labs.core import choose, fit, lab, seed_everything
from course_lib.models.deberta import DebertaForMaskedLM

# Vocabulary shared by both labs: ids 0..3 are special, content words are 4..4+N_CONTENT-1.
PAD, MASK, CLS, SEP = 0, 1, 2, 3
N_SPECIAL = 4
N_CONTENT = 16


def small_deberta(vocab_size: int, max_positions: int, **switches: Any) -> DebertaConfig:
    """The DeBERTa both labs train (1 layer, H 32, 2 heads, init 0.1); `switches` set the
    position mechanism, the only thing their arms change."""
    return tiny_config(
        DebertaConfig,
        vocab_size,
        hidden_size=32,
        layers=1,
        heads=2,
        max_positions=max_positions,
        initializer_range=0.1,
        **switches,
    )


# ---------------------------------------------------------------------------------------------
# (c) relative_length_generalization
# ---------------------------------------------------------------------------------------------

SHIFT = 3  # the rule: the label at position i is the token at position i - SHIFT
TRAIN_LENGTH, TEST_LENGTH = 32, 64
CLIP = 8  # relative distances beyond +-CLIP share the table's first/last row (the paper's k)


def sample_shift_task(
    batch: int, length: int, generator: torch.Generator, shift: int = SHIFT
) -> tuple[Tensor, Tensor]:
    """(inputs, labels), both (batch, length): uniform content words, and at every position
    i >= shift the label is the input token at i - shift (IGNORE_INDEX before that). The rule
    names only a distance, so it is the same task at every length and every position."""
    ids = torch.randint(0, N_CONTENT, (batch, length), generator=generator) + N_SPECIAL
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, shift:] = ids[:, :-shift]
    return ids, labels


def position_config(arm: str, max_positions: int = TEST_LENGTH) -> DebertaConfig:
    """The two arms as one switch of the course's DebertaConfig (1 layer, H 32, 2 heads).

    "relative": DeBERTa's c2p + p2c attention over distances clipped at CLIP (plain clipping,
    no log buckets), no absolute positions at the input. "absolute": the same model with the
    relative table removed and BERT's learned absolute table added at the input. Both tables
    have `max_positions` >= 64 rows where they have one, so the length-64 test can run."""
    if arm == "relative":
        position = dict(position_buckets=-1, max_relative_positions=CLIP)
    elif arm == "absolute":
        position = dict(
            relative_attention=False,
            position_buckets=-1,
            pos_att_type=[],
            norm_rel_ebd="none",
            position_biased_input=True,
        )
    else:
        raise ValueError(f"arm must be 'relative' or 'absolute', got {arm!r}")
    return small_deberta(N_SPECIAL + N_CONTENT, max_positions, **position)


def _shift_accuracy(
    seed: int, arm: str, steps: int, batch: int, device: torch.device
) -> tuple[float, float]:
    """Train one arm at length 32; accuracy on held-out length-64 rows at the positions >= 32
    (never trained) and, as a check that the arm learned the rule, at positions 3-31."""
    generator = seed_everything(seed)  # same data stream and same shared initial weights
    model = DebertaForMaskedLM(position_config(arm)).to(device)

    def step_loss(_step: int) -> Tensor:
        ids, labels = sample_shift_task(batch, TRAIN_LENGTH, generator)
        return model(ids.to(device), labels=labels.to(device)).loss

    fit(model, step_loss, steps, lr=5e-3)
    test = torch.Generator().manual_seed(20_000 + seed)
    ids, labels = sample_shift_task(512, TEST_LENGTH, test)
    with torch.no_grad():
        logits = model(ids.to(device)).mlm_logits  # (B, 64, V)
    correct = (logits.argmax(-1).cpu() == labels).float()  # (B, 64)
    unseen = correct[:, TRAIN_LENGTH:].mean()  # positions 32-63: never seen in training
    seen = correct[:, SHIFT:TRAIN_LENGTH].mean()  # positions 3-31: trained
    return float(unseen), float(seen)


@lab(
    "04_deberta_distil",
    arms=("relative", "absolute", "absolute_seen"),
    expected_sign="+",
    metric=f"accuracy at positions 32-63 of length-64 rows (chance 1/{N_CONTENT}); "
    "absolute_seen: the absolute arm at positions 3-31, as trained",
)
def relative_length_generalization(
    seed: int, preset: str, device: torch.device
) -> dict[str, float]:
    """Trained on length 32, does the rule 'copy the token 3 to the left' still work at
    positions 32-63 of length-64 rows with relative distances, and with absolute ones?

    Paper: Shaw et al. 2018 (sec. 3.2): clipping the relative distance at k 'enables the model
    to generalize to sequence lengths not seen during training'; DeBERTa (He et al. 2021, sec.
    3.1) uses the same clipped distance delta(i, j) with 2k table rows.

    Why: The label at i is the token at i - 3 for every i, so the task is identical at every
    length; the relative arm meets only trained table rows at length 64 (distances are clipped
    at 8), while the absolute arm's rows 32-63 received no gradient in training."""
    steps = choose(preset, fast=120, live=250, full=300, gpu=800)
    batch = choose(preset, fast=32, gpu=128)
    relative, _ = _shift_accuracy(seed, "relative", steps, batch, device)
    absolute, absolute_seen = _shift_accuracy(seed, "absolute", steps, batch, device)
    return {"relative": relative, "absolute": absolute, "absolute_seen": absolute_seen}


# ---------------------------------------------------------------------------------------------
# (d) emd_absolute_position
# ---------------------------------------------------------------------------------------------

EMD_LENGTH = 64  # every row has 64 slots: L pads, [CLS], content, [SEP], R pads
MAX_PAD = 16  # the left padding L is uniform in 0..MAX_PAD-1
REAL_LENGTHS = (40, 48)  # the number of real tokens n is uniform in 40..48, independent of L
WORD_INDEX = (16, 32)  # a position word's index r among the real tokens: 16..31
SLOTS = 4  # masked position words per row (distinct r)
N_CLASSES = 8  # the position word at absolute slot p is word number p % N_CLASSES
MIDDLE = (WORD_INDEX[0], WORD_INDEX[1] + MAX_PAD - 1)  # slots p = L + r: 16..46, never an end
POSITION_WORDS = N_SPECIAL + N_CONTENT  # ids POSITION_WORDS .. POSITION_WORDS + N_CLASSES - 1


def position_word(p: Tensor) -> Tensor:
    """The word that belongs in absolute slot p: one of N_CLASSES words, by p mod N_CLASSES."""
    return POSITION_WORDS + p % N_CLASSES


def sample_slot_task(
    batch: int, generator: torch.Generator, slots: int = SLOTS, length: int = EMD_LENGTH
) -> tuple[Tensor, Tensor, Tensor]:
    """(inputs, attention_mask, labels), each (batch, length).

    Each row: L pads, [CLS], random content words, [SEP], then pads to `length`; n (the number
    of real tokens) and L are drawn independently. `slots` real tokens at distinct indices r in
    WORD_INDEX hold the position word of their absolute slot p = L + r; they are replaced by
    [MASK] and are the only labels. The real tokens (all that relative attention sees) are
    independent of L, and L is uniform over MAX_PAD values, a multiple of N_CLASSES: given
    everything a relative-only model sees, p mod N_CLASSES is exactly uniform."""
    rows = torch.arange(batch)[:, None]  # (B, 1)
    left = torch.randint(0, MAX_PAD, (batch, 1), generator=generator)  # (B, 1)
    n = torch.randint(REAL_LENGTHS[0], REAL_LENGTHS[1] + 1, (batch, 1), generator=generator)
    place = torch.arange(length)[None, :]  # (1, T)
    real = (place >= left) & (place < left + n)  # (B, T)
    ids = torch.randint(0, N_CONTENT, (batch, length), generator=generator) + N_SPECIAL
    ids[rows, left] = CLS
    ids[rows, left + n - 1] = SEP
    band = WORD_INDEX[1] - WORD_INDEX[0]
    r = torch.rand(batch, band, generator=generator).argsort(-1)[:, :slots] + WORD_INDEX[0]
    p = left + r  # (B, S) absolute slots
    ids[rows, p] = position_word(p)
    ids = ids.masked_fill(~real, PAD)
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[rows, p] = ids[rows, p]
    inputs = ids.clone()
    inputs[rows, p] = MASK
    return inputs, real.long(), labels


def emd_config(use_emd: bool) -> DebertaConfig:
    """DeBERTa (1 layer, H 32, relative attention clipped at CLIP, no absolute input) with or
    without the enhanced mask decoder: the one switch between the arms."""
    return small_deberta(
        POSITION_WORDS + N_CLASSES,
        EMD_LENGTH,
        position_buckets=-1,
        max_relative_positions=CLIP,
        use_emd=use_emd,
    )


def _slot_accuracy(seed: int, use_emd: bool, steps: int, batch: int, device: torch.device) -> float:
    """Train one arm on the padded slot task; accuracy on held-out masked middle slots."""
    generator = seed_everything(seed)
    model = DebertaForMaskedLM(emd_config(use_emd)).to(device)

    def step_loss(_step: int) -> Tensor:
        inputs, mask, labels = sample_slot_task(batch, generator)
        return model(inputs.to(device), mask.to(device), labels=labels.to(device)).loss

    fit(model, step_loss, steps, lr=5e-3)
    inputs, mask, labels = sample_slot_task(256, torch.Generator().manual_seed(20_000 + seed))
    with torch.no_grad():
        out = model(inputs.to(device), mask.to(device), labels=labels.to(device))
    predicted = out.mlm_logits.argmax(-1).cpu()  # (n_masked,), in the order of the labels
    return float((predicted == labels[labels != IGNORE_INDEX]).float().mean())


@lab(
    "04_deberta_distil",
    arms=("emd", "no_emd"),
    expected_sign="+",
    metric=f"accuracy on masked position words, slots 16-46 (chance 1/{N_CLASSES})",
)
def emd_absolute_position(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """When a masked word is determined by its absolute slot, does DeBERTa need the enhanced
    mask decoder's absolute positions to predict it?

    Paper: DeBERTa (He et al. 2021) sec. 3.2: in 'a new store opened beside the new mall' the
    local contexts of the masked 'store' and 'mall' are alike; absolute position is added just
    before the softmax (EMD). Table 4: -EMD costs 0.2/0.1 MNLI-m/mm, 0.3/0.3 SQuAD v1.1 F1/EM,
    1.2/1.3 SQuAD v2.0, 1.4 RACE.

    Why: Rows start after a random number of pads (0-15), drawn independently of the real
    tokens, so what relative attention sees is independent of the slot p = pads + index: the
    relative-only model is at chance (1/8) by construction, while the EMD adds the embedding of
    p."""
    steps = choose(preset, fast=60, live=150, full=200, gpu=600)
    batch = choose(preset, fast=32, gpu=128)
    return {
        "emd": _slot_accuracy(seed, True, steps, batch, device),
        "no_emd": _slot_accuracy(seed, False, steps, batch, device),
    }
