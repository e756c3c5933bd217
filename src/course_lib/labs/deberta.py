"""Mechanism labs of chapter 04 (DeBERTa): which disentangled-attention term does what.

DeBERTa scores query i against key j with three terms (He et al. 2021, §3.1, eq. 2):

    c2c  Q_c(i) · K_c(j)           content against content (BERT's only term)
    c2p  Q_c(i) · K_r(δ(i, j))     the QUERY's content against the relative distance
    p2c  K_c(j) · Q_r(δ(i, j))     the KEY's content against the relative distance

Both labs use one token language. Every token is a pair (symbol, offset): a symbol from 12 and an
offset from 1..6. The two labs read the same sequences in two mirrored ways:

c2p_needed: the label at i is the symbol of the token `offset(x_i)` places to the LEFT, so the
    query's own content says which distance to read. Only c2p couples query content to distance.
p2c_needed: the label at i is the symbol of the one token j < i that points AT i
    (j + offset(x_j) = i), so the key's content says for which distance it is the answer. Only
    p2c couples key content to distance.

All arms are the same one-layer, one-head DeBERTa with no absolute positions
(`position_biased_input=False`); they differ only in `pos_att_type`: ["c2p", "p2c"] (full),
["p2c"] (no c2p), ["c2p"] (no p2c) and [] (content only: c2c, a model blind to order).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from course_lib.config import DebertaConfig, tiny_config
from course_lib.labels import IGNORE_INDEX
from course_lib.labs.core import choose, fit, lab, seed_everything
from course_lib.models.deberta import DebertaForTokenClassification

N_SYMBOLS = 12  # what a label can be: chance is 1/12
# (B, T) ids -> (B, T) labels: look_back_labels or pointed_at_labels
LabelRule = Callable[[Tensor], Tensor]
N_OFFSETS = 6  # offsets 1..6: how far a token looks back (c2p task) or points ahead (p2c task)
LENGTH = 24  # tokens per sequence; positions 0..N_OFFSETS-1 carry no label (incomplete window)
VOCAB = N_SYMBOLS * N_OFFSETS  # token id = (offset - 1) * N_SYMBOLS + symbol: 72 tokens

# The arms: the same model with one pos_att_type each (c2c is always on).
POSITION_TERMS = {
    "c2p_p2c": ["c2p", "p2c"],
    "no_c2p": ["p2c"],
    "no_p2c": ["c2p"],
    "c2c_only": [],
}


def make_tokens(symbols: Tensor, offsets: Tensor) -> Tensor:
    """Token ids of (symbol, offset) pairs: symbols in 0..N_SYMBOLS-1, offsets in 1..N_OFFSETS."""
    return (offsets - 1) * N_SYMBOLS + symbols


def symbol_of(ids: Tensor) -> Tensor:
    """The symbol (0..N_SYMBOLS-1) a token carries: what a label reads."""
    return ids % N_SYMBOLS


def offset_of(ids: Tensor) -> Tensor:
    """The offset (1..N_OFFSETS) a token carries: a distance decided by content alone."""
    return ids // N_SYMBOLS + 1


def sample_tokens(batch: int, generator: torch.Generator, length: int = LENGTH) -> Tensor:
    """(batch, length) token ids, every token uniform and independent: symbols and offsets
    carry no order, so whatever a label needs from positions must come from attention."""
    return torch.randint(0, VOCAB, (batch, length), generator=generator)


def look_back_labels(ids: Tensor) -> Tensor:
    """c2p task: (B, T) labels, label[i] = symbol of x[i - offset(x[i])]; the query's content
    picks the distance. Positions i < N_OFFSETS (window not complete) get IGNORE_INDEX."""
    positions = torch.arange(ids.shape[1], device=ids.device)  # (T,)
    source = (positions - offset_of(ids)).clamp(min=0)  # (B, T): the position to read
    labels = symbol_of(torch.gather(ids, 1, source))  # (B, T)
    return labels.masked_fill(positions < N_OFFSETS, IGNORE_INDEX)


def pointers_at(ids: Tensor) -> tuple[Tensor, Tensor]:
    """For every position i: how many tokens j < i point at it (j + offset(x[j]) = i), and the
    summed symbols of those pointers (the pointer's symbol when there is exactly one). (B, T) each."""
    count = torch.zeros_like(ids)
    symbols = torch.zeros_like(ids)
    for d in range(1, N_OFFSETS + 1):
        before = ids[:, :-d]  # (B, T - d): the token d places to the left of positions d..T-1
        hit = offset_of(before) == d  # does it point exactly d places ahead, i.e. here?
        count[:, d:] += hit
        symbols[:, d:] += hit * symbol_of(before)
    return count, symbols


def pointed_at_labels(ids: Tensor) -> Tensor:
    """p2c task: (B, T) labels, label[i] = symbol of the one token j < i with j + offset(x[j]) = i;
    the key's content says where it is the answer. Positions with no pointer or several, and
    i < N_OFFSETS, get IGNORE_INDEX (about 40% of the positions keep a label)."""
    count, symbols = pointers_at(ids)
    positions = torch.arange(ids.shape[1], device=ids.device)  # (T,)
    return symbols.masked_fill((count != 1) | (positions < N_OFFSETS), IGNORE_INDEX)


def fixed_offset_accuracy() -> float:
    """What a model gets that reads one fixed distance d for every position (the best a model
    can do with the decisive term missing: distances without the content that chooses them):
    right when the answer sits at d (1 in N_OFFSETS), else by a coincidence of symbols."""
    return 1 / N_OFFSETS + (1 - 1 / N_OFFSETS) / N_SYMBOLS


def lab_config(pos_att_type: list[str], hidden_size: int = 32) -> DebertaConfig:
    """The labs' DeBERTa: one layer, one head (several heads could each fix one distance and let
    the feed-forward pick a head by content), no absolute positions, distances 1..LENGTH kept
    apart (no buckets, no clipping). Arms differ only in `pos_att_type`."""
    return tiny_config(
        DebertaConfig,
        VOCAB,
        hidden_size=hidden_size,
        layers=1,
        heads=1,
        max_positions=LENGTH,
        num_labels=N_SYMBOLS,
        position_buckets=-1,
        max_relative_positions=LENGTH,
        position_biased_input=False,
        pos_att_type=list(pos_att_type),
        initializer_range=0.1,
    )


def _term_accuracy(
    seed: int,
    labels_of: LabelRule,
    pos_att_type: list[str],
    steps: int,
    batch: int,
    device: torch.device,
) -> float:
    """Train one arm on the seed's data stream; accuracy on the labelled positions of 512 fresh
    sequences (the same for every arm of the seed)."""
    generator = seed_everything(seed)  # same data stream and same initial weights in every arm
    model = DebertaForTokenClassification(lab_config(pos_att_type)).to(device)

    def step_loss(_step: int) -> Tensor:
        ids = sample_tokens(batch, generator)
        return model(ids.to(device), labels=labels_of(ids).to(device)).loss

    fit(model, step_loss, steps, lr=5e-3)
    ids = sample_tokens(512, torch.Generator().manual_seed(20_000 + seed))
    labels = labels_of(ids)
    with torch.no_grad():
        predicted = model(ids.to(device)).logits.argmax(-1).cpu()  # (512, T)
    kept = labels != IGNORE_INDEX
    return float((predicted[kept] == labels[kept]).float().mean())


def _budget(preset: str) -> tuple[int, int]:
    steps = choose(preset, fast=80, live=200, full=300, gpu=1000)
    batch = choose(preset, fast=32, live=64, gpu=256)
    return steps, batch


_PAPER = (
    "DeBERTa (He et al. 2021) §3.1 argues both cross terms are needed; Table 4 (base models, "
    "Wikipedia + BookCorpus): removing C2P costs 0.4/0.5 MNLI-m/mm, 0.5 SQuAD v1.1 F1, 1.2 SQuAD "
    "v2.0 F1 and 2.4 RACE points (86.3/86.2, 92.1, 82.5, 71.7 -> 85.9/85.7, 91.6, 81.3, 69.3); "
    "removing P2C costs 0.3/0.4, 0.4, 1.7 and 2.1 (-> 86.0/85.8, 91.7, 80.8, 69.6)."
)


def _metric(target: str) -> str:
    """What both labs report: accuracy on `target`, with chance and the best one fixed distance."""
    return (
        f"accuracy on {target} (chance 1/{N_SYMBOLS}; one fixed distance for all: "
        f"{fixed_offset_accuracy():.3f})"
    )


def _arm_accuracies(
    seed: int, preset: str, device: torch.device, labels_of: LabelRule, arms: tuple[str, ...]
) -> dict[str, float]:
    """Train every arm (a set of position terms) on one labelling rule; accuracy per arm."""
    steps, batch = _budget(preset)
    return {
        arm: _term_accuracy(seed, labels_of, POSITION_TERMS[arm], steps, batch, device)
        for arm in arms
    }


# The two labs are mirror images: the same chapter, paper and prediction (the full model wins).
term_lab = partial(lab, "04_deberta_distil", expected_sign="+", paper=_PAPER)
C2P_ARMS = ("c2p_p2c", "no_c2p", "no_p2c", "c2c_only")
P2C_ARMS = ("c2p_p2c", "no_p2c", "no_c2p", "c2c_only")


@term_lab(arms=C2P_ARMS, metric=_metric("the symbol at i - offset(x_i)"))
def c2p_needed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Is the content-to-position term needed when a token's own content says how far back to
    look? Accuracy at reading the symbol offset(x_i) places to the left.

    Why: The distance to read is a function of the query's content, and tokens are i.i.d., so
    neither content nor absolute position alone predicts the label, and with no absolute
    positions c2c is blind to order. In one head only c2p, Q_c(i) · K_r(i - j), couples the
    query's content to the distance; p2c couples the KEY's content to it, which is independent
    of the offset the query needs."""
    return _arm_accuracies(seed, preset, device, look_back_labels, C2P_ARMS)


@term_lab(arms=P2C_ARMS, metric=_metric("the symbol of the token j < i with j + offset(x_j) = i"))
def p2c_needed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Is the position-to-content term needed when a token's content says for which later
    position it is the answer? Accuracy at naming the one token that points at i.

    Why: The mirror image: the distance is a function of the KEY's content, so the right key is
    the one whose offset equals its distance to the query, a product of key content and
    distance. Only p2c, K_c(j) · Q_r(i - j), scores that pair; without it one head's weights
    factor into a content part times a distance part (c2c + c2p), which cannot single out
    'offset = distance' among the six keys before the query."""
    return _arm_accuracies(seed, preset, device, pointed_at_labels, P2C_ARMS)
