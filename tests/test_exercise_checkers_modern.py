"""The chapter 05 checkers (ELECTRA labels, ModernBERT's local mask, RoPE, a relative-score test)
accept correct answers and reject typical mistakes with specific feedback."""

import itertools
import math

import pytest
import torch

from course_lib.exercises import ExerciseError
from course_lib.exercises.modern import (
    SCORE_PANEL,
    check_discriminator_labels,
    check_local_attention_mask,
    check_relative_test,
    check_rotary,
)


def stub(*args):
    raise NotImplementedError()


# ----- 1. ELECTRA's discriminator input and labels


def good_discriminator(input_ids, labels, sampled, attention_mask):
    masked = labels != -100
    original = torch.where(masked, labels, input_ids)
    corrupted = input_ids.clone()
    corrupted[masked] = sampled
    disc = (corrupted != original).long()
    return corrupted, disc.masked_fill(attention_mask == 0, -100)


def discriminator_with(labels_fn=None, corrupt_fn=None):
    """The good answer with the labels (or the corrupted ids) computed another way."""

    def answer(input_ids, labels, sampled, attention_mask):
        corrupted, disc = good_discriminator(input_ids, labels, sampled, attention_mask)
        if corrupt_fn is not None:
            corrupted = corrupt_fn(input_ids, labels, sampled)
        if labels_fn is not None:
            disc = labels_fn(input_ids, labels, corrupted, attention_mask, disc)
        return corrupted, disc

    return answer


def transposed_fill(input_ids, labels, sampled):
    out = input_ids.clone()
    out.T[(labels != -100).T] = sampled
    return out


def test_discriminator_checker_accepts_correct_answers(capsys):
    check_discriminator_labels(good_discriminator)
    # float labels with whole numbers are fine too
    check_discriminator_labels(
        lambda *a: (good_discriminator(*a)[0], good_discriminator(*a)[1].float())
    )
    assert capsys.readouterr().out.count("Correct!") == 2


def pad_to(value):
    return lambda ids, lab, cor, mask, disc: torch.where(mask == 0, value, disc)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda *a: good_discriminator(*a)[1], "return a pair"),
        (lambda ids, *a: (ids, good_discriminator(ids, *a)[1]), "masked input unchanged"),
        (
            lambda ids, lab, s, m: (
                torch.where(lab != -100, lab, ids),
                good_discriminator(ids, lab, s, m)[1],
            ),
            "the original text",
        ),
        (discriminator_with(corrupt_fn=transposed_fill), "row-major order"),
        (lambda *a: (good_discriminator(*a)[0][:, :5], good_discriminator(*a)[1]), "batch's shape"),
        (
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: (
                    (lab != -100).long().masked_fill(mask == 0, -100)
                )
            ),
            r"every masked position as replaced, but at \[0, 5\]",
        ),
        (
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: (
                    (cor != ids).long().masked_fill(mask == 0, -100)
                )
            ),
            "compared with the masked input",
        ),
        (
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: torch.where(mask == 0, disc, 1 - disc)
            ),
            "inverted",
        ),
        (discriminator_with(labels_fn=pad_to(0)), "padding got label 0"),
        (discriminator_with(labels_fn=pad_to(1)), r"padding at \[1, 7\] has label 1"),
        (
            # no -100 at all: labels straight from the comparison (a bool tensor)
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: (
                    cor != torch.where(lab != -100, lab, ids)
                )
            ),
            "padding got label 0",
        ),
        (
            # the MLM habit: labels only where masked
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: torch.where(lab != -100, disc, -100)
            ),
            "only the masked positions got a label",
        ),
        (
            discriminator_with(
                labels_fn=lambda ids, lab, cor, mask, disc: torch.where(
                    (ids == 2) & (mask == 1), -100, disc
                )
            ),
            "is a real token",
        ),
        (discriminator_with(labels_fn=lambda *a: a[-1] + 0.5), "whole numbers"),
    ],
)
def test_discriminator_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_discriminator_labels(wrong)


# ----- 2. ModernBERT's local attention mask


def window_mask(attention_mask, local_attention, keep=None, keys=True, queries=False):
    t = attention_mask.shape[1]
    d = torch.arange(t)[:, None] - torch.arange(t)[None, :]
    band = (d.abs() <= local_attention // 2) if keep is None else keep(d, local_attention // 2)
    real = attention_mask.bool()
    out = band[None].expand(len(real), -1, -1).clone()
    if keys:
        out &= real[:, None, :]
    if queries:
        out &= real[:, :, None]
    return out


def good_local_mask(attention_mask, local_attention):
    return window_mask(attention_mask, local_attention)


def test_local_mask_checker_accepts_a_correct_answer(capsys):
    check_local_attention_mask(good_local_mask)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda m, w: window_mask(m, w, keep=lambda d, h: d.abs() < h), "not < 2"),
        (lambda m, w: window_mask(m, w, keep=lambda d, h: d.abs() <= h + 1), "not 3"),
        (lambda m, w: window_mask(m, w, keep=lambda d, h: d.abs() <= 2 * h), "WHOLE window"),
        (lambda m, w: window_mask(m, w, keep=lambda d, h: (d >= 0) & (d <= h)), "causal"),
        (lambda m, w: window_mask(m, w, keep=lambda d, h: (d >= 0) & (d <= 2 * h)), "causal"),
        (lambda m, w: window_mask(m, w, keys=False), "padding is not masked"),
        (lambda m, w: window_mask(m, w, keys=False, queries=True), "QUERIES"),
        (lambda m, w: window_mask(m, w, queries=True), "mask the KEY axis only"),
        (lambda m, w: ~good_local_mask(m, w), "inverted"),
        (lambda m, w: good_local_mask(m, w).float(), "return a bool tensor"),
        (lambda m, w: good_local_mask(m, w)[0], r"expected \(B, T, T\)"),
        (
            # sequence 1's padding forgotten (its mask read as all ones)
            lambda m, w: good_local_mask(m.clone().index_fill_(0, torch.tensor([1]), 1), w),
            r"sequence 1, query 7, key 9 should be False \(\|i - j\| = 2, key is padding\)",
        ),
    ],
)
def test_local_mask_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_local_attention_mask(wrong)


# ----- 3. rotary embeddings by hand


def rope(x, positions, theta, *, interleaved=False, exponent=2.0, offset=0, sign=1.0):
    d = x.shape[-1]
    freqs = theta ** (-exponent * torch.arange(d // 2).float() / d)
    angles = (positions.float() + offset)[:, None] * freqs
    cos, sin = angles.cos(), sign * angles.sin()
    if interleaved:
        a, b = x[:, 0::2], x[:, 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(1)
    a, b = x[:, : d // 2], x[:, d // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)


def test_rotary_checker_accepts_correct_answers(capsys):
    check_rotary(rope)

    def with_rotate_half(x, positions, theta):  # the library's formulation, written out
        d = x.shape[-1]
        inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
        angles = torch.cat([positions[:, None].float() * inv] * 2, -1)
        x1, x2 = x.chunk(2, -1)
        return x * angles.cos() + torch.cat((-x2, x1), -1) * angles.sin()

    check_rotary(with_rotate_half)
    assert capsys.readouterr().out.count("Correct!") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda x, p, t: x, "unchanged"),
        (lambda x, p, t: rope(x, p, t, interleaved=True), "interleaved pairs"),
        (lambda x, p, t: rope(x, p, t, sign=-1.0), "turned the wrong way"),
        (lambda x, p, t: rope(x, p, t, exponent=1.0), r"you used theta\^\(-p/d\)"),
        (lambda x, p, t: rope(x, p, t, exponent=-2.0), "sign is flipped"),
        (lambda x, p, t: rope(x, p, t, offset=1), "positions start at 0"),
        (lambda x, p, t: rope(x, p, 10_000.0), "theta is ignored"),
        (lambda x, p, t: rope(x, torch.arange(len(p)), t), "`positions` is ignored"),
        (lambda x, p, t: rope(x, p, t)[:-1], "keeps the shape"),
        (lambda x, p, t: rope(x, p, t).long(), "return floats"),
        (lambda x, p, t: rope(x, p, t) * 1.01, r"row 0 \(position 0\), feature \d+ should be"),
    ],
)
def test_rotary_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_rotary(wrong)


# ----- 4. a test for relative scores


def good_is_relative(score_fn, dim):
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        q, k = torch.randn(dim, generator=g), torch.randn(dim, generator=g)
        i, j = (int(v) for v in torch.randint(0, 50, (2,), generator=g))
        for a, b in ((i, j), (0, j), (i, 0)):
            s = int(torch.randint(1, 100, (1,), generator=g))
            if not math.isclose(
                float(score_fn(q, k, a, b)), float(score_fn(q, k, a + s, b + s)), abs_tol=1e-9
            ):
                return False
    return True


def exact_is_relative(score_fn, dim):
    """Right idea, but compares with == (RoPE's float rounding fails it)."""
    g = torch.Generator().manual_seed(1)
    for _ in range(30):
        q, k = torch.randn(dim, generator=g), torch.randn(dim, generator=g)
        for i, j in ((0, 3), (5, 1), (7, 7), (12, 40)):
            if float(score_fn(q, k, i, j)) != float(score_fn(q, k, i + 13, j + 13)):
                return False
    return True


def shifts_the_query_only(score_fn, dim):
    """Moves i alone: that changes i - j, so every position-dependent score fails it."""
    q, k = torch.ones(dim), torch.ones(dim)
    return all(
        math.isclose(float(score_fn(q, k, i, 3)), float(score_fn(q, k, i + 5, 3)), abs_tol=1e-9)
        for i in range(10)
    )


def skips_position_zero(score_fn, dim):
    g = torch.Generator().manual_seed(2)
    for _ in range(30):
        q, k = torch.randn(dim, generator=g), torch.randn(dim, generator=g)
        i, j = (int(v) for v in torch.randint(1, 50, (2,), generator=g))
        if not math.isclose(
            float(score_fn(q, k, i, j)), float(score_fn(q, k, i + 7, j + 7)), abs_tol=1e-9
        ):
            return False
    return True


def flip_flop():
    """A verdict that changes from one call to the next."""
    flips = itertools.cycle([True, False])

    def is_relative(score_fn, dim):
        score_fn(torch.ones(dim), torch.ones(dim), 0, 1)
        return next(flips)

    return is_relative


def test_relative_checker_accepts_a_correct_answer(capsys):
    check_relative_test(good_is_relative)
    assert "Correct!" in capsys.readouterr().out


def test_the_panel_holds_both_kinds_and_the_reference_sorts_them():
    verdicts = {name: good_is_relative(fn, 8) for name, fn, _, _ in SCORE_PANEL}
    assert verdicts == {name: relative for name, _, relative, _ in SCORE_PANEL}
    assert sum(verdicts.values()) == 3 and len(verdicts) - sum(verdicts.values()) == 4


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda f, d: True, "never calls score_fn"),
        (
            lambda f, d: (f(torch.ones(d), torch.ones(d), 0, 0), "yes")[1],
            "must return True or False",
        ),
        (lambda f, d: (f(torch.ones(d), torch.ones(d), 0, 0), True)[1], "absolute positions"),
        (lambda f, d: (f(torch.ones(d), torch.ones(d), 0, 0), False)[1], "trivially"),
        (exact_is_relative, "compare with a tolerance"),
        (shifts_the_query_only, "linear distance penalty"),
        (skips_position_zero, "never compared a pair with i = 0"),
        (flip_flop(), r"said \[True, False, True\] in three runs"),
    ],
)
def test_relative_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_relative_test(wrong)
