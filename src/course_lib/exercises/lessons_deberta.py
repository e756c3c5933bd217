"""The instant checks of DeBERTa's lesson build cells (chapter 04, notebooks 01-04, 11, 12).

Each `check_*` is a `BuildCheck`: it runs the learner's function on fresh inputs it makes
itself, compares with the library (or a reference written here and tested equal to the model),
and names the first mistake with numbers, probing the edges the lessons talk about: distances
beyond the table's range, one head, one token, one EMD step, sequences shorter than the window,
a batch of one, inputs left unmodified.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import (
    ExerciseError,
    NotWrittenYet,
    expect,
    expect_tensor,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import deberta as _lab04
from course_lib.labs import deberta_positions as _dp
from course_lib.modules.relative_position import (
    c2p_index,
    delta,
    log_bucket_position,
    p2c_index,
    relative_position,
)


def _first_mismatch(got: Tensor, want: Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in (got != want).nonzero()[0])


def _unchanged(name: str, before: Tensor, after: Tensor, what: str) -> None:
    expect(
        torch.equal(before, after),
        f"`{name}` changed its input `{what}` in place (an in-place op such as `-=`, `.abs_()` "
        "or `.clamp_()`): the caller still needs it; compute into a new tensor.",
    )


def _whole_numbers(got: Tensor, name: str) -> Tensor:
    expect(
        not got.dtype.is_floating_point or bool((got == got.round()).all()),
        f"`{name}` returned fractions ({got.dtype}): rows of a table are whole numbers.",
    )
    return got.long()


# ----- notebook 01: δ(i, j) ----------------------------------------------------------------------


def _probe_delta(delta_by_hand: Callable) -> str:
    # (queries, keys, k): long enough that distances beyond ±k occur on both sides, k = 1 (a
    # table of two rows), more keys than queries, and a k larger than any distance (no clipping)
    for n_q, n_k, k in ((12, 12, 3), (5, 9, 1), (4, 6, 50), (20, 20, 7)):
        i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
        i0, j0 = i.clone(), j.clone()
        got = expect_tensor(run_learner_code(delta_by_hand, i, j, k), "delta_by_hand")
        _unchanged("delta_by_hand", i0, i, "i")
        _unchanged("delta_by_hand", j0, j, "j")
        expect(
            tuple(got.shape) == (n_q, n_k),
            f"with i of shape [{n_q}, 1] (queries) and j of shape [1, {n_k}] (keys) the result "
            f"should broadcast to [{n_q}, {n_k}], got {tuple(got.shape)}.",
        )
        got = _whole_numbers(got, "delta_by_hand")
        want = delta(i, j, k)
        if torch.equal(got, want):
            continue
        label = f"{n_q} queries, {n_k} keys, k={k}"
        if torch.equal(got, delta(j, i, k)):
            raise ExerciseError(
                f"({label}) you computed δ(j, i): the row for query i and key j is i - j + k "
                "(the query's position minus the key's)."
            )
        if torch.equal(got, i - j + k):
            raise ExerciseError(
                f"({label}) nothing is clipped: values run from {int(got.min())} to "
                f"{int(got.max())}, but the table has 2k = {2 * k} rows (0 .. {2 * k - 1}). "
                "Distances beyond ±k must share the first or the last row."
            )
        if torch.equal(got, (i - j).clamp(0, 2 * k - 1)) or torch.equal(got, (i - j).clamp(-k, k)):
            raise ExerciseError(
                f"({label}) the distance is not shifted by k: i - j = -k is row 0, i - j = 0 "
                f"row k = {k}."
            )
        if int(got.max()) == 2 * k or int(got.min()) == -1:
            raise ExerciseError(
                f"({label}) off by one at the clip: the rows are 0 .. 2k - 1 = {2 * k - 1}, got "
                f"values from {int(got.min())} to {int(got.max())} (i - j >= k is the last row, "
                f"2k - 1)."
            )
        if torch.equal(got, (i - j + k).clamp(min=0)) or torch.equal(
            got, (i - j + k).clamp(max=2 * k - 1)
        ):
            side = "far right (i - j <= -k)" if int(got.min()) >= 0 else "far left"
            raise ExerciseError(
                f"({label}) only one side is clipped: distances beyond the {side} fall outside "
                f"0 .. {2 * k - 1}; clip both ends."
            )
        a, b = _first_mismatch(got, want)
        raise ExerciseError(
            f"({label}) δ(i={a}, j={b}) should be {int(want[a, b])} (i - j = {a - b}), got "
            f"{int(got[a, b])}."
        )
    return "δ(i, j) shifts by k and clips both ends, for k = 1, 3, 7 and 50, square and not."


check_delta_by_hand = BuildCheck(
    _probe_delta,
    fallback=delta,
    fallback_name="course_lib.modules.relative_position.delta",
    todo="return the table row δ(i, j) = clip(i - j + k, 0, 2k - 1) for broadcast position "
    "tensors i (queries) and j (keys).",
)


# ----- notebook 01: log buckets --------------------------------------------------------------------

# (bucket_size, max_position): deberta-v3, the chapter's model, a setting where float64 and float32
# disagree, an odd bucket count, and the smallest table
_BUCKETS = ((256, 512), (32, 64), (32, 129), (9, 40), (4, 8))


def _probe_log_bucket(my_log_bucket: Callable) -> str:
    for bucket_size, max_position in _BUCKETS:
        label = f"bucket_size={bucket_size}, max_position={max_position}"
        top = max_position - 1
        d = torch.arange(-top, top + 1)
        d0 = d.clone()
        got = expect_tensor(
            run_learner_code(my_log_bucket, d, bucket_size, max_position), "my_log_bucket"
        )
        _unchanged("my_log_bucket", d0, d, "distance")
        expect(
            tuple(got.shape) == tuple(d.shape),
            f"({label}) return one bucket per distance, the shape of `distance` "
            f"{tuple(d.shape)}, got {tuple(got.shape)}.",
        )
        got = _whole_numbers(got, "my_log_bucket")
        want = log_bucket_position(d, bucket_size, max_position).long()
        if torch.equal(got, want):
            continue
        mid = bucket_size // 2
        if torch.equal(got, want.abs()):
            raise ExerciseError(
                f"({label}) every bucket is >= 0: keep the sign, so that 'd to my left' and 'd to "
                "my right' are different buckets (bucket(-d) = -bucket(d))."
            )
        if torch.equal(got, d):
            raise ExerciseError(
                f"({label}) nothing is squeezed: distances beyond mid = {mid} must share "
                f"logarithmic buckets, up to bucket_size - 1 = {bucket_size - 1}."
            )
        far = d.abs() > mid
        a = int((got != want).nonzero()[0])
        dist, g, w = int(d[a]), int(got[a]), int(want[a])
        where = f"({label}) distance {dist}: bucket {g}, expected {w}"
        if not bool(far[a]):
            raise ExerciseError(
                f"{where}. |d| <= mid = bucket_size // 2 = {mid} stays exact (its own bucket)."
            )
        size = d.abs().clamp(min=mid)
        fraction64 = torch.log(size.double() / mid) / math.log(top / mid) * (mid - 1)
        as64 = torch.where(far, d.sign() * (mid + torch.ceil(fraction64)).long(), d)
        if torch.equal(got, as64):
            raise ExerciseError(
                f"{where}: your buckets are those of float64 arithmetic. The reference code "
                "computes in float32, and at a few distances the ceiling falls on the other "
                "side; compute |d| and the logarithms in float32."
            )
        fraction = torch.log(size.float() / mid) / torch.log(torch.tensor(top / mid))
        for rounding, name in ((torch.floor, "floor"), (torch.round, "round")):
            other = torch.where(far, d.sign() * (mid + rounding(fraction * (mid - 1))).long(), d)
            if torch.equal(got, other):
                raise ExerciseError(f"{where}: round the squeezed distance up (ceil), not {name}.")
        wide = torch.log(size.float() / mid) / torch.log(torch.tensor(max_position / mid))
        if torch.equal(
            got, torch.where(far, d.sign() * (mid + torch.ceil(wide * (mid - 1))).long(), d)
        ):
            raise ExerciseError(
                f"{where}: the logarithm's range is log((max_position - 1) / mid): the largest "
                f"distance is max_position - 1 = {top}, not max_position."
            )
        if int(got.max()) != bucket_size - 1 or bucket_size % 2:
            half = bucket_size / 2
            raise ExerciseError(
                f"{where}. The largest distance, max_position - 1 = {top}, must land on bucket "
                f"mid + mid - 1 = {w if dist == top else int(want.max())} (mid = bucket_size // 2 "
                f"= {mid}, an integer"
                + (f", not {half}" if bucket_size % 2 else "")
                + "): the fraction log(|d| / mid) / log((max_position - 1) / mid) is 1 there."
            )
        raise ExerciseError(f"{where}.")
    return (
        "your buckets equal log_bucket_position on every distance of five settings: "
        "deberta-v3's 256 over 512, the chapter's 32 over 64, an odd 9 and the smallest, 4 over 8."
    )


def _log_bucket(distance: Tensor, bucket_size: int, max_position: int) -> Tensor:
    """The library's log buckets as integers (the lesson's cells index tables with them)."""
    return log_bucket_position(distance, bucket_size, max_position).long()


check_log_bucket = BuildCheck(
    _probe_log_bucket,
    fallback=_log_bucket,
    fallback_name="course_lib.modules.relative_position.log_bucket_position",
    todo="keep |d| <= bucket_size // 2 exact and squeeze larger distances logarithmically "
    "(float32, ceil, sign kept), returning integers of the shape of `distance`.",
)


# ----- notebook 01: the [query, key] matrix of bucketed distances ---------------------------------


def _probe_relative_position(my_relative_position: Callable) -> str:
    # long (buckets squeeze), more keys than queries and the reverse, one token, the v3 setting
    for q_len, k_len, bucket_size, max_position in (
        (64, 64, 32, 64),
        (3, 40, 16, 64),
        (40, 5, 16, 64),
        (1, 1, 32, 64),
        (100, 100, 256, 512),
    ):
        label = f"q_len={q_len}, k_len={k_len}, bucket_size={bucket_size}"
        got = expect_tensor(
            run_learner_code(my_relative_position, q_len, k_len, bucket_size, max_position),
            "my_relative_position",
        )
        expect(
            tuple(got.shape) == (q_len, k_len),
            f"({label}) return [q_len, k_len] = {(q_len, k_len)} (row i a query, column j a key), "
            f"got {tuple(got.shape)}.",
        )
        got = _whole_numbers(got, "my_relative_position")
        want = relative_position(q_len, k_len, bucket_size, max_position)
        if torch.equal(got, want):
            continue
        plain = torch.arange(q_len)[:, None] - torch.arange(k_len)[None, :]
        if torch.equal(got, -want):
            raise ExerciseError(
                f"({label}) the sign is flipped: entry (i, j) is i - j, the query's position "
                "minus the key's (key 0 is to the left of query 40: +40, bucketed)."
            )
        if torch.equal(got, plain):
            raise ExerciseError(
                f"({label}) the distances are not bucketed: |i - j| > bucket_size // 2 = "
                f"{bucket_size // 2} must go through your log buckets (a short sequence never "
                "shows it)."
            )
        a, b = _first_mismatch(got, want)
        raise ExerciseError(
            f"({label}) entry (i={a}, j={b}) should be {int(want[a, b])} (i - j = {a - b}, "
            f"bucketed), got {int(got[a, b])}."
        )
    return "[q, k] bucketed distances equal relative_position, square or not, one token included."


check_relative_position = BuildCheck(
    _probe_relative_position,
    fallback=relative_position,
    fallback_name="course_lib.modules.relative_position.relative_position",
    todo="build the [q_len, k_len] matrix of distances i - j by broadcasting and bucket it.",
)


# ----- notebook 02: the three score terms --------------------------------------------------------


def disentangled_scores(
    q: Tensor, k: Tensor, q_r: Tensor, k_r: Tensor, rel: Tensor, span: int
) -> Tensor:
    """DeBERTa's pre-softmax scores (B, nh, T, T): (c2c + c2p + p2c) / sqrt(3d), both position
    terms reading row δ(i, j) of the projected table as the released code does.

    q, k: (B, nh, T, d) content queries and keys; q_r, k_r: (1 or B, nh, 2 span, d) the relative
    table projected by the query and key weights; rel: (T, T) bucketed distances i - j."""
    rows = c2p_index(rel, span)  # (T, T): row δ(i, j) of the table, clipped
    c2c = q @ k.transpose(-1, -2)  # (B, nh, T, T): content . content
    c2p = torch.gather(q @ k_r.transpose(-1, -2), -1, rows.expand(*q.shape[:2], *rows.shape))
    by_distance = k @ q_r.transpose(-1, -2)  # (B, nh, T keys, 2 span): each key vs every row
    p2c_rows = p2c_index(rel, span).T  # (T keys, T queries)
    p2c = torch.gather(by_distance, -1, p2c_rows.expand(*q.shape[:2], *p2c_rows.shape))
    return (c2c + c2p + p2c.transpose(-1, -2)) / math.sqrt(3 * q.shape[-1])


def _score_inputs(
    batch: int, heads: int, n: int, d: int, span: int, seed: int
) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(batch, heads, n, d, generator=g) for _ in range(2))
    q_r, k_r = (torch.randn(1, heads, 2 * span, d, generator=g) for _ in range(2))
    return q, k, q_r, k_r, relative_position(n, n)


def _probe_scores(my_disentangled_scores: Callable) -> str:
    # (batch, heads, tokens, d, span): distances beyond the span (clipped rows), one head, one
    # token, a batch of one, and a short sequence where nothing is clipped
    for batch, heads, n, d, span, seed in (
        (2, 3, 11, 8, 3, 0),
        (1, 1, 9, 4, 2, 1),
        (2, 2, 1, 8, 4, 2),
        (3, 2, 4, 6, 8, 3),
    ):
        label = f"B={batch}, heads={heads}, T={n}, d={d}, span={span}"
        inputs = _score_inputs(batch, heads, n, d, span, seed)
        copies = [x.clone() for x in inputs]
        try:
            got = run_learner_code(my_disentangled_scores, *inputs, span)
        except NotWrittenYet:
            raise
        except ExerciseError as err:
            if int(inputs[-1].abs().max()) < span or "out of bounds" not in str(err):
                raise
            raise ExerciseError(
                f"({label}) {err} — distances here reach {int(inputs[-1].abs().max())}, beyond "
                f"the span {span}: clip the rows to 0 .. 2 span - 1 = {2 * span - 1}."
            ) from None
        got = expect_tensor(got, "my_disentangled_scores")
        for name, before, after in zip(("q", "k", "q_r", "k_r", "rel"), copies, inputs):
            _unchanged("my_disentangled_scores", before, after, name)
        expect(
            tuple(got.shape) == (batch, heads, n, n),
            f"({label}) return (B, nh, T, T) = {(batch, heads, n, n)}, got {tuple(got.shape)}.",
        )
        want = disentangled_scores(*inputs, span)
        if torch.allclose(got, want, atol=1e-5):
            continue
        q, k, q_r, k_r, rel = inputs
        scale = math.sqrt(3 * d)
        rows = c2p_index(rel, span)
        c2c = q @ k.transpose(-1, -2)
        c2p = torch.gather(q @ k_r.transpose(-1, -2), -1, rows.expand(batch, heads, n, n))
        p2c = (want * scale - c2c - c2p).detach()

        kq = k @ q_r.transpose(-1, -2)  # (B, nh, T, 2 span): keys against the Q^r rows
        kk = k @ k_r.transpose(-1, -2)
        paper = torch.gather(kq, -1, p2c_index(rel, span, paper=True).T.expand(batch, heads, n, n))
        not_transposed = torch.gather(kq, -1, rows.expand(batch, heads, n, n))
        by_key_weights = torch.gather(kk, -1, rows.T.expand(batch, heads, n, n)).transpose(-1, -2)
        mistakes = (
            (
                (c2c + c2p + p2c) / math.sqrt(d),
                "divided by sqrt(d): the sum of THREE dot products "
                f"of size d has variance 3d, so divide by sqrt(3d) = {scale:.3f}",
            ),
            (
                c2c / scale + c2p + p2c,
                "only c2c is divided by sqrt(3d): scale the sum of all three terms once",
            ),
            ((c2c + c2p + p2c), "the scores are not scaled: divide the sum by sqrt(3d)"),
            ((c2c + c2p) / scale, "the p2c term is missing"),
            ((c2c + p2c) / scale, "the c2p term is missing"),
            (
                (c2c + c2p + c2p) / scale,
                "p2c repeats c2p: p2c multiplies the KEY's content K_j "
                "with the table projected by the query weights, Q^r[δ(i, j)]",
            ),
            (
                (c2c + c2p + paper.transpose(-1, -2)) / scale,
                "p2c reads row δ(j, i), the paper's "
                "equation 4; this library follows the released code: row δ(i, j), the same row as "
                "c2p",
            ),
            (
                (c2c + c2p + not_transposed) / scale,
                "in p2c, entry (i, j) must hold key j's "
                "content against row δ(i, j): you used the content of token i (compute K @ Q^r^T "
                "per key, gather, then transpose to [query, key])",
            ),
            (
                (c2c + c2p + by_key_weights) / scale,
                "p2c uses K^r (the table projected by the key "
                "weights); p2c projects the table with the QUERY weights: Q^r",
            ),
        )
        for candidate, message in mistakes:
            if torch.allclose(got, candidate, atol=1e-5):
                raise ExerciseError(f"({label}) {message}.")
        far = rel.abs().max() >= span
        raise ExerciseError(
            f"({label}) the scores differ from c2c + c2p + p2c over sqrt(3d) by up to "
            f"{(got - want).abs().max():.3g}"
            + (
                f"; distances here reach {int(rel.abs().max())}, beyond the span {span}: "
                f"clip the rows to 0 .. {2 * span - 1}"
                if far
                else ""
            )
            + "."
        )
    return (
        "c2c + c2p + p2c over sqrt(3d), clipping, one head, one token and a batch of one included."
    )


check_disentangled_scores = BuildCheck(
    _probe_scores,
    fallback=disentangled_scores,
    fallback_name="course_lib.exercises.lessons_deberta.disentangled_scores",
    todo="sum c2c, c2p (query content vs K^r rows) and p2c (key content vs Q^r rows), both "
    "position terms at row δ(i, j), and divide by sqrt(3d).",
)


# ----- notebook 03: the enhanced mask decoder ----------------------------------------------------


def enhanced_mask_decoder(
    last_layer: Callable[..., Tensor], hidden: Tensor, position_table: Tensor, steps: int
) -> Tensor:
    """The states DeBERTa's MLM head reads (He et al. 2021, sec. 3.2, as Microsoft's code): the
    first queries are hidden + the absolute rows 0 .. T-1, then `steps` passes of the last layer
    with `hidden` as keys and values, each pass's output the next queries. (B, T, H)."""
    query = hidden + position_table[: hidden.shape[1]]  # (B, T, H): only the queries see positions
    for _ in range(steps):
        query = last_layer(hidden, query_states=query)
    return query


class _ToyLayer:
    """A small attention-like layer: queries (and residual) from query_states, or from x when
    there are none; keys and values from x. Non-linear, so that every wiring mistake shows."""

    def __init__(self, width: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(width, width, generator=g) / math.sqrt(width)
        self.v = torch.randn(width, width, generator=g) / math.sqrt(width)
        self.calls = 0

    def __call__(self, x: Tensor, query_states: Tensor | None = None) -> Tensor:
        self.calls += 1
        q = x if query_states is None else query_states
        weights = torch.softmax(q @ self.w @ x.transpose(-1, -2), dim=-1)  # (B, T, T)
        return torch.tanh(q + weights @ x @ self.v)  # (B, T, H)


def _emd_variants(layer: _ToyLayer, hidden: Tensor, table: Tensor, steps: int) -> dict[str, Tensor]:
    """Typical wrong decoders, rebuilt on the same inputs."""
    p = table[: hidden.shape[1]]

    def loop(first: Tensor, kv: Tensor | None, every: bool = False, swap: bool = False) -> Tensor:
        query = first
        for _ in range(steps):
            if every:
                query = query + p
            if kv is None:
                query = layer(query)
            elif swap:
                query = layer(query, query_states=hidden)
            else:
                query = layer(kv, query_states=query)
        return query

    n = hidden.shape[1]
    out = {
        "no positions: the first queries are H + P (P = rows 0 .. T-1 of the absolute table)": loop(
            hidden, hidden
        ),
        "the positions were added at every step: only the first queries are H + P; later queries "
        "are the previous pass's output as it is": loop(hidden, hidden, every=True),
        "the positions reached the keys and values too: only the queries carry them, keys and "
        "values are H at every step": loop(hidden + p, hidden + p),
        "keys and values changed from pass to pass (you ran the layer on its own output, "
        "last_layer(query)): every pass reads the same H, last_layer(H, query_states=query)": loop(
            hidden + p, None
        ),
        "the roles are swapped: last_layer(x, query_states=q) asks the queries from q and reads "
        "keys and values from x; the queries carry the positions, x is H": loop(
            hidden + p, hidden, swap=True
        ),
        "the positions were added after the passes: they must enter the FIRST queries, so the "
        "layer can choose what to read given where each token stands": loop(hidden, hidden) + p,
    }
    if table.shape[0] > n:
        out[
            f"you used the LAST {n} rows of the table: token i gets the row of its position, rows "
            f"0 .. T-1 = 0 .. {n - 1}"
        ] = loop(hidden + table[-n:], hidden)
    layer.calls = 0
    return out


def _probe_emd(my_enhanced_mask_decoder: Callable) -> str:
    # (batch, tokens, width, table rows, steps): the paper's 2 steps, one step, three, one token
    for batch, n, width, rows, steps, seed in (
        (2, 7, 8, 12, 2, 0),
        (1, 5, 6, 9, 1, 1),
        (3, 6, 8, 10, 3, 2),
        (2, 1, 4, 6, 2, 3),
    ):
        label = f"B={batch}, T={n}, steps={steps}, table of {rows} rows"
        g = torch.Generator().manual_seed(100 + seed)
        hidden = torch.randn(batch, n, width, generator=g)
        table = torch.randn(rows, width, generator=g)
        layer = _ToyLayer(width, seed)
        h0, t0 = hidden.clone(), table.clone()
        got = expect_tensor(
            run_learner_code(my_enhanced_mask_decoder, layer, hidden, table, steps),
            "my_enhanced_mask_decoder",
        )
        if not torch.equal(hidden, h0):
            raise ExerciseError(
                f"({label}) your function changed `hidden` in place (an in-place `+=` on H?): H "
                "is also the keys and values of every pass, so add the positions into a new "
                "tensor."
            )
        _unchanged("my_enhanced_mask_decoder", t0, table, "position_table")
        expect(
            tuple(got.shape) == (batch, n, width),
            f"({label}) return one state per token, (B, T, H) = {(batch, n, width)}, got "
            f"{tuple(got.shape)}.",
        )
        calls = layer.calls
        want = enhanced_mask_decoder(_ToyLayer(width, seed), hidden, table, steps)
        if torch.allclose(got, want, atol=1e-6):
            expect(
                calls == steps,
                f"({label}) the last layer was called {calls} times for steps = {steps}.",
            )
            continue
        if calls != steps:
            raise ExerciseError(
                f"({label}) the last layer ran {calls} time(s); run it `steps` = {steps} times "
                "(use the argument, not a number)."
            )
        if torch.allclose(got, hidden, atol=1e-6):
            raise ExerciseError(f"({label}) you returned H unchanged.")
        for message, candidate in _emd_variants(
            _ToyLayer(width, seed), hidden, table, steps
        ).items():
            if torch.allclose(got, candidate, atol=1e-6):
                raise ExerciseError(f"({label}) {message}.")
        raise ExerciseError(
            f"({label}) not the decoder's output (max difference "
            f"{(got - want).abs().max():.3g}): first queries H + P[0 .. T-1], then `steps` passes "
            "of last_layer(H, query_states=query)."
        )
    return (
        "positions enter the first queries only; keys and values stay H for 1, 2 and 3 passes, "
        "one token included."
    )


check_enhanced_mask_decoder = BuildCheck(
    _probe_emd,
    fallback=enhanced_mask_decoder,
    fallback_name="course_lib.exercises.lessons_deberta.enhanced_mask_decoder (the EMD's forward)",
    todo="add the absolute rows 0 .. T-1 to H as the first queries, then run "
    "last_layer(H, query_states=query) `steps` times.",
)


# ----- notebook 04: when does a run discover positions? -------------------------------------------


def discovery_step(
    curve: Sequence[dict[str, Any]], track: dict[int, float], margin: float = 0.1
) -> int | None:
    """The first evaluated step from which the run's loss stays at least `margin` below the
    bag-of-words `track` ({step: loss}) until the end; None if it is not below at the last step
    (as experiments/04_deberta_distil/deberta_ablation.py's discovery_steps)."""
    found = None
    for row in reversed(curve):
        if row["step"] not in track or row["eval_mlm_loss"] > track[row["step"]] - margin:
            break
        found = row["step"]
    return found


def _curve(losses: Sequence[float], every: int = 50) -> list[dict[str, Any]]:
    return [{"step": every * (n + 1), "eval_mlm_loss": x} for n, x in enumerate(losses)]


# (what the case shows, losses, margin); the track is 6.0 at every step. Dyadic numbers, so that
# "exactly `margin` below" is exact in floating point.
_DISCOVERY_CASES: tuple[tuple[str, tuple[float, ...], float], ...] = (
    ("a run that leaves the track for good", (6.0, 6.0, 5.75, 5.5, 5.25), 0.125),
    ("a run that dips below the track early, comes back, then leaves for good",
     (6.0, 5.75, 6.0, 6.0, 5.5, 5.25), 0.125),
    ("a run that never leaves the track", (6.0, 5.9375, 6.0, 5.9375), 0.125),
    ("a run below the track only at the last step", (6.0, 6.0, 5.5), 0.125),
    ("a run exactly `margin` below from step 150 (at least `margin` below counts)",
     (6.0, 6.0, 5.875, 5.875), 0.125),
    ("a run below from its first evaluation", (5.5, 5.25, 5.0), 0.125),
    ("a wider margin of 0.25", (6.0, 5.875, 5.75, 5.5), 0.25),
    ("a run that leaves the track and is back at the end", (6.0, 5.5, 5.5, 6.0), 0.125),
)  # fmt: skip


def _discovery_strict(curve: Sequence[dict[str, Any]], level: float) -> int | None:
    """The discovery step with a strict `<` (the boundary mistake)."""
    found = None
    for row in reversed(curve):
        if not row["eval_mlm_loss"] < level:
            break
        found = row["step"]
    return found


def _probe_discovery(my_discovery_step: Callable) -> str:
    for what, losses, margin in _DISCOVERY_CASES:
        curve = _curve(losses)
        track = {row["step"]: 6.0 for row in curve}
        before = [dict(row) for row in curve]
        got = run_learner_code(my_discovery_step, curve, dict(track), margin)
        expect(
            curve == before,
            "`my_discovery_step` changed the curve it was given (a `.reverse()` or `.sort()` in "
            "place?): the caller still reads it; iterate over `reversed(curve)` instead.",
        )
        want = discovery_step(curve, track, margin)
        expect(
            got is None or isinstance(got, int),
            f"return a step (an int) or None, got {type(got).__name__}.",
        )
        if got == want:
            continue
        shown = ", ".join(f"{row['step']}: {row['eval_mlm_loss']}" for row in curve)
        where = (
            f"{what} (losses by step {{{shown}}}, track 6.0, margin {margin}): you return {got}, "
            f"expected {want}"
        )
        below = [row["step"] for row in curve if row["eval_mlm_loss"] <= 6.0 - margin]
        strict = _discovery_strict(curve, 6.0 - margin)
        if below and got == below[0] and (want is None or got < want):
            raise ExerciseError(
                f"{where}: {got} is the first step below the track, but the run does not stay "
                "below it after that; the discovery is the first step from which it STAYS below "
                "until the end (scan from the last evaluation backwards)."
            )
        if want is None:
            raise ExerciseError(
                f"{where}: the run is not below the track at its last evaluation, so it has not "
                "discovered positions for good: return None."
            )
        if got == strict and any(row["eval_mlm_loss"] == 6.0 - margin for row in curve):
            raise ExerciseError(
                f"{where}: a loss exactly `margin` below the track counts (at least `margin` "
                "below: compare with `<=`)."
            )
        if margin != 0.1 and got == discovery_step(curve, track, 0.1):
            raise ExerciseError(f"{where}: use the `margin` argument, not a fixed 0.1.")
        raise ExerciseError(f"{where}.")
    return (
        "the first step from which a run stays at least `margin` below the track: early dips, "
        "runs that never leave it or come back, and the boundary handled."
    )


check_discovery_step = BuildCheck(
    _probe_discovery,
    fallback=discovery_step,
    fallback_name="course_lib.exercises.lessons_deberta.discovery_step (the experiment's rule)",
    todo="return the first evaluated step from which the loss stays at least `margin` below "
    "the track until the last evaluation, or None.",
)


# ----- notebook 11: the two lab tasks' labels ------------------------------------------------------


def _label_inputs() -> list[tuple[str, Tensor]]:
    """Fresh token rows: the lab's length, a batch of one, other lengths (longer; only one
    labelled position; shorter than the window), and a hand-made row where two tokens point at
    the same position and one points into the window."""
    g = torch.Generator().manual_seed(7)
    n = _lab04.N_SYMBOLS
    # token id = (offset - 1) * N_SYMBOLS + symbol
    hand = torch.tensor(
        [[0 * n + 5, 3 * n + 1, 2 * n + 7, 5 * n + 2, 1 * n + 3, 0 * n + 9, 0 * n + 4, 4 * n + 8,
          1 * n + 6, 0 * n + 11, 2 * n + 10]]
    )  # fmt: skip
    return [
        (f"{8} rows of {_lab04.LENGTH}", _lab04.sample_tokens(8, g)),
        ("a batch of one", _lab04.sample_tokens(1, g)),
        ("rows of 31 tokens", _lab04.sample_tokens(4, g, length=31)),
        (f"rows of {_lab04.N_OFFSETS + 1} tokens", _lab04.sample_tokens(3, g, length=7)),
        (f"rows of {_lab04.N_OFFSETS - 2} tokens (shorter than the window)",
         _lab04.sample_tokens(2, g, length=_lab04.N_OFFSETS - 2)),
        ("a hand-made row", hand),
    ]  # fmt: skip


def _label_probe(
    name: str,
    reference: Callable[[Tensor], Tensor],
    mistakes: Callable[[Tensor], list[tuple[Tensor, str]]],
) -> Callable[[Callable], str]:
    def probe(candidate: Callable) -> str:
        for what, ids in _label_inputs():
            before = ids.clone()
            got = expect_tensor(run_learner_code(candidate, ids), name)
            _unchanged(name, before, ids, "ids")
            expect(
                tuple(got.shape) == tuple(ids.shape),
                f"({what}) return one label per token, {tuple(ids.shape)}, got {tuple(got.shape)}.",
            )
            want = reference(ids)
            if torch.equal(got.long(), want):
                continue
            positions = torch.arange(ids.shape[1])
            if ids.shape[1] > _lab04.LENGTH and torch.equal(
                got.long(), want.masked_fill(positions >= _lab04.LENGTH, IGNORE_INDEX)
            ):
                raise ExerciseError(
                    f"({what}) your labels stop at position {_lab04.LENGTH}, the lab's length: "
                    f"these rows have {ids.shape[1]} tokens; loop up to ids.shape[1]."
                )
            for candidate_labels, message in mistakes(ids):
                if torch.equal(got.long(), candidate_labels):
                    raise ExerciseError(f"({what}) {message}")
            b, i = _first_mismatch(got.long(), want)
            raise ExerciseError(
                f"({what}) row {b}, position {i}: label {int(got[b, i])}, expected "
                f"{int(want[b, i])} (the row: {ids[b].tolist()})."
            )
        return (
            "equal to the lab's labels on rows of 24, 31, 7 and 4 tokens, a batch of one and two "
            "pointers at one position."
        )

    return probe


def _window_mask(ids: Tensor) -> Tensor:
    return torch.arange(ids.shape[1]) < _lab04.N_OFFSETS


def _look_back_mistakes(ids: Tensor) -> list[tuple[Tensor, str]]:
    positions = torch.arange(ids.shape[1])
    symbol, offset = ids % _lab04.N_SYMBOLS, ids // _lab04.N_SYMBOLS + 1

    def read(source: Tensor, value: Tensor, window: bool = True) -> Tensor:
        ok = (source >= 0) & (source < ids.shape[1])
        labels = torch.gather(value, 1, source.clamp(0, ids.shape[1] - 1))
        labels = labels.masked_fill(~ok, IGNORE_INDEX)
        return labels.masked_fill(_window_mask(ids), IGNORE_INDEX) if window else labels

    return [
        (read(positions - offset + 1, symbol), "the offset is id // N_SYMBOLS + 1 (1 .. 6): you "
         "read one token too close (an offset of 0 .. 5)."),
        (read(positions - offset, ids), "the label is the SYMBOL of the token read "
         "(id % N_SYMBOLS), not its whole id."),
        (read(positions + offset, symbol), "you read to the right (i + offset): the c2p task reads "
         "offset(x_i) places to the LEFT."),
        (read(positions - offset, symbol, window=False), f"positions 0 .. {_lab04.N_OFFSETS - 1} "
         f"get no label (-100), whatever their offset: the window of {_lab04.N_OFFSETS} is not "
         "complete there."),
    ]  # fmt: skip


check_look_back = BuildCheck(
    _label_probe("my_look_back", _lab04.look_back_labels, _look_back_mistakes),
    fallback=_lab04.look_back_labels,
    fallback_name="course_lib.labs.deberta.look_back_labels",
    todo="label position i (from N_OFFSETS on) with the symbol of the token offset(x_i) places "
    "to its left; -100 elsewhere.",
)


def _pointed_at_mistakes(ids: Tensor) -> list[tuple[Tensor, str]]:
    batch, length = ids.shape
    symbol, offset = ids % _lab04.N_SYMBOLS, ids // _lab04.N_SYMBOLS + 1

    def labels(shift: int = 0, one: bool = True, window: bool = True, last: bool = False) -> Tensor:
        out = torch.full_like(ids, IGNORE_INDEX)
        for b in range(batch):
            for i in range(length):
                pointers = [j for j in range(length) if j + int(offset[b, j]) + shift == i]
                if (one and len(pointers) == 1) or (not one and pointers):
                    out[b, i] = int(symbol[b, pointers[-1 if last else 0]])
        return out.masked_fill(_window_mask(ids), IGNORE_INDEX) if window else out

    return [
        (labels(one=False), "two tokens point at the same position there: a position with "
         "several pointers (or none) gets no label, -100 — only a unique pointer names it."),
        (labels(one=False, last=True), "two tokens point at the same position there: a position "
         "with several pointers gets -100, not the last pointer's symbol."),
        (labels(shift=-1), "the offset is id // N_SYMBOLS + 1 (1 .. 6): your pointers land one "
         "position too early."),
        (labels(window=False), f"positions 0 .. {_lab04.N_OFFSETS - 1} get no label (-100) even "
         "when one token points at them, as in the lab."),
    ]  # fmt: skip


check_pointed_at = BuildCheck(
    _label_probe("my_pointed_at", _lab04.pointed_at_labels, _pointed_at_mistakes),
    fallback=_lab04.pointed_at_labels,
    fallback_name="course_lib.labs.deberta.pointed_at_labels",
    todo="label position i (from N_OFFSETS on) with the symbol of the one token j < i that "
    "points at it (j + offset(x_j) = i); -100 where none or several do.",
)


# ----- notebook 12: the shift task's generator ----------------------------------------------------


def _probe_shift_task(my_shift_task: Callable) -> str:
    content = range(_dp.N_SPECIAL, _dp.N_SPECIAL + _dp.N_CONTENT)
    for batch, length, shift in ((64, 32, 3), (1, 12, 1), (16, 20, 5), (3, 4, 4)):
        label = f"batch={batch}, length={length}, shift={shift}"
        got = run_learner_code(
            my_shift_task, batch, length, torch.Generator().manual_seed(length), shift=shift
        )
        expect(
            isinstance(got, tuple | list) and len(got) == 2,
            f"return a pair (inputs, labels), got {type(got).__name__}.",
        )
        ids, labels = (expect_tensor(x, "my_shift_task") for x in got)
        for name, x in (("inputs", ids), ("labels", labels)):
            expect(
                tuple(x.shape) == (batch, length),
                f"({label}) {name} should be (batch, length) = {(batch, length)}, got "
                f"{tuple(x.shape)}.",
            )
        outside = sorted(set(ids.unique().tolist()) - set(content))
        expect(
            not outside,
            f"({label}) input id {outside[0] if outside else ''} is not a content word: draw "
            f"from N_SPECIAL .. N_SPECIAL + N_CONTENT - 1 = {content[0]} .. {content[-1]} "
            "(the first ids are special tokens).",
        )
        if shift == 3:  # 2,048 draws: every one of the 16 words occurs (a miss has p < 1e-50)
            missing = sorted(set(content) - set(ids.unique().tolist()))
            expect(
                not missing,
                f"({label}) word {missing[0] if missing else ''} never occurs in {ids.numel():,} "
                "draws: torch.randint's upper bound is exclusive (randint(low, high) never "
                "returns high).",
            )
        head = labels[:, :shift]
        expect(
            bool((head == IGNORE_INDEX).all()),
            f"({label}) positions 0 .. {shift - 1} have nothing `shift` = {shift} places to their "
            f"left: their label is -100 (IGNORE_INDEX), got {head[0].tolist()} in row 0.",
        )
        if length > shift:
            tail, source = labels[:, shift:], ids[:, :-shift]
            if not torch.equal(tail, source):
                if torch.equal(labels[:, : length - shift], ids[:, shift:]):
                    raise ExerciseError(
                        f"({label}) the labels read to the right (label at i = input at i + "
                        "shift): the rule is the token `shift` places to the LEFT, i - shift."
                    )
                b, i = _first_mismatch(tail, source)
                raise ExerciseError(
                    f"({label}) the label at position {i + shift} of row {b} should be the input "
                    f"at {i} (i - shift), {int(source[b, i])}; got {int(tail[b, i])}. Use the "
                    "`shift` argument, not a fixed distance."
                )
        again = run_learner_code(
            my_shift_task, batch, length, torch.Generator().manual_seed(length), shift=shift
        )
        expect(
            torch.equal(again[0], ids),
            "the same generator seed gave different inputs: draw with `generator=generator`.",
        )
        if batch * length >= 16:
            other = run_learner_code(
                my_shift_task, batch, length, torch.Generator().manual_seed(length + 1), shift=shift
            )
            expect(
                not torch.equal(other[0], ids),
                "a generator with another seed gave the same inputs: draw from the `generator` "
                "you are given, not a seed of your own.",
            )
    return (
        "inputs are content words from the given generator, labels the input `shift` places to "
        "the left (-100 before), for shifts 1, 3, 4 and 5 and a batch of one."
    )


check_shift_task = BuildCheck(
    _probe_shift_task,
    fallback=_dp.sample_shift_task,
    fallback_name="course_lib.labs.deberta_positions.sample_shift_task",
    todo="draw (batch, length) content words with `generator` and label position i with the "
    "input at i - shift (-100 before `shift`).",
)
