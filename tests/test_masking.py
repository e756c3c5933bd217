"""MLM masking: rates (statistically, >= 100k tokens), invariants, whole words, spans, seeds."""

import math

import pytest
import torch

from course_lib.objectives.masking import (
    IGNORE_INDEX,
    MaskingConfig,
    build_special_tokens_mask,
    mask_tokens,
    ngram_length_probs,
    span_start_probability,
)

VOCAB = 1000
SPECIALS = [0, 1, 2, 3, 4]  # pad, unk, cls, sep, mask
PAD, CLS, SEP, MASK = 0, 2, 3, 4
NON_SPECIAL = torch.arange(5, VOCAB)


def make_batch(rows=1200, seq=128, seed=1, word_len=3):
    """[CLS] tokens [SEP] [PAD]...: ragged lengths, words of `word_len` pieces."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, seq), generator=g)
    lengths = torch.randint(seq // 2, seq + 1, (rows,), generator=g)
    pos = torch.arange(seq).expand(rows, seq)
    attention = (pos < lengths[:, None]).long()
    ids[:, 0] = CLS
    ids[pos == (lengths[:, None] - 1)] = SEP
    ids[attention == 0] = PAD
    words = (pos - 1).div(word_len, rounding_mode="floor")
    special = build_special_tokens_mask(ids, SPECIALS, attention)
    words[special] = -1
    return ids, attention, special, words


def run(config, seed=0, **kw):
    ids, attention, special, words = make_batch(**kw)
    masked, labels = mask_tokens(
        ids,
        special,
        MASK,
        VOCAB,
        config,
        torch.Generator().manual_seed(seed),
        word_ids=words,
        non_special_ids=NON_SPECIAL,
    )
    return ids, special, words, masked, labels


def within(observed, expected, n, sigmas=4.0):
    se = math.sqrt(expected * (1 - expected) / n)
    return abs(observed - expected) <= sigmas * se


def row_rate_check(selected, eligible, expected, sigmas=4.0):
    """Rate check whose standard error comes from per-row rates: valid when selections
    within a row are correlated (words, spans), because rows are independent."""
    per_row = (selected & eligible).sum(1).double() / eligible.sum(1).double()
    se = per_row.std().item() / math.sqrt(len(per_row))
    rate = (selected & eligible).sum().item() / eligible.sum().item()
    assert abs(rate - expected) <= sigmas * se, (rate, expected, se)


def test_config_is_validated():
    for bad in (
        dict(mlm_probability=0.0),
        dict(mlm_probability=1.5),
        dict(mask_replace_prob=-0.1),
        dict(random_replace_prob=1.2),
        dict(mask_replace_prob=0.8, random_replace_prob=0.3),
        dict(max_ngram=0),
    ):
        with pytest.raises(ValueError):
            MaskingConfig(**bad)
    with pytest.raises(ValueError, match="exceeds 1"):
        MaskingConfig(mask_replace_prob=0.9, random_replace_prob=0.2)
    assert MaskingConfig().keep_prob == pytest.approx(0.1)


@pytest.mark.parametrize("rates", [(0.15, 0.8, 0.1), (0.3, 0.5, 0.3)])
def test_token_rates_are_right_over_100k_tokens(rates):
    p, p_mask, p_random = rates
    config = MaskingConfig(
        mlm_probability=p, mask_replace_prob=p_mask, random_replace_prob=p_random
    )
    ids, special, _, masked, labels = run(config)
    eligible = ~special
    n = int(eligible.sum())
    assert n >= 100_000
    selected = labels != IGNORE_INDEX
    assert within(selected[eligible].float().mean().item(), p, n)
    k = int(selected.sum())
    to_mask = selected & (masked == MASK)
    changed = selected & (masked != MASK) & (masked != ids)
    kept = selected & (masked == ids)
    # A random draw equal to the original counts as "kept": expected shift 1/995, negligible.
    assert within(to_mask.sum().item() / k, p_mask, k)
    assert within(changed.sum().item() / k, p_random, k)
    assert within(kept.sum().item() / k, 1 - p_mask - p_random, k)


def test_invariants_specials_padding_and_labels():
    ids, special, _, masked, labels = run(MaskingConfig())
    selected = labels != IGNORE_INDEX
    assert not selected[special].any()  # [CLS], [SEP], [PAD] are never targets
    assert torch.equal(masked[special], ids[special])
    assert torch.equal(labels[selected], ids[selected])  # labels are the original ids
    assert torch.equal(masked[~selected], ids[~selected])  # nothing else changes
    randoms = masked[selected & (masked != MASK)]
    assert not torch.isin(randoms, torch.tensor(SPECIALS)).any()


def test_default_random_pool_avoids_specials_present_in_batch():
    ids, attention, special, _ = make_batch(rows=200)
    config = MaskingConfig(mask_replace_prob=0.0, random_replace_prob=1.0)
    masked, labels = mask_tokens(
        ids, special, MASK, VOCAB, config, torch.Generator().manual_seed(0)
    )
    replaced = masked[labels != IGNORE_INDEX]
    assert not torch.isin(replaced, torch.tensor([PAD, CLS, SEP, MASK])).any()
    assert replaced.unique().numel() > 500  # drawn from the whole vocabulary


def test_same_seed_same_masks_different_seed_different_masks():
    _, _, _, m1, l1 = run(MaskingConfig(), seed=7, rows=50)
    _, _, _, m2, l2 = run(MaskingConfig(), seed=7, rows=50)
    _, _, _, m3, l3 = run(MaskingConfig(), seed=8, rows=50)
    assert torch.equal(m1, m2) and torch.equal(l1, l2)
    assert not torch.equal(l1, l3)


def test_whole_word_masking_takes_all_pieces_of_a_word():
    ids, special, words, masked, labels = run(MaskingConfig(whole_word=True), word_len=3)
    selected = labels != IGNORE_INDEX
    eligible = ~special
    # Pieces of one word agree: compare each token with the next one of the same word.
    same_word = (words[:, 1:] == words[:, :-1]) & (words[:, 1:] >= 0)
    assert torch.equal(selected[:, 1:][same_word], selected[:, :-1][same_word])
    # The rate holds per word (and so per token).
    first_piece = eligible & torch.cat(
        [torch.ones_like(words[:, :1], dtype=torch.bool), words[:, 1:] != words[:, :-1]], dim=1
    )
    n_words = int(first_piece.sum())
    assert n_words > 30_000
    assert within(selected[first_piece].float().mean().item(), 0.15, n_words)
    row_rate_check(selected, eligible, 0.15)


def test_word_ids_need_only_be_contiguous_runs():
    # Numbering that restarts per segment (0 1 1 | 0 0 1) still gives distinct words.
    ids = torch.tensor([[CLS, 10, 11, 12, SEP, 13, 14, 15, SEP]])
    words = torch.tensor([[-1, 0, 1, 1, -1, 0, 0, 1, -1]])
    special = build_special_tokens_mask(ids, SPECIALS)
    config = MaskingConfig(mlm_probability=0.5, whole_word=True)
    groups = set()
    for seed in range(200):
        _, labels = mask_tokens(
            ids, special, MASK, VOCAB, config, torch.Generator().manual_seed(seed), word_ids=words
        )
        groups.add(tuple((labels[0] != IGNORE_INDEX).tolist()))
    for pattern in groups:
        assert pattern[2] == pattern[3] and pattern[5] == pattern[6]
    # Positions 1 and 5 (both word id 0) are different words: seen apart.
    assert any(p[1] != p[5] for p in groups)


@pytest.mark.parametrize("whole_word", [False, True])
def test_ngram_masking_keeps_the_rate_and_makes_spans(whole_word):
    config = MaskingConfig(max_ngram=3, whole_word=whole_word)
    ids, special, words, masked, labels = run(config, word_len=1 if not whole_word else 2)
    selected = labels != IGNORE_INDEX
    eligible = ~special
    row_rate_check(selected, eligible, 0.15)
    # Spans: runs of consecutive targets are longer than under independent token choices.
    _, _, _, _, token_labels = run(MaskingConfig())

    def mean_run(sel):
        starts = sel[:, 1:] & ~sel[:, :-1]
        return sel.sum().item() / (starts.sum().item() + sel[:, 0].sum().item())

    unit = 2 if whole_word else 1
    assert mean_run(selected) > 1.3 * unit
    assert mean_run(token_labels != IGNORE_INDEX) < 1.25


def test_span_start_probability_solves_the_coverage_equation():
    assert span_start_probability(0.15, 1) == pytest.approx(0.15)
    q = span_start_probability(0.15, 3)
    probs = ngram_length_probs(3).tolist()
    assert probs == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    survive = [1.0, 5 / 11, 2 / 11]
    assert 1 - math.prod(1 - q * s for s in survive) == pytest.approx(0.15, abs=1e-9)


def test_bad_inputs():
    ids, attention, special, words = make_batch(rows=4)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="whole_word=True needs word_ids"):
        mask_tokens(ids, special, MASK, VOCAB, MaskingConfig(whole_word=True), g)
    with pytest.raises(ValueError, match="bool tensor shaped like input_ids"):
        mask_tokens(ids, special.long(), MASK, VOCAB, MaskingConfig(), g)
    with pytest.raises(ValueError, match=r"\[batch, seq\]"):
        mask_tokens(ids[0], special[0], MASK, VOCAB, MaskingConfig(), g)
