"""Chapter 05 exercise checkers: ELECTRA's discriminator labels, ModernBERT's sliding-window mask,
rotary embeddings by hand, and a test that tells relative scores from absolute ones.

Each checker runs the learner's function on fresh inputs, compares with the library's reference
(`course_lib.modules.rotary`, `course_lib.modules.local_attention`) or the rule of the paper, and
names the typical mistake when it recognises one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from course_lib.exercises.core import (
    ExerciseError,
    expect,
    expect_keep_mask,
    expect_tensor,
    passed,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.modules.local_attention import sliding_window_mask
from course_lib.modules.rotary import RotaryEmbedding, apply_rotary


def _first(mask: Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in mask.nonzero()[0])


# ----- 1. ELECTRA: the discriminator's input and labels -----------------------------------------

PAD_ID, MASK_ID = 0, 4


def _electra_batch() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """A masked batch as ELECTRA's collator makes it, with the cases that tell answers apart.

    Returns input_ids (with [MASK]s), labels (originals at masked positions, -100 elsewhere),
    sampled (one token per masked position, row-major), attention_mask, and the original ids.
    Row 0 has no padding; rows 1 and 2 end in padding (id 0, never masked).
    """
    original = torch.tensor(
        [
            [2, 11, 12, 13, 14, 15, 16, 17, 18, 3],
            [2, 21, 22, 23, 24, 25, 3, 0, 0, 0],
            [2, 31, 32, 33, 3, 0, 0, 0, 0, 0],
        ]
    )
    attention_mask = (original != PAD_ID).long()
    masked = torch.zeros_like(original, dtype=torch.bool)
    masked[0, [2, 5, 7]] = True
    masked[1, [1, 4]] = True
    masked[2, [2]] = True
    input_ids = original.clone()
    input_ids[masked] = MASK_ID
    input_ids[0, 7] = original[0, 7]  # a masked position whose input kept the original (15% rule)
    input_ids[1, 4] = original[1, 4]
    labels = torch.where(masked, original, torch.full_like(original, IGNORE_INDEX))
    # Row-major order of the masked positions: (0,2) (0,5) (0,7) (1,1) (1,4) (2,2).
    # (0,5): the sample IS the original under a [MASK]; (1,4): the sample is the original at a
    # kept position; (0,7): a kept position replaced; the others replaced under a [MASK].
    sampled = torch.tensor([40, 15, 41, 42, 24, 43])
    return input_ids, labels, sampled, attention_mask, original


def _reference_discriminator(
    input_ids: Tensor, labels: Tensor, sampled: Tensor, attention_mask: Tensor
) -> tuple[Tensor, Tensor]:
    masked = labels != IGNORE_INDEX
    original = torch.where(masked, labels, input_ids)
    corrupted = input_ids.clone()
    corrupted[masked] = sampled
    disc = (corrupted != original).long()
    return corrupted, disc.masked_fill(attention_mask == 0, IGNORE_INDEX)


def check_discriminator_labels(discriminator_inputs: Callable) -> None:
    """`discriminator_inputs(input_ids, labels, sampled, attention_mask)` -> (corrupted ids,
    labels): the generator's samples put into the masked positions, and per token 1 = replaced,
    0 = original (a sample equal to the original counts as original), -100 at padding."""
    input_ids, labels, sampled, attention_mask, original = _electra_batch()
    got = run_learner_code(
        discriminator_inputs,
        input_ids.clone(),
        labels.clone(),
        sampled.clone(),
        attention_mask.clone(),
    )
    expect(
        isinstance(got, tuple) and len(got) == 2,
        f"return a pair (corrupted_ids, discriminator_labels), got {type(got).__name__}"
        + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "")
        + ".",
    )
    corrupted = expect_tensor(got[0], "discriminator_inputs")
    disc = expect_tensor(got[1], "discriminator_inputs")
    shape = tuple(input_ids.shape)
    for what, value in (("corrupted_ids", corrupted), ("discriminator_labels", disc)):
        expect(
            tuple(value.shape) == shape,
            f"{what} should have the batch's shape {shape} (one per token), got "
            f"{tuple(value.shape)}.",
        )
    want_ids, want = _reference_discriminator(input_ids, labels, sampled, attention_mask)
    masked = labels != IGNORE_INDEX
    if not torch.equal(corrupted.long(), want_ids):
        if torch.equal(corrupted.long(), input_ids):
            raise ExerciseError(
                "corrupted_ids is the masked input unchanged: the discriminator reads the "
                "generator's samples, so put `sampled` into the masked positions "
                "(where labels != -100)."
            )
        if torch.equal(corrupted.long(), original):
            raise ExerciseError(
                "corrupted_ids is the original text: put the generator's `sampled` tokens into "
                "the masked positions (where labels != -100)."
            )
        column_major = input_ids.clone()
        column_major.T[masked.T] = sampled
        if torch.equal(corrupted.long(), column_major):
            raise ExerciseError(
                "the samples landed in the wrong positions: `sampled` follows the row-major "
                "order of `labels != -100` (row 0 first); `ids[masked] = sampled` keeps it."
            )
        b, t = _first(corrupted.long() != want_ids)
        raise ExerciseError(
            f"corrupted_ids[{b}, {t}] should be {int(want_ids[b, t])}, got "
            f"{int(corrupted[b, t])}: masked positions take the next sample, all others keep "
            "the input token."
        )
    expect(
        not disc.dtype.is_floating_point or bool((disc == disc.round()).all()),
        "labels are whole numbers: 1 (replaced), 0 (original), -100 (padding).",
    )
    disc = disc.long()
    if torch.equal(disc, want):
        passed(
            "every real token gets a label (not only the 15% masked), a sample equal to the "
            "original counts as original, and padding is ignored."
        )
        return
    real, pad = attention_mask.bool(), ~attention_mask.bool()
    agree_real = torch.equal(disc[real], want[real])
    if torch.equal(disc[real], 1 - want[real]):
        raise ExerciseError(
            "the labels are inverted: 1 means replaced (the generator's token differs from the "
            "original), 0 means original."
        )
    if bool((disc[real & ~masked] == IGNORE_INDEX).all()) and bool((disc[real] != 0).any()):
        raise ExerciseError(
            "only the masked positions got a label (the MLM habit): ELECTRA's discriminator "
            "judges EVERY real token, original or not; give the unmasked tokens label 0."
        )
    if not agree_real and torch.equal(disc[real], masked.long()[real]):
        b, t = _first(masked & (want == 0))
        raise ExerciseError(
            f"you labelled every masked position as replaced, but at [{b}, {t}] the generator "
            f"sampled the original token ({int(original[b, t])}): that token is not a "
            "replacement, so its label is 0 (the paper's subtle point)."
        )
    if not agree_real and torch.equal(disc[real], (want_ids != input_ids).long()[real]):
        b, t = _first((want_ids != input_ids) & (want == 0))
        raise ExerciseError(
            f"you compared with the masked input, not the original text: at [{b}, {t}] the "
            f"input held [MASK] and the generator sampled the original token "
            f"({int(original[b, t])}), which is not a replacement. The originals are in "
            "`labels` at the masked positions."
        )
    if agree_real:
        if bool((disc[pad] == 0).all()):
            raise ExerciseError(
                "padding got label 0 (original): padding is not a token, and a label of 0 would "
                "teach the discriminator about [PAD]; give it -100 (IGNORE_INDEX) where "
                "attention_mask is 0."
            )
        b, t = _first(pad & (disc != IGNORE_INDEX))
        raise ExerciseError(
            f"padding at [{b}, {t}] has label {int(disc[b, t])}: give every padding position "
            "-100 (IGNORE_INDEX), where attention_mask is 0."
        )
    if bool((disc[real] == IGNORE_INDEX).any()):
        b, t = _first(real & (disc == IGNORE_INDEX))
        raise ExerciseError(
            f"[{b}, {t}] is a real token (attention_mask 1) but got -100: only padding is ignored."
        )
    b, t = _first(real & (disc != want))
    raise ExerciseError(
        f"label [{b}, {t}] should be {int(want[b, t])}, got {int(disc[b, t])}: 1 where the "
        "corrupted token differs from the original, 0 where it equals it."
    )


# ----- 2. ModernBERT: the sliding-window mask ---------------------------------------------------


def _window_cases() -> list[tuple[Tensor, int]]:
    """(attention_mask, local_attention) pairs: windows narrower and wider than the sequence."""
    mask = torch.ones(3, 13, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    short = torch.ones(2, 5, dtype=torch.long)
    short[1, 3:] = 0
    return [(mask, 4), (mask, 6), (mask, 2), (short, 128)]


def _reference_window(attention_mask: Tensor, local_attention: int) -> Tensor:
    t = attention_mask.shape[1]
    band = sliding_window_mask(t, local_attention // 2)
    return band[None] & attention_mask.bool()[:, None, :]


def check_local_attention_mask(local_attention_mask: Callable) -> None:
    """`local_attention_mask(attention_mask, local_attention)` -> (B, T, T) bool, True where
    query i may attend key j: |i - j| <= local_attention // 2 and key j is a real token (as
    transformers' ModernBERT and `course_lib.modules.local_attention`)."""
    for attention_mask, window in _window_cases():
        b, t = attention_mask.shape
        got = expect_tensor(
            run_learner_code(local_attention_mask, attention_mask.clone(), window),
            "local_attention_mask",
        )
        expect_keep_mask(got, b, t)
        want = _reference_window(attention_mask, window)
        if torch.equal(got, want):
            continue
        half, label = window // 2, f"(local_attention={window}, T={t})"
        keys = attention_mask.bool()[:, None, :]
        queries = attention_mask.bool()[:, :, None]
        if torch.equal(got, ~want):
            raise ExerciseError("the mask is inverted: True means query i MAY attend key j.")
        d = torch.arange(t)[:, None] - torch.arange(t)[None, :]  # i - j
        variants = {
            "narrow": d.abs() < half,
            "wide": d.abs() <= half + 1,
            "whole": d.abs() <= window,
            "causal": (d >= 0) & (d <= half),
            "causal_whole": (d >= 0) & (d <= window),
        }
        band = next(
            (
                name
                for name, v in variants.items()
                if any(
                    torch.equal(got, candidate)
                    for candidate in (
                        v[None] & keys,
                        v[None] & keys & queries,
                        v[None].expand(b, -1, -1),
                    )
                )
            ),
            None,
        )
        if band == "narrow":
            raise ExerciseError(
                f"off by one {label}: each token sees local_attention // 2 = {half} tokens on "
                f"each side, inclusive (transformers: distance <= sliding_window), so "
                f"|i - j| <= {half}, not < {half}."
            )
        if band == "wide":
            raise ExerciseError(
                f"off by one {label}: the window reaches |i - j| <= local_attention // 2 = "
                f"{half}, not {half + 1}."
            )
        if band == "whole":
            raise ExerciseError(
                f"too wide {label}: local_attention = {window} is the WHOLE window, "
                f"local_attention // 2 = {half} on each side (|i - j| <= {half})."
            )
        if band in ("causal", "causal_whole"):
            raise ExerciseError(
                "the window is causal (keys j <= i only): ModernBERT is an encoder, every "
                f"token sees {half} tokens on EACH side, |i - j| <= {half}."
            )
        in_band = sliding_window_mask(t, half)[None].expand(b, -1, -1)
        if torch.equal(got, in_band):
            raise ExerciseError(
                f"padding is not masked {label}: a real query may attend a padding key; "
                "AND the band with attention_mask along the key axis."
            )
        if torch.equal(got, in_band & queries):
            raise ExerciseError(
                "you masked padded QUERIES (rows) instead of padded KEYS (columns): "
                "attention_mask[b, j] decides whether key j may be attended."
            )
        if torch.equal(got, want & queries):
            row = _first(~attention_mask.bool())
            raise ExerciseError(
                f"you also blanked the rows of padded queries (e.g. sequence {row[0]}, query "
                f"{row[1]}): mask the KEY axis only, as transformers and the library do. A "
                "padded query's output is thrown away, and a row with no allowed key is what "
                "turns softmax into NaN."
            )
        s, i, j = _first(got != want)
        raise ExerciseError(
            f"{label}: sequence {s}, query {i}, key {j} should be {bool(want[s, i, j])} "
            f"(|i - j| = {abs(i - j)}, key is {'real' if attention_mask[s, j] else 'padding'}), "
            f"got {bool(got[s, i, j])}."
        )
    passed(
        "a symmetric window of local_attention // 2 on each side, padding keys masked: the "
        "mask of ModernBERT's local layers."
    )


# ----- 3. rotary embeddings by hand -------------------------------------------------------------


def _rope_variant(
    x: Tensor,
    positions: Tensor,
    theta: float,
    *,
    interleaved: bool = False,
    exponent: float = 2.0,
    offset: int = 0,
    sign: float = 1.0,
) -> Tensor:
    """RoPE with one convention changed, to recognise typical mistakes (float64, exact enough)."""
    d = x.shape[-1]
    p = torch.arange(d // 2, dtype=torch.float64)
    freqs = theta ** (-exponent * p / d)
    angles = (positions.double() + offset)[:, None] * freqs  # (T, d/2)
    cos, sin = angles.cos(), sign * angles.sin()
    x = x.double()
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
        return out.flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def _rope_reference(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    cos, sin = RotaryEmbedding(x.shape[-1], theta)(positions)
    return apply_rotary(x, cos, sin)


def check_rotary(rotate: Callable) -> None:
    """`rotate(x, positions, theta)` -> x turned as ModernBERT's RoPE does: x (T, d), positions
    (T,) integers, pair p = (feature p, feature p + d/2) turned by positions * theta^(-2p/d)."""
    g = torch.Generator().manual_seed(0)
    cases = (
        (torch.arange(9), 16, 10_000.0),
        (torch.arange(9), 16, 160_000.0),  # a global layer's base
        (torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3]), 8, 10_000.0),  # packed sequences
    )
    for positions, d, theta in cases:
        x = torch.randn(len(positions), d, generator=g)
        got = expect_tensor(run_learner_code(rotate, x.clone(), positions.clone(), theta), "rotate")
        expect(
            tuple(got.shape) == tuple(x.shape),
            f"rotation keeps the shape: expected {tuple(x.shape)}, got {tuple(got.shape)}.",
        )
        expect(got.dtype.is_floating_point, f"return floats, got {got.dtype}.")
        want = _rope_reference(x, positions, theta)
        got = got.double()
        if torch.allclose(got, want.double(), atol=1e-4):
            continue

        def same(**kw: float) -> bool:
            # loose: a float32 answer with a flipped exponent turns by angles ~1e4 rad, whose
            # rounding (~1e-3) alone exceeds 1e-4; the variants differ from each other by O(1)
            variant = _rope_variant(x, positions, theta, **kw)  # noqa: B023
            return torch.allclose(got, variant, atol=1e-2)  # noqa: B023

        label = f"(d={d}, theta={theta:,.0f})"
        if torch.allclose(got, x.double(), atol=1e-6):
            raise ExerciseError("x came back unchanged: turn each pair by its angle.")
        if same(interleaved=True):
            raise ExerciseError(
                "interleaved pairs (features 2p, 2p + 1): the library and transformers' "
                "ModernBERT pair feature p with feature p + d/2 (the two halves, rotate_half). "
                "Both are RoPE, but weights trained one way do not load the other way."
            )
        if same(sign=-1.0):
            raise ExerciseError(
                "turned the wrong way: pair (a, b) becomes (a cos - b sin, a sin + b cos), "
                "i.e. x cos + rotate_half(x) sin with rotate_half(x) = (-x2, x1)."
            )
        if same(exponent=1.0):
            raise ExerciseError(
                f"the frequencies are off {label}: pair p turns by theta^(-2p/d) per position "
                "(p = 0 .. d/2 - 1), you used theta^(-p/d)."
            )
        if same(exponent=-2.0):
            raise ExerciseError(
                f"the exponent's sign is flipped {label}: the frequency theta^(-2p/d) falls "
                "from 1 (pair 0) to about 1/theta (the last pair)."
            )
        if same(offset=1):
            raise ExerciseError(
                "positions start at 0: the first token is not turned at all. Use `positions` "
                "as given, without adding 1."
            )
        if theta != 10_000.0 and torch.allclose(
            got, _rope_variant(x, positions, 10_000.0), atol=1e-4
        ):
            raise ExerciseError(
                f"theta is ignored: with theta={theta:,.0f} (a global layer) you computed the "
                "angles of theta=10,000. Use the `theta` argument."
            )
        if not torch.equal(positions, torch.arange(len(positions))) and torch.allclose(
            got, _rope_variant(x, torch.arange(len(positions)), theta), atol=1e-4
        ):
            raise ExerciseError(
                "`positions` is ignored: you turned row t by angle t, but with unpadding the "
                f"positions restart at 0 for each packed sequence ({positions.tolist()}). Use "
                "the positions you are given."
            )
        t, f = _first((got - want.double()).abs() > 1e-4)
        raise ExerciseError(
            f"{label}: row {t} (position {int(positions[t])}), feature {f} should be "
            f"{float(want[t, f]):.4f}, got {float(got[t, f]):.4f}."
        )
    passed(
        "your rotation equals the library's (and transformers') RoPE: halves as pairs, "
        "theta^(-2p/d), positions from 0, any theta."
    )


# ----- 4. a test for relative scores -------------------------------------------------------------


def _angles(position: object, d: int, theta: float = 10_000.0) -> Tensor:
    pos = torch.as_tensor(position, dtype=torch.float64)
    return pos * theta ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)


def _turn(v: Tensor, position: object) -> Tensor:
    v = torch.as_tensor(v).double()
    d = v.shape[-1]
    a = _angles(position, d)
    x1, x2 = v[: d // 2], v[d // 2 :]
    return torch.cat((x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()))


def _absolute(position: object, d: int) -> Tensor:
    """BERT-paper sinusoidal absolute position vector (added to the input)."""
    a = _angles(position, d)
    return torch.cat((a.sin(), a.cos()))


def _dot(q: Tensor, k: Tensor) -> Tensor:
    return torch.as_tensor(q).double() @ torch.as_tensor(k).double()


def _distance(i: object, j: object) -> Tensor:
    return torch.as_tensor(i, dtype=torch.float64) - torch.as_tensor(j, dtype=torch.float64)


# (name, score_fn(q, k, i, j), relative?, feedback when the learner's test gets it wrong)
SCORE_PANEL: tuple[tuple[str, Callable, bool, str], ...] = (
    (
        "q · k (no positions at all)",
        lambda q, k, i, j: _dot(q, k),
        True,
        "a score that ignores positions depends on them only through i - j (trivially): a "
        "correct test accepts it",
    ),
    (
        "ALiBi, q · k - 0.5 |i - j|",
        lambda q, k, i, j: _dot(q, k) - 0.5 * _distance(i, j).abs(),
        True,
        "a linear distance penalty depends only on i - j: your test rejected it",
    ),
    (
        "RoPE, R(i) q · R(j) k",
        lambda q, k, i, j: _dot(_turn(q, i), _turn(k, j)),
        True,
        "RoPE's score is relative: shifting both positions by the same s leaves it unchanged "
        "up to float rounding (about 1e-12 here), so compare with a tolerance (math.isclose, "
        "torch.allclose), never with ==, and only pairs with the same i - j",
    ),
    (
        "absolute positions, (q + p_i) · (k + p_j)",
        lambda q, k, i, j: _dot(q + _absolute(i, len(q)), k + _absolute(j, len(k))),
        False,
        "BERT-style absolute positions (added to q and k) are not relative; shift BOTH "
        "positions by the same s (i + s, j + s) and compare the scores",
    ),
    (
        "k turned the wrong way, R(i) q · R(-j) k",
        lambda q, k, i, j: _dot(_turn(q, i), _turn(k, -torch.as_tensor(j))),
        False,
        "turning k by -j makes the score depend on i + j, not i - j; shifting both positions "
        "by s changes i + j by 2s, and the score with it",
    ),
    (
        "only q turned, R(i) q · k",
        lambda q, k, i, j: _dot(_turn(q, i), k),
        False,
        "turning only the query makes the score depend on i alone: shift both positions and "
        "the score changes",
    ),
    (
        "relative, except for position 0, q · R(i - j) k + [i == 0]",
        lambda q, k, i, j: _dot(q, _turn(k, _distance(j, i))) + float(torch.as_tensor(i) == 0),
        False,
        "this score is relative everywhere except when the query sits at position 0 (a [CLS] "
        "bias): your test never compared a pair with i = 0 against its shifted copy. Try "
        "several positions, including 0",
    ),
)


def _verdict(value: object) -> bool:
    if isinstance(value, Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value)
    if type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise ExerciseError(f"`is_relative` must return True or False, got {value!r}.")


def check_relative_test(is_relative: Callable) -> None:
    """`is_relative(score_fn, dim)` -> True when score_fn(q, k, i, j) (q, k of size `dim`; i, j
    int positions) depends on the positions only through i - j, else False. Run on a panel of
    relative and absolute scores, three times each (a random test must not flip its verdict)."""
    dim = 8
    for name, score_fn, relative, feedback in SCORE_PANEL:
        calls = 0

        def counted(q: Tensor, k: Tensor, i: object, j: object) -> Tensor:
            nonlocal calls
            calls += 1
            return score_fn(q, k, i, j)  # noqa: B023

        verdicts = [_verdict(run_learner_code(is_relative, counted, dim)) for _ in range(3)]
        expect(
            calls > 0,
            "your test never calls score_fn: it has to compute scores to judge them.",
        )
        expect(
            len(set(verdicts)) == 1,
            f"on `{name}` your test said {verdicts} in three runs: a random test must try "
            "enough pairs and shifts to give the same answer every time.",
        )
        if verdicts[0] != relative:
            said = "relative" if verdicts[0] else "not relative"
            raise ExerciseError(f"on `{name}` your test said {said}: {feedback}.")
    passed(
        f"your test tells all {len(SCORE_PANEL)} scores apart: shifted positions, several "
        "pairs including position 0, compared with a tolerance."
    )


__all__ = [
    "check_discriminator_labels",
    "check_local_attention_mask",
    "check_relative_test",
    "check_rotary",
]
