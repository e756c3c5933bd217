"""Chapter 05 exercise checkers, four design tasks: what ELECTRA's discriminator is told (in
expectation), ModernBERT's sliding-window mask, which rotary pairs can tell far positions apart,
and a test that tells relative scores from absolute ones.

Each checker runs the learner's function on fresh inputs, compares with the library's reference
(`course_lib.modules.rotary`, `course_lib.modules.local_attention`) or the rule of the paper, and
names the typical mistake when it recognises one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    expect,
    expect_keep_mask,
    expect_tensor,
    expect_unchanged,
    passed,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.modules.local_attention import sliding_window_mask
from course_lib.modules.rotary import RotaryEmbedding


def _first(mask: Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in mask.nonzero()[0])


# ----- 1. ELECTRA: what the discriminator is told, in expectation (design) ----------------------

PAD_ID, MASK_ID = 0, 4


def _rtd_answers(
    labels: Tensor, p_original: Tensor, attention_mask: Tensor, kind: str = "right"
) -> tuple[float, int]:
    """(expected replaced tokens, tokens judged); `kind` reproduces a typical slip."""
    masked = labels != IGNORE_INDEX
    real = attention_mask.bool()
    replaced = float((1 - p_original.double()[masked]).sum())
    judged = int(real.sum())
    if kind == "judged_masked":
        judged = int(masked.sum())
    elif kind == "judged_padding":
        judged = real.numel()
    elif kind == "replaced_masked":
        replaced = float(masked.sum())
    elif kind == "replaced_inverted":
        replaced = float(p_original.double()[masked].sum())
    elif kind == "replaced_everywhere":
        replaced = float((1 - p_original.double()[real]).sum())
    return replaced, judged


_RTD_MISTAKES = (
    (
        "replaced_masked",
        "you count every masked position as replaced: the generator sometimes samples the "
        "original token, and then the token IS the original (label 0). A masked position is "
        "replaced with probability 1 - p",
    ),
    (
        "replaced_inverted",
        "inverted: p is the chance the sample IS the original; replaced is 1 - p",
    ),
    (
        "replaced_everywhere",
        "only masked positions get a sample; everywhere else the discriminator reads the original "
        "token, whatever p says there",
    ),
    (
        "judged_masked",
        "the discriminator is judged on EVERY real token (is it original?), not only the masked "
        "ones: that is where ELECTRA's signal comes from, against MLM's 15%",
    ),
    ("judged_padding", "padding is not a token: it gets -100 and is not judged"),
)


def _rtd_batch(
    b: int, t: int, seed: int, rate: float = 0.3
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(input_ids, labels, p_original, attention_mask) of a masked batch, padding on the right of
    every other row; p_original in (0, 1) everywhere (meaningful at masked positions only)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 12, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1::2, t - t // 3 :] = 0
    masked = (torch.rand(b, t, generator=g) < rate) & mask.bool()
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    ids = torch.where(masked, torch.full_like(ids, MASK_ID), ids)
    ids[mask == 0] = PAD_ID
    p = torch.rand(b, t, generator=g) * 0.9 + 0.05
    return ids, labels, p, mask


def _rtd_case(rtd_expectations: Callable, labels: Tensor, p: Tensor, mask: Tensor) -> tuple:
    given = [x.clone() for x in (labels, p, mask)]
    got = run_learner_code(rtd_expectations, *given)
    name = getattr(rtd_expectations, "__name__", "rtd_expectations")
    for before, after, what in zip(
        (labels, p, mask), given, ("labels", "p_original", "attention_mask")
    ):
        expect_unchanged(before, after, what, name)
    expect(
        isinstance(got, tuple | list) and len(got) == 2,
        f"return a pair (expected_replaced, judged), got {got!r}.",
    )
    try:
        replaced, judged = float(got[0]), float(got[1])
    except (TypeError, ValueError, RuntimeError):
        raise ExerciseError(
            f"return two numbers (expected_replaced, judged), got {got!r}."
        ) from None
    want = _rtd_answers(labels, p, mask)
    if abs(replaced - want[0]) < 1e-4 and judged == want[1]:
        return want
    where = f"you return ({replaced:.4g}, {judged:g}), expected ({want[0]:.4g}, {want[1]})"
    for kind, message in _RTD_MISTAKES:
        alt = _rtd_answers(labels, p, mask, kind)
        if alt != want and abs(replaced - alt[0]) < 1e-4 and judged == alt[1]:
            raise ExerciseError(f"{where}: {message}.")
    raise ExerciseError(
        f"{where}: "
        + (
            "the expected replaced count is off."
            if judged == want[1]
            else "the number of judged tokens is off."
        )
    )


def check_rtd_expectations(rtd_expectations: Callable) -> None:
    """`rtd_expectations(labels, p_original, attention_mask)` -> (expected number of tokens the
    discriminator must call replaced, number of tokens it is judged on) for one ELECTRA batch:
    sum over masked positions of 1 - p, and every real token."""
    _, labels, p, mask = _rtd_batch(4, 12, seed=0)
    replaced, judged = _rtd_case(rtd_expectations, labels, p, mask)
    _, labels1, p1, mask1 = _rtd_batch(3, 9, seed=1)
    p_one = torch.where(labels1 != IGNORE_INDEX, torch.ones_like(p1), p1)
    pad_row = mask1.clone()
    pad_row[2] = 0
    edges = (
        (
            "nothing masked (no generator sample at all)",
            torch.full_like(labels1, IGNORE_INDEX),
            p1,
            mask1,
        ),
        ("a perfect generator (p = 1 at every masked position)", labels1, p_one, mask1),
        ("a row of padding only", torch.where(pad_row.bool(), labels1, IGNORE_INDEX), p1, pad_row),
        ("a batch of one", labels1[:1], p1[:1], mask1[:1]),
    )
    for description, e_labels, e_p, e_mask in edges:
        with at_edge(description):
            _rtd_case(rtd_expectations, e_labels, e_p, e_mask)
    # the proof: sample the generator many times and label with the library's corrupt()
    from course_lib.objectives.rtd import corrupt

    ids, labels, p, mask = _rtd_batch(4, 12, seed=0)
    masked = labels != IGNORE_INDEX
    original = labels[masked]
    g = torch.Generator().manual_seed(4)
    draws = 400
    total = 0
    for _ in range(draws):
        keep = torch.rand(original.shape, generator=g) < p[masked]
        other = 5 + (original - 5 + torch.randint(1, 7, original.shape, generator=g)) % 7
        _, disc = corrupt(ids, labels, torch.where(keep, original, other))
        total += int(disc[mask.bool()].sum())
    sampled = total / draws
    expect(
        abs(sampled - replaced) < 0.4,
        f"over {draws} sampled batches the library labels {sampled:.2f} tokens replaced on "
        f"average, your expectation is {replaced:.2f}.",
    )
    n_masked = int(masked.sum())
    passed(
        f"in this batch the discriminator is judged on {judged} real tokens (MLM on {n_masked}), "
        f"and expects {replaced:.2f} replaced ones (the library's corrupt() over {draws} sampled "
        f"batches: {sampled:.2f}); a perfect generator leaves nothing to detect."
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
    edges = (
        ("a batch of one (attention_mask of shape (1, 6))", torch.ones(1, 6, dtype=torch.long), 2),
        ("left padding", torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1] * 7]), 4),
        ("a row of padding only", torch.tensor([[1, 1, 1, 0, 0], [0] * 5]), 2),
    )
    for description, attention_mask, window in edges:
        with at_edge(f"{description}, local_attention={window}"):
            b, t = attention_mask.shape
            given = attention_mask.clone()
            got = expect_tensor(
                run_learner_code(local_attention_mask, given, window), "local_attention_mask"
            )
            expect_unchanged(
                attention_mask,
                given,
                "attention_mask",
                getattr(local_attention_mask, "__name__", "f"),
            )
            expect_keep_mask(got, b, t)
            want = _reference_window(attention_mask, window)
            if not torch.equal(got, want):
                s_, i, j = _first(got != want)
                raise ExerciseError(
                    f"sequence {s_}, query {i}, key {j} should be {bool(want[s_, i, j])} "
                    f"(|i - j| = {abs(i - j)}, key is "
                    f"{'real' if attention_mask[s_, j] else 'padding'}), got {bool(got[s_, i, j])}."
                )
    passed(
        "a symmetric window of local_attention // 2 on each side, padding keys masked: the "
        "mask of ModernBERT's local layers."
    )


# ----- 3. rotary embeddings: which pairs can tell far positions apart (design) ------------------


def _slow_pairs(
    d: int,
    theta: float,
    distance: int,
    *,
    exponent: float = 2.0,
    turn: float = 2 * math.pi,
    pairs: int | None = None,
    fast: bool = False,
) -> int:
    """Feature pairs whose angle over `distance` positions stays below one turn; the switches
    reproduce the typical slips."""
    n = d // 2 if pairs is None else pairs
    slow = sum(distance * theta ** (-exponent * p / d) < turn for p in range(n))
    return n - slow if fast else slow


_PAIR_MISTAKES = (
    (
        {"exponent": 1.0},
        "pair p turns by theta^(-2p/d) per position, not theta^(-p/d): the pairs run over p = 0 "
        "... d/2 - 1, so the exponent reaches -(d - 2)/d",
    ),
    ({"turn": math.pi}, "a full turn is 2 pi, not pi: within half a turn nothing repeats yet"),
    ({"pairs": None, "fast": True}, "you counted the FAST pairs, those that turn full circle"),
    ({"turn": 1.0}, "the angle is in radians: one full turn is 2 pi, not 1"),
)


def _library_slow_pairs(d: int, theta: float, distance: int) -> int:
    """The same count from the library's RotaryEmbedding: the angle of each pair unwrapped from
    position 0 to `distance` (each step turns less than pi), compared with one full turn."""
    cos, sin = RotaryEmbedding(d, theta)(torch.arange(distance + 1))  # (distance + 1, d)
    half = d // 2  # the library repeats each pair's angle for both halves of the head
    angle = torch.atan2(sin[:, :half].double(), cos[:, :half].double())  # wrapped to (-pi, pi]
    step = torch.remainder(angle.diff(dim=0) + math.pi, 2 * math.pi) - math.pi
    total = step.sum(0)  # unwrapped angle at `distance`
    return int((total < 2 * math.pi - 1e-3).sum())


def check_slow_pairs(slow_pairs: Callable) -> None:
    """`slow_pairs(d, theta, distance)` -> how many of RoPE's d/2 feature pairs turn by less
    than one full turn (2 pi) over `distance` positions (pair p turns theta^(-2p/d) per position)."""
    cases = [(64, 10_000.0, 128), (64, 160_000.0, 8192), (64, 10_000.0, 8192), (16, 500.0, 40)]
    edges = {
        (2, 10_000.0, 100): "one pair (d = 2): a head of two features",
        (32, 10_000.0, 0): "distance 0: nothing turns",
        (8, 2.0, 3): "a tiny base (theta = 2)",
    }
    results = []

    def one(case: tuple[int, float, int]) -> None:
        d, theta, distance = case
        want = _slow_pairs(d, theta, distance)
        if distance:
            assert _library_slow_pairs(d, theta, distance) == want, case  # the library agrees
        got = run_learner_code(slow_pairs, d, theta, distance)
        expect(
            isinstance(got, int | torch.Tensor) and not isinstance(got, bool),
            f"return an int (a number of pairs), got {got!r}.",
        )
        got = int(got)
        results.append((case, got, want))
        if got == want:
            return
        where = f"slow_pairs({d}, {theta:g}, {distance}) = {got}, expected {want} of {d // 2} pairs"
        hints = [
            hint
            for flags, hint in _PAIR_MISTAKES
            if got == _slow_pairs(d, theta, distance, **flags) != want
        ]
        raise ExerciseError(
            f"{where}: "
            + (
                "; or ".join(hints)
                if hints
                else "count the pairs p with distance x theta^(-2p/d) < 2 pi"
            )
            + "."
        )

    for case in cases:
        one(case)
    for case, label in edges.items():
        with at_edge(label):
            one(case)
    local, global_ = results[0][2], results[1][2]
    passed(
        f"a ModernBERT head (d = 64) keeps {local} of 32 pairs under one turn across a local "
        f"window of 128 tokens at theta = 10,000, and {global_} across 8,192 tokens at theta = "
        f"160,000 (at theta = 10,000 it would keep {results[2][2]}): the larger base is what lets "
        "global layers tell far positions apart."
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
    "check_local_attention_mask",
    "check_relative_test",
    "check_rtd_expectations",
    "check_slow_pairs",
]
