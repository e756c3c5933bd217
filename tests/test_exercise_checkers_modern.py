"""The chapter 05 checkers (what ELECTRA's discriminator is told, ModernBERT's local mask, RoPE's slow pairs, a relative-score test)
accept correct answers and reject typical mistakes with specific feedback."""

import itertools
import math

import pytest
import torch

from course_lib.exercises import ExerciseError
from course_lib.exercises.modern import (
    SCORE_PANEL,
    check_local_attention_mask,
    check_relative_test,
    check_rtd_expectations,
    check_slow_pairs,
)


def stub(*args):
    raise NotImplementedError()


# ----- 1. what ELECTRA's discriminator is told, in expectation


def good_rtd(labels, p_original, attention_mask):
    masked = labels != -100
    return float((1 - p_original[masked]).sum()), int(attention_mask.sum())


def rtd_with(replaced="right", judged="right"):
    def rtd_expectations(labels, p, mask):
        masked, real = labels != -100, mask.bool()
        r = {
            "right": lambda: float((1 - p[masked]).sum()),
            "masked": lambda: float(masked.sum()),
            "inverted": lambda: float(p[masked].sum()),
            "everywhere": lambda: float((1 - p[real]).sum()),
        }[replaced]()
        j = {"right": int(real.sum()), "masked": int(masked.sum()), "padding": mask.numel()}[judged]
        return r, j

    return rtd_expectations


def rtd_squeezed(labels, p, mask):
    """Right, but squeezes: a batch of one loses its batch axis (and nothing breaks here)."""
    return good_rtd(labels.squeeze(), p.squeeze(), mask.squeeze())


def rtd_perfect_generator_nan(labels, p, mask):
    """1 - p computed through log(1 - p): -inf at p = 1, NaN in the sum."""
    masked = labels != -100
    return float(torch.log1p(-p[masked]).exp().sum()) if bool((p[masked] < 1).all()) else float(
        "nan"
    ), int(mask.sum())


def test_rtd_checker_accepts_the_expectation(capsys):
    check_rtd_expectations(good_rtd)
    out = capsys.readouterr().out
    assert "judged on 40 real tokens (MLM on 12)" in out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (rtd_with(replaced="masked"), "you count every masked position as replaced"),
        (rtd_with(replaced="inverted"), "inverted"),
        (rtd_with(replaced="everywhere"), "only masked positions get a sample"),
        (rtd_with(judged="masked"), "judged on EVERY real token"),
        (rtd_with(judged="padding"), "padding is not a token"),
        (rtd_perfect_generator_nan, r"a perfect generator.*expected \(0,"),
        (lambda labels, p, m: good_rtd(labels, p, m)[0], "return a pair"),
        (lambda labels, p, m: ("a", "b"), "return two numbers"),
    ],
)
def test_rtd_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_rtd_expectations(wrong)


def test_rtd_checker_rejects_changing_the_inputs():
    def in_place(labels, p, mask):
        out = good_rtd(labels, p, mask)
        p.fill_(0.5)
        return out

    with pytest.raises(ExerciseError, match="modified its input `p_original`"):
        check_rtd_expectations(in_place)


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


# ----- 3. rotary pairs that stay under one turn


def good_slow_pairs(d, theta, distance):
    return sum(distance * theta ** (-2 * p / d) < 2 * math.pi for p in range(d // 2))


def slow_pairs_with(exponent=2.0, turn=2 * math.pi, fast=False):
    def slow_pairs(d, theta, distance):
        slow = sum(distance * theta ** (-exponent * p / d) < turn for p in range(d // 2))
        return d // 2 - slow if fast else slow

    return slow_pairs


def slow_pairs_zero_distance_wrong(d, theta, distance):
    """Counts turns with a division by the distance: fails at distance 0."""
    return sum(2 * math.pi / distance > theta ** (-2 * p / d) for p in range(d // 2))


def test_slow_pairs_checker_accepts_the_count(capsys):
    check_slow_pairs(good_slow_pairs)
    out = capsys.readouterr().out
    assert "keeps 21 of 32 pairs" in out and "12 across 8,192 tokens" in out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (slow_pairs_with(exponent=1.0), r"theta\^\(-2p/d\) per position"),
        (slow_pairs_with(turn=math.pi), "a full turn is 2 pi, not pi"),
        (slow_pairs_with(fast=True), "you counted the FAST pairs"),
        (slow_pairs_with(turn=1.0), "in radians"),
        (slow_pairs_zero_distance_wrong, r"distance 0.*ZeroDivisionError"),
        (lambda d, t, n: float(good_slow_pairs(d, t, n)), "return an int"),
        (lambda d, t, n: good_slow_pairs(d, t, n) + 1, "count the pairs p with"),
        (
            lambda d, t, n: good_slow_pairs(d, t, n) if d > 2 else 1,
            r"one pair \(d = 2\)",
        ),
    ],
)
def test_slow_pairs_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_slow_pairs(wrong)


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


# ----- the edges: answers right only at the typical sizes are rejected, naming the edge ---------


def window_padding_at_end(attention_mask, local_attention):
    """Real keys taken as the first (number of real tokens) positions: wrong with left padding."""
    t = attention_mask.shape[1]
    n_real = attention_mask.sum(1, keepdim=True)
    real = torch.arange(t)[None] < n_real
    d = torch.arange(t)[:, None] - torch.arange(t)[None, :]
    return (d.abs() <= local_attention // 2)[None] & real[:, None, :]


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda m, w: good_local_mask(m, w).squeeze(), r"a batch of one.*\(B, T, T\)"),
        (window_padding_at_end, "left padding"),
    ],
)
def test_local_mask_edges_reject_answers_right_only_at_typical_sizes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_local_attention_mask(wrong)
