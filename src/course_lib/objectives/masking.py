"""Masked language modelling inputs: choose tokens to predict, hide most of them.

BERT picks 15% of the (non-special) tokens as prediction targets. Of those, 80% become
[MASK], 10% become a random token and 10% stay unchanged, so the model cannot learn that
only [MASK] positions matter. Variants, all from one vectorised routine:

- whole-word masking: the pieces of one word (tok ##en ##ization) are picked together;
- n-gram / span masking (ALBERT, max_ngram=3): runs of 1..n units with P(n) proportional
  to 1/n are picked together, still covering `mlm_probability` of the units on average.

Selection is a Bernoulli draw per unit, as in transformers' DataCollatorForLanguageModeling
(the original BERT took exactly round(15%) per sequence); the rate matches in expectation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from course_lib.labels import IGNORE_INDEX


@dataclass
class MaskingConfig:
    """How many tokens to select and what to do with them; checked on creation."""

    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    whole_word: bool = False
    max_ngram: int = 1

    def __post_init__(self) -> None:
        if not 0.0 < self.mlm_probability <= 1.0:
            raise ValueError(
                f"mlm_probability={self.mlm_probability} must be in (0, 1]; BERT uses 0.15."
            )
        for name in ("mask_replace_prob", "random_replace_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value} must be in [0, 1]; BERT uses 0.8 and 0.1.")
        if self.mask_replace_prob + self.random_replace_prob > 1.0 + 1e-9:
            raise ValueError(
                f"mask_replace_prob + random_replace_prob = "
                f"{self.mask_replace_prob + self.random_replace_prob} exceeds 1; the rest "
                "(1 - both) is the share left unchanged."
            )
        if not isinstance(self.max_ngram, int) or self.max_ngram < 1:
            raise ValueError(f"max_ngram={self.max_ngram!r} must be an int >= 1 (ALBERT: 3).")

    @property
    def keep_prob(self) -> float:
        """Share of selected tokens left unchanged (BERT: 0.1)."""
        return max(0.0, 1.0 - self.mask_replace_prob - self.random_replace_prob)


def ngram_length_probs(max_ngram: int) -> torch.Tensor:
    """P(n) for n = 1..max_ngram, proportional to 1/n as in ALBERT: short spans are common."""
    weights = 1.0 / torch.arange(1, max_ngram + 1, dtype=torch.float64)
    return weights / weights.sum()


@lru_cache(maxsize=64)
def span_start_probability(mlm_probability: float, max_ngram: int) -> float:
    """Probability q that a span starts at a unit, so that spans cover `mlm_probability`.

    A unit is covered unless no span reaching it started 0, 1, ... n-1 units earlier:
    P(covered) = 1 - prod_k (1 - q * P(length > k)). Solved for q by bisection (once per
    config), so the masking rate is right even though overlapping spans share units.
    """
    probs = ngram_length_probs(max_ngram).tolist()
    survive = [sum(probs[k:]) for k in range(max_ngram)]  # P(length > k)

    def coverage(q: float) -> float:
        miss = 1.0
        for s in survive:
            miss *= 1.0 - q * s
        return 1.0 - miss

    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if coverage(mid) < mlm_probability else (low, mid)
    return (low + high) / 2


def build_special_tokens_mask(
    input_ids: torch.Tensor,
    special_ids: list[int] | torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """True where a token is special ([CLS], [SEP], [PAD], ...) or padding: never selected."""
    special = torch.as_tensor(special_ids, dtype=input_ids.dtype, device=input_ids.device)
    mask = torch.isin(input_ids, special)
    if attention_mask is not None:
        mask |= attention_mask == 0
    return mask


def _units(special_tokens_mask: torch.Tensor, word_ids: torch.Tensor | None) -> torch.Tensor:
    """Index of the masking unit of each position: the token itself, or its word.

    A new word starts wherever the word id changes or a special token sits, so word ids
    need only be contiguous runs (numbering may restart per segment).
    """
    batch, seq = special_tokens_mask.shape
    if word_ids is None:
        return torch.arange(seq, device=special_tokens_mask.device).expand(batch, seq)
    starts = torch.ones_like(special_tokens_mask)
    starts[:, 1:] = word_ids[:, 1:] != word_ids[:, :-1]
    starts |= special_tokens_mask | (word_ids < 0)
    return starts.long().cumsum(dim=1) - 1


def _select_units(
    batch: int, seq: int, config: MaskingConfig, generator: torch.Generator
) -> torch.Tensor:
    """Bool [batch, seq]: which units are covered by a selected span (length 1 if n=1).

    Span starts are drawn for units -(n-1)..seq-1, so units at the start of a row are as
    likely to be covered as any other (a span may begin "before" the row).
    """
    n = config.max_ngram
    gen_device = generator.device
    if n == 1:
        return torch.rand(batch, seq, generator=generator, device=gen_device) < (
            config.mlm_probability
        )
    q = span_start_probability(config.mlm_probability, n)
    width = seq + n - 1
    starts = torch.rand(batch, width, generator=generator, device=gen_device) < q
    # Span lengths by inverse CDF: length = 1 + number of CDF steps below a uniform draw.
    cdf = ngram_length_probs(n).cumsum(0)[:-1].float().to(gen_device)
    u = torch.rand(batch, width, generator=generator, device=gen_device)
    lengths = torch.bucketize(u, cdf, right=True) + 1
    covered = torch.zeros(batch, seq, dtype=torch.bool, device=gen_device)
    for k in range(n):  # a span starting k units before unit j covers it if longer than k
        origin = slice(n - 1 - k, n - 1 - k + seq)
        covered |= starts[:, origin] & (lengths[:, origin] > k)
    return covered


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    config: MaskingConfig,
    generator: torch.Generator,
    word_ids: torch.Tensor | None = None,
    non_special_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply MLM masking to a [batch, seq] LongTensor; returns (masked_input_ids, labels).

    labels hold the original id at selected positions and -100 elsewhere. Random
    replacements are drawn from `non_special_ids` (default: every id except the mask token
    and the ids found at special positions). Same generator state -> same masks.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq]; got shape {tuple(input_ids.shape)}.")
    if special_tokens_mask.shape != input_ids.shape or special_tokens_mask.dtype != torch.bool:
        raise ValueError(
            "special_tokens_mask must be a bool tensor shaped like input_ids; build it with "
            "build_special_tokens_mask(input_ids, tokenizer.special_ids, attention_mask)."
        )
    if config.whole_word:
        if word_ids is None:
            raise ValueError(
                "whole_word=True needs word_ids (from the tokenizer's encode/batch_encode); "
                "pass word_ids=... or set whole_word=False."
            )
        if word_ids.shape != input_ids.shape:
            raise ValueError("word_ids must have the same shape as input_ids.")
    device = input_ids.device
    batch, seq = input_ids.shape

    units = _units(special_tokens_mask, word_ids if config.whole_word else None)
    covered = _select_units(batch, seq, config, generator).to(device)
    selected = covered.gather(1, units) & ~special_tokens_mask

    if non_special_ids is None:
        banned = torch.cat(
            [input_ids[special_tokens_mask].unique(), torch.tensor([mask_token_id], device=device)]
        )
        pool = torch.arange(vocab_size, device=device)
        non_special_ids = pool[~torch.isin(pool, banned)]
    pool = non_special_ids.to(device)
    if pool.numel() == 0:
        raise ValueError("No non-special token ids to draw random replacements from.")

    gen_device = generator.device
    action = torch.rand(batch, seq, generator=generator, device=gen_device).to(device)
    random_ids = pool[
        torch.randint(pool.numel(), (batch, seq), generator=generator, device=gen_device).to(device)
    ]
    to_mask = selected & (action < config.mask_replace_prob)
    to_random = (
        selected
        & (action >= config.mask_replace_prob)
        & (action < config.mask_replace_prob + config.random_replace_prob)
    )

    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    masked = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(to_random, random_ids, masked)
    return masked, labels
