"""Chapter 04 (DeBERTa) exercise checkers: δ(i, j), the c2p gather, and four design tasks: the
distances each log bucket holds, where p2c's window clips (code and paper), a translation-invariance
test and a trace of the enhanced mask decoder (which runs of the last layer read what).

Each checker runs the learner's function on fresh inputs, compares with the library's reference
(`course_lib.modules.relative_position`), and names the typical mistake when it recognises one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    expect,
    expect_tensor,
    passed,
    run_learner_code,
)
from course_lib.modules.relative_position import (
    c2p_index,
    delta,
    log_bucket_position,
    relative_position,
)


def _first_mismatch(got: Tensor, want: Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in (got != want).nonzero()[0])


# ----- δ(i, j) ---------------------------------------------------------------------------------


def check_delta(delta_fn: Callable) -> None:
    """`delta_fn(i, j, k)` -> table row δ(i, j) = clip(i - j + k, 0, 2k - 1) for broadcast
    tensors of query positions i and key positions j (He et al. 2021, eq. 3)."""
    for k in (2, 4, 7):
        n = 3 * k  # long enough that distances beyond ±k occur on both sides
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        got = expect_tensor(run_learner_code(delta_fn, i, j, k), "delta")
        want = delta(i, j, k)
        expect(
            tuple(got.shape) == (n, n),
            f"with i of shape [{n}, 1] and j of shape [1, {n}] the result should broadcast to "
            f"[{n}, {n}], got {tuple(got.shape)}.",
        )
        expect(
            not got.dtype.is_floating_point or bool((got == got.round()).all()),
            "rows of a table are whole numbers; return an integer tensor.",
        )
        got = got.long()
        if torch.equal(got, want):
            continue
        if torch.equal(got, want.T):
            raise ExerciseError(
                "you computed δ(j, i): the row for query i and key j is "
                "i - j + k (query position minus key position)."
            )
        if torch.equal(got, i - j + k):
            raise ExerciseError(
                f"no clipping: with k={k}, values run from {int(got.min())} to "
                f"{int(got.max())}, but the table has only 2k = {2 * k} rows "
                f"(0 .. {2 * k - 1}). Clip to that range."
            )
        if torch.equal(got, (i - j).clamp(0, 2 * k - 1)):
            raise ExerciseError(
                "the distance is not shifted: add k, so that i - j = -k maps "
                "to row 0 and i - j = 0 to row k."
            )
        if int(got.max()) == 2 * k or int(got.min()) == -1:
            raise ExerciseError(
                f"off by one at the clip: with k={k} the rows are 0 .. 2k - 1 = "
                f"{2 * k - 1}, got values from {int(got.min())} to "
                f"{int(got.max())}."
            )
        a, b = _first_mismatch(got, want)
        raise ExerciseError(
            f"δ(i={a}, j={b}) with k={k} should be {int(want[a, b])} "
            f"(i - j = {a - b}), got {int(got[a, b])}."
        )
    edges = (
        (
            "positions that do not start at 0 and a rectangle (3 queries at 5, 2, 9; 4 keys at "
            "0, 7, 8, 1; k = 3): use the positions you are given",
            torch.tensor([[5], [2], [9]]),
            torch.tensor([[0, 7, 8, 1]]),
            3,
        ),
        (
            "the smallest table (k = 1: rows 0 and 1)",
            torch.arange(4)[:, None],
            torch.arange(4)[None],
            1,
        ),
    )
    for description, i, j, k in edges:
        with at_edge(description):
            got = expect_tensor(run_learner_code(delta_fn, i.clone(), j.clone(), k), "delta")
            want = delta(i, j, k)
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}.",
            )
            expect(
                torch.equal(got.long(), want),
                f"expected\n{want}\ngot\n{got.long()}",
            )
    passed("δ(i, j) shifts by k and clips to the 2k rows of the table, for k = 2, 4, 7.")


# ----- log buckets: which distances share a bucket (design) -----------------------------------

_BUCKET_SETTINGS = ((16, 100), (32, 64), (8, 12), (256, 512))


def _bucket_ranges_reference(bucket_size: int, max_position: int) -> dict[int, tuple[int, int]]:
    """Brute force: every signed distance a sequence of max_position tokens has, bucketed."""
    rel = torch.arange(-(max_position - 1), max_position)
    buckets = log_bucket_position(rel, bucket_size, max_position).long()
    ranges: dict[int, tuple[int, int]] = {}
    for d, b in zip(rel.tolist(), buckets.tolist()):
        lo, hi = ranges.get(b, (d, d))
        ranges[b] = (min(lo, d), max(hi, d))
    return ranges


def _as_ranges(got: object) -> dict[int, tuple[int, int]]:
    expect(
        isinstance(got, dict),
        f"return a dict {{bucket: (smallest, largest)}}, got {type(got).__name__}.",
    )
    ranges = {}
    for key, value in got.items():  # type: ignore[union-attr]
        ok = isinstance(value, tuple | list) and len(value) == 2
        expect(ok, f"bucket {key!r}: give a pair (smallest, largest), got {value!r}.")
        try:
            ranges[int(key)] = (int(value[0]), int(value[1]))
        except (TypeError, ValueError):
            raise ExerciseError(f"bucket {key!r}: ids and distances are whole numbers.") from None
    return ranges


def check_bucket_ranges(bucket_ranges: Callable) -> None:
    """`bucket_ranges(bucket_size, max_position)` -> {bucket id: (smallest, largest) signed
    distance i - j that DeBERTa v2/v3's log buckets map to it}, over every distance a sequence of
    max_position tokens has. Compared with brute force for four settings."""
    for bucket_size, max_position in _BUCKET_SETTINGS:
        label = f"(bucket_size={bucket_size}, max_position={max_position})"
        got = _as_ranges(run_learner_code(bucket_ranges, bucket_size, max_position))
        want = _bucket_ranges_reference(bucket_size, max_position)
        if got == want:
            continue
        mid, top = bucket_size // 2, max_position - 1
        if got and min(got) >= 0:
            raise ExerciseError(
                f"{label}: only buckets >= 0. Keys on the other side (i - j < 0) have negative "
                f"buckets, down to -{bucket_size - 1}: cover distances -{top} .. {top}."
            )
        highest = max((hi for _, hi in got.values()), default=None)
        if highest is not None and highest >= max_position:
            raise ExerciseError(
                f"{label}: a distance of {highest} is not reachable: with at most "
                f"{max_position} tokens, |i - j| <= max_position - 1 = {top}."
            )
        extra = sorted(set(got) - set(want))
        missing = sorted(set(want) - set(got))
        expect(
            not extra,
            f"{label}: bucket {extra[0] if extra else ''} does not exist; buckets run from "
            f"-{bucket_size - 1} to {bucket_size - 1}.",
        )
        expect(not missing, f"{label}: bucket {missing[0] if missing else ''} is missing.")
        covered: dict[int, int] = {}
        for b, (lo, hi) in sorted(got.items()):
            expect(lo <= hi, f"{label}: bucket {b} has smallest {lo} > largest {hi}.")
            for d in range(lo, hi + 1):
                if d in covered:
                    raise ExerciseError(
                        f"{label}: the ranges overlap: distance {d} is in bucket {covered[d]} and "
                        f"bucket {b}, but every distance has exactly one bucket."
                    )
                covered[d] = b
        gaps = [d for d in range(-top, top + 1) if d not in covered]
        expect(not gaps, f"{label}: distance {gaps[0] if gaps else ''} is in no bucket.")
        wrong = [b for b in sorted(want, key=abs) if got[b] != want[b]]
        if abs(wrong[0]) in (mid, mid + 1):
            raise ExerciseError(
                f"{label}: off by one at the exact/log boundary: bucket {wrong[0]} should be "
                f"{want[wrong[0]]}, got {got[wrong[0]]}. Distances with |d| <= mid = {mid} are "
                f"their own bucket; the logarithm starts at |d| = {mid + 1}."
            )
        raise ExerciseError(
            f"{label}: bucket {wrong[0]} should cover {want[wrong[0]]}, got {got[wrong[0]]} "
            f"({len(wrong)} buckets wrong)."
        )
    passed(
        "every bucket's range of distances matches brute force, for four (buckets, positions) "
        "settings — the far buckets are wide, the near ones a single distance."
    )


# ----- the c2p and p2c gathers -----------------------------------------------------------------


def _gather_inputs(seed: int, far: bool) -> tuple[Tensor, Tensor, Tensor, int]:
    """Content vectors [heads, n, d], position vectors [heads, 2 span, d], distances [n, n]."""
    g = torch.Generator().manual_seed(seed)
    heads, d, span = 3, 8, 4
    n = 12 if far else 4  # 12 tokens: distances up to 11, beyond the span of 4 (clipping)
    content = torch.randn(heads, n, d, generator=g)
    positions = torch.randn(heads, 2 * span, d, generator=g)
    return content, positions, relative_position(n, n), span


def _gather_reference(content: Tensor, positions: Tensor, rows: Tensor) -> Tensor:
    """out[h, i, j] = content[h, i] · positions[h, rows[i, j]] (no scaling)."""
    by_distance = content @ positions.transpose(-1, -2)  # [heads, n, 2 span]
    return torch.gather(by_distance, -1, rows.expand(content.shape[0], *rows.shape))


def _call_gather(
    fn: Callable, name: str, content: Tensor, positions: Tensor, rel: Tensor, span: int, far: bool
) -> Tensor:
    try:
        got = run_learner_code(fn, content.clone(), positions.clone(), rel.clone(), span)
    except ExerciseError as err:
        if far and "NotImplementedError" not in str(err) and "not implemented" not in str(err):
            raise ExerciseError(
                f"{err} — this input has distances up to {int(rel.max())} but the table has "
                f"only 2 x span = {2 * span} rows: clip the rows to 0 .. {2 * span - 1}."
            ) from None
        raise
    got = expect_tensor(got, name)
    n = rel.shape[0]
    expect(
        tuple(got.shape) == (content.shape[0], n, n),
        f"expected [heads, query, key] = {(content.shape[0], n, n)}, got {tuple(got.shape)}"
        + (
            " (do not .squeeze(): a dimension of size 1 is still one)"
            if got.numel() == content.shape[0] * n * n
            else ""
        )
        + ".",
    )
    return got


def check_c2p(c2p: Callable) -> None:
    """`c2p(query, key_r, relative_pos, span)` -> [heads, n, n] with entry (h, i, j) =
    query[h, i] · key_r[h, δ(i, j)], δ(i, j) = clip(relative_pos[i, j] + span, 0, 2 span - 1).
    Unscaled: the model divides the sum of all terms by sqrt(3d) afterwards."""
    for far in (False, True):
        query, key_r, rel, span = _gather_inputs(0 if far else 1, far)
        got = _call_gather(c2p, "c2p", query, key_r, rel, span, far)
        want = _gather_reference(query, key_r, c2p_index(rel, span))
        if torch.allclose(got, want, atol=1e-5):
            continue
        d = query.shape[-1]
        if torch.allclose(got * math.sqrt(d), want, atol=1e-4) or torch.allclose(
            got * math.sqrt(3 * d), want, atol=1e-4
        ):
            raise ExerciseError(
                "the values are scaled: return the raw dot products; the model "
                "divides the SUM of c2c + c2p + p2c by sqrt(3d) once."
            )
        if torch.allclose(got, want.transpose(-1, -2), atol=1e-5):
            raise ExerciseError("the result is transposed: row i is the query, column j the key.")
        if torch.allclose(got, _gather_reference(query, key_r, c2p_index(-rel, span)), atol=1e-5):
            raise ExerciseError(
                "you read row δ(j, i): c2p reads the row of the distance i - j "
                "(relative_pos[i, j] + span)."
            )
        if torch.allclose(
            got, _gather_reference(query, key_r, rel.clamp(0, 2 * span - 1)), atol=1e-5
        ):
            raise ExerciseError(
                "add span to the distance before the lookup: i - j = -span is "
                "row 0, i - j = 0 is row span."
            )
        raise ExerciseError(
            "c2p[h, i, j] should be query[h, i] · key_r[h, δ(i, j)]; compute "
            "query @ key_r.transpose(-1, -2) ([heads, n, 2 span]) and gather "
            "the column δ(i, j) for each key j."
        )
    g = torch.Generator().manual_seed(5)
    for description, heads, n in (
        ("one head (query [1, 6, 8])", 1, 6),
        ("one token (query [3, 1, 8])", 3, 1),
    ):
        query, key_r = torch.randn(heads, n, 8, generator=g), torch.randn(heads, 8, 8, generator=g)
        rel = relative_position(n, n)
        with at_edge(description):
            got = _call_gather(c2p, "c2p", query, key_r, rel, 4, far=False)
            want = _gather_reference(query, key_r, c2p_index(rel, 4))
            expect(torch.allclose(got, want, atol=1e-5), "the values differ from the reference.")
    passed("c2p equals query_i · K^r[δ(i, j)] for every head and pair, clipping included.")


def check_clipped_pairs(clipped_pairs: Callable) -> None:
    """`clipped_pairs(n, span)` -> (code, paper): boolean [n, n] masks of the pairs (query i, key
    j) whose p2c row does not stand for the true distance (it was clipped), for the released
    code's row δ(i, j) and for the paper's δ(j, i) (He et al. 2021, eq. 4)."""
    for n, span in ((9, 3), (12, 4), (5, 8)):
        label = f"(n={n}, span={span})"
        got = run_learner_code(clipped_pairs, n, span)
        expect(
            isinstance(got, tuple | list) and len(got) == 2,
            "return a pair (code, paper) of boolean masks.",
        )
        code, paper = (expect_tensor(m, "clipped_pairs") for m in got)
        for name, mask in (("code", code), ("paper", paper)):
            expect(
                tuple(mask.shape) == (n, n),
                f"{label}: the {name} mask should be [n, n] = {(n, n)}, got {tuple(mask.shape)}.",
            )
            expect(mask.dtype == torch.bool, f"the {name} mask should be boolean (True = clipped).")
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        d = i - j
        want = (d < -span) | (d > span - 1)
        if not torch.equal(code, want):
            if torch.equal(code, want.T):
                raise ExerciseError(
                    f"{label}: the code mask is mirrored: the code reads row δ(i, j) = "
                    "clip(i - j + span), the query's position minus the key's."
                )
            if torch.equal(code, d.abs() > span):
                raise ExerciseError(
                    f"{label}: the window is not symmetric: rows stand for -span .. span - 1, so "
                    f"i - j = {span} already lands on the last row ({span - 1}) and is clipped."
                )
            if torch.equal(code, d.abs() >= span):
                raise ExerciseError(
                    f"{label}: i - j = -{span} is row 0 exactly, not clipped: rows stand for "
                    f"-span .. span - 1."
                )
            a, b = _first_mismatch(code, want)
            raise ExerciseError(
                f"{label}: code mask at (i={a}, j={b}), i - j = {a - b}, should be "
                f"{bool(want[a, b])}."
            )
        if not torch.equal(paper, want.T):
            if torch.equal(paper, want):
                raise ExerciseError(
                    f"{label}: the paper's mask equals the code's, but the paper reads row "
                    "δ(j, i) = clip(j - i + span): its clipped pairs are mirrored."
                )
            a, b = _first_mismatch(paper, want.T)
            raise ExerciseError(
                f"{label}: paper mask at (i={a}, j={b}), j - i = {b - a}, should be "
                f"{bool(want.T[a, b])}."
            )
    passed(
        "both windows are right: the code clips i - j < -span or >= span, the paper its mirror "
        "image — the two p2c conventions differ in every pair but i = j."
    )


# ----- a design exercise: write the test that proves translation invariance -----------------------

_TI_VOCAB = 100


def _first_layer_scores(model: nn.Module, term: str) -> Callable[[Tensor], Tensor]:
    """input_ids (T,) -> the first layer's `term` scores of head 0, (T, T)."""

    def scores(input_ids: Tensor) -> Tensor:
        with torch.no_grad():
            return model.attention_terms(input_ids[None])[0][term][0, 0]

    return scores


def _score_functions() -> dict[str, Callable[[Tensor], Tensor]]:
    """Named score functions: the translation-invariant ones first (DeBERTa's c2p and c2c, and
    c2p through a numerically different path), then ones that see absolute positions."""
    from course_lib.config import BertConfig, DebertaConfig
    from course_lib.models.bert import BertModel
    from course_lib.models.deberta import DebertaModel

    torch.manual_seed(0)
    sizes = dict(
        vocab_size=_TI_VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
        intermediate_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    deberta = DebertaModel(
        DebertaConfig(**sizes, pos_att_type=["c2p"], position_buckets=-1, max_relative_positions=8)
    ).eval()
    c2p = _first_layer_scores(deberta, "c2p")
    c2c = _first_layer_scores(deberta, "c2c")
    bert = BertModel(BertConfig(**sizes)).eval()

    def bert_scores(input_ids: Tensor) -> Tensor:  # absolute positions are in the input vectors
        attention = bert.encoder.layers[0].attention
        with torch.no_grad():
            x = bert.embeddings(input_ids[None], None)[0]  # (T, H): word + position + segment
            return attention.query(x) @ attention.key(x).T / math.sqrt(x.shape[-1])

    def c2p_rounded(input_ids: Tensor) -> Tensor:  # invariant in exact arithmetic; float rounding
        s = c2p(input_ids)
        noise = (input_ids.float() * 1e-3).sum() * 1e-6  # depends on the whole sequence
        return s + (s.abs().mean() * 1e-7 + noise * 1e-1)

    pos_table = torch.randn(64) * 3

    def parity_positions(input_ids: Tensor) -> Tensor:  # sees position parity: shifts by 2 hide it
        s = c2c(input_ids)
        parity = torch.arange(len(input_ids)) % 2
        return s + pos_table[parity][:, None]

    def far_from_start(input_ids: Tensor) -> Tensor:  # absolute position, but only past 20
        s = c2c(input_ids)
        return s + (torch.arange(len(input_ids)) >= 20).float()[:, None] * 2.0

    return {
        "c2p": c2p,
        "c2c": c2c,
        "c2p (float rounding)": c2p_rounded,
        "BERT's first layer": bert_scores,
        "position parity": parity_positions,
        "positions past 20": far_from_start,
    }


INVARIANT = ("c2p", "c2c", "c2p (float rounding)")


def check_translation_invariance_test(translation_invariant: Callable) -> None:
    """`translation_invariant(score_fn, vocab_size)` -> True when the scores `score_fn(input_ids)`
    ((T,) -> (T, T)) of a phrase do not change when the phrase moves inside a longer sequence,
    False when they do. The checker hands it DeBERTa's c2p and c2c (invariant) and functions
    that see absolute positions."""
    verdicts = {}
    for name, fn in _score_functions().items():
        got = run_learner_code(translation_invariant, fn, _TI_VOCAB)
        expect(
            isinstance(got, bool),
            f"return True or False (a bool), got {type(got).__name__} for the {name} scores.",
        )
        verdicts[name] = got
    if all(verdicts.values()):
        raise ExerciseError(
            "your test says every score function is invariant, BERT's first layer too (its input "
            "adds an absolute position vector). Move a phrase and compare its scores."
        )
    rejected = [name for name in INVARIANT if not verdicts[name]]
    if rejected:
        raise ExerciseError(
            f"your test says the {rejected[0]} scores are not invariant, but they depend only on "
            "the tokens and their distance. Two usual causes: exact equality (scores computed in "
            "a longer sequence differ by float rounding, ~1e-7: use torch.allclose), or comparing "
            "the wrong block (compare the phrase's own rows and columns at its new place)."
        )
    if verdicts["position parity"]:
        raise ExerciseError(
            "your test passes a score function that sees the parity of the position: every "
            "shift you try is even. Try several shifts, odd ones included."
        )
    if verdicts["positions past 20"]:
        raise ExerciseError(
            "your test passes a score function that changes only past position 20: shift the "
            "phrase far (or into many places), not just a few steps."
        )
    expect(not verdicts["BERT's first layer"], "your test passes BERT's first layer.")
    passed(
        "your test accepts c2p and c2c (with float tolerance) and rejects every score function "
        "that sees absolute positions — a property test, like the ones in tests/."
    )


# ----- a design exercise: trace the enhanced mask decoder ------------------------------------------


def _trace(steps: int, **slip: bool) -> list[tuple[str, str]]:
    """The last layer's calls in one DebertaForMaskedLM forward, as (queries, keys_values); the
    switches reproduce the typical slips."""
    start = "encoder_out" if slip.get("from_output") else "H"
    trace = [] if slip.get("no_encoder_pass") else [("H", "H")]
    queries = start if slip.get("no_positions") else f"{start}+P"
    for step in range(1, steps + 1):
        keys = f"{start}+P" if slip.get("positions_in_keys") else start
        if slip.get("self_attention"):
            keys = queries
        trace.append((keys, queries) if slip.get("swapped") else (queries, keys))
        queries = f"out{step}+P" if slip.get("positions_every_step") else f"out{step}"
    return trace


_TRACE_MISTAKES = (
    (
        "no_encoder_pass",
        "the encoder's own pass is missing: before the decoder, the encoder runs its last layer "
        "once as ordinary self-attention, ('H', 'H'); that output is hidden_states[-1]",
    ),
    (
        "positions_every_step",
        "the positions enter at every pass in your trace: only the first queries are H + P; "
        "each later pass asks with the previous output as it is",
    ),
    (
        "positions_in_keys",
        "the keys and values carry the positions in your trace: only the queries do, I = H + P; "
        "keys and values are H",
    ),
    (
        "self_attention",
        "the keys and values change from pass to pass in your trace: every pass reads the same H "
        "as keys and values (that is what lets the decoder re-read the context with new queries)",
    ),
    (
        "swapped",
        "queries and keys are swapped: the positions ride on the QUERIES (what each token asks "
        "for, given where it stands); keys and values are H",
    ),
    (
        "no_positions",
        "no absolute positions: the decoder's first queries are H + P, the one place DeBERTa's "
        "absolute positions enter",
    ),
    (
        "from_output",
        "the decoder starts from the encoder's output: it RE-RUNS the last layer, so H is the "
        "state that enters that layer, hidden_states[-2]",
    ),
)


def _library_trace(steps: int, seed: int = 0) -> list[tuple[str, str]]:
    """The calls of the last encoder layer inside a real DebertaForMaskedLM forward, recorded
    with a hook and named by comparing tensors: what the checker's table is proven against."""
    from course_lib.config import DebertaConfig
    from course_lib.models.deberta import DebertaForMaskedLM

    torch.manual_seed(seed)
    config = DebertaConfig(
        vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, max_relative_positions=16,
        position_buckets=4, use_emd=True, emd_steps=steps,
    )  # fmt: skip
    model = DebertaForMaskedLM(config).eval()
    embeddings = model.backbone.embeddings
    with torch.no_grad():
        embeddings.position_embeddings.weight.normal_(0, 1)
    calls: list[tuple[Tensor, Tensor, Tensor]] = []

    def record(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        x = args[0] if args else kwargs["x"]
        q = kwargs.get("query_states")
        out = output[0] if isinstance(output, tuple) else output
        calls.append((x.detach(), (x if q is None else q).detach(), out.detach()))

    layer = model.backbone.encoder.layers[-1]
    handle = layer.register_forward_hook(record, with_kwargs=True)
    ids = torch.randint(5, 60, (1, 7))
    try:
        with torch.no_grad():
            out = model(ids, output_hidden_states=True)
    finally:
        handle.remove()
    h = out.hidden_states[-2]
    p = embeddings.position_embeddings(embeddings.position_ids(ids))
    known = {"H": h, "H+P": h + p, "encoder_out": calls[0][2]}

    def name(t: Tensor) -> str:
        for key, value in known.items():
            if value.shape == t.shape and torch.equal(value, t):
                return key
        return "?"

    trace = []
    for i, (x, q, result) in enumerate(calls):
        trace.append((name(q), name(x)))
        if i:
            known[f"out{i}"] = result
    return trace


def check_emd_trace(emd_trace: Callable) -> None:
    """`emd_trace(steps)` -> the (queries, keys_values) names of each run of the encoder's last
    layer in one DebertaForMaskedLM forward with `steps` decoder passes: the encoder's own pass
    ('H', 'H'), then ('H+P', 'H'), ('out1', 'H'), ... (He et al. 2021, sec. 3.2)."""
    for steps in (2, 1, 3):
        want = _trace(steps)
        assert _library_trace(steps) == want, steps  # the table is the library's behaviour
        got = run_learner_code(emd_trace, steps)
        expect(
            isinstance(got, list | tuple)
            and all(
                isinstance(c, list | tuple) and len(c) == 2 and all(isinstance(n, str) for n in c)
                for c in got
            ),
            f"return a list of (queries, keys_values) pairs of names, e.g. [('H', 'H'), ...]; got "
            f"{got!r}.",
        )
        got = [tuple(c) for c in got]
        if got == want:
            continue
        edge = {1: "one decoder pass (steps = 1)", 3: "three decoder passes (steps = 3)"}
        where = f"emd_trace({steps}) gives {got}, expected {len(want)} calls"
        for flag, message in _TRACE_MISTAKES:
            if got == _trace(steps, **{flag: True}):
                raise ExerciseError(f"{where}: {message}.")
        if len(got) != len(want):
            hint = (
                f"the layer runs {len(want)} times: once in the encoder, then `steps` = {steps} "
                "times in the decoder (use the argument)"
            )
        else:
            i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            hint = f"call {i} should be {want[i]}, not {got[i]}"
        raise ExerciseError((f"{edge[steps]}: " if steps in edge else "") + f"{where}: {hint}.")
    passed(
        "your trace is what hooks record inside a real DebertaForMaskedLM for 1, 2 and 3 passes: "
        "the positions enter once, in the first queries; every pass reads H as keys and values "
        "with the same weights, so the decoder adds no parameters."
    )
