"""Chapter 03 exercise checkers: the factorized embedding count, sentence-order pairs, a shared
layer stack, ALBERT's whole parameter count with a sharing strategy, and two design tasks: the
largest embedding size E within a parameter budget, and partial sharing in real encoder layers."""

from __future__ import annotations

import contextlib
import numbers
import random
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from course_lib.config import AlbertConfig
from course_lib.counting import count_parameters
from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    config_from_letters,
    expect,
    passed,
    run_learner_code,
)
from course_lib.models.albert import AlbertEmbeddings
from course_lib.modules.encoder import EncoderLayer
from course_lib.modules.sharing import SUBLAYERS, SharedEncoder, sharing_plan


def _embedding_module_parameters(V: int, E: int, H: int, P: int, T: int) -> int:  # noqa: N803
    config = config_from_letters(
        AlbertConfig, V=V, E=E, H=H, P=P, T=T, L=1, I=4, num_attention_heads=1
    )
    return sum(p.numel() for p in AlbertEmbeddings(config).parameters())


def check_factorized_embeddings(albert_embedding_parameters: Callable) -> None:
    """`albert_embedding_parameters(V, E, H, P, T)` -> parameters of ALBERT's embedding module:
    word, position and segment tables in E dimensions, a LayerNorm in E, an E -> H projection."""
    cases = ((30000, 128, 768, 512, 2), (8000, 64, 256, 128, 2), (1000, 16, 96, 64, 3))
    edge = (40, 4, 12, 6, 1)  # one segment type (as RoBERTa-style inputs), a tiny vocabulary
    for V, E, H, P, T in (*cases, edge):  # noqa: N806  (the paper's letters)
        expected = _embedding_module_parameters(V, E, H, P, T)
        got = run_learner_code(albert_embedding_parameters, V, E, H, P, T)
        expect(isinstance(got, int), f"return an int, got {type(got).__name__}.")
        if got == expected:
            continue
        where = f"for V={V}, E={E}, H={H}, P={P}, T={T} you get {got:,}, expected {expected:,}"
        mistakes = {
            (V + P + T) * H + 2 * H: "that is BERT's V x H table: ALBERT looks tokens up in E "
            "dimensions and projects E -> H",
            expected - H: "the projection's bias (H numbers) is missing",
            expected - 2 * E: "the LayerNorm (a scale and a shift, 2E numbers) is missing",
            expected - 2 * E + 2 * H: "the LayerNorm sits before the projection, so it has 2E "
            "parameters, not 2H",
            V * E + (P + T) * H + E * H + H + 2 * H: "the position and segment tables are E-wide "
            "too (the whole sum is computed in E dimensions, then projected)",
            expected - E * H - H: "the E -> H projection (E x H weights + H bias) is missing",
        }
        hint = mistakes.get(got)
        if (V, E, H, P, T) == edge:
            where = f"one segment type and a tiny vocabulary: {where}"
        raise ExerciseError(
            f"{where}: {hint}."
            if hint
            else f"{where} (off by "
            f"{got - expected:+,}). Count each table, the LayerNorm and the "
            "projection separately."
        )
    passed(
        "your formula equals AlbertEmbeddings' parameter count; ALBERT-base: 4,005,120 "
        "(incl. its LayerNorm) instead of BERT's 23.4M at V = 30000."
    )


def check_sop_pairs(sop_pairs: Callable) -> None:
    """`sop_pairs(segments, rng)` -> one (first, second, sentence_order_label) per adjacent pair
    (segments[i], segments[i + 1]) of one document, swapped with probability 1/2 (label 1)."""
    segments = [[1000 + i, 2000 + i, 3000 + i] for i in range(400)]
    given = [list(s) for s in segments]
    got = run_learner_code(sop_pairs, given, random.Random(0))
    with at_edge("inputs left unmodified"):
        expect(
            given == segments,
            f"`{getattr(sop_pairs, '__name__', 'sop_pairs')}` modified the list of segments it "
            "was given (popped, swapped or extended in place): the document is still needed "
            "(next epoch, other pairs). Build new pairs and leave `segments` as it was.",
        )
    expect(
        isinstance(got, list),
        f"return a list of (first, second, label) tuples, got {type(got).__name__}.",
    )
    expect(
        len(got) == len(segments) - 1,
        f"{len(segments)} consecutive segments give {len(segments) - 1} adjacent pairs "
        f"(segment i with segment i + 1); you returned {len(got)}.",
    )
    index = {tuple(s): i for i, s in enumerate(segments)}
    swaps = 0
    for n, item in enumerate(got):
        expect(
            isinstance(item, (tuple, list)) and len(item) == 3,
            f"pair {n} should be (first, second, label), got {item!r}.",
        )
        first, second, label = item
        i, j = index.get(tuple(first)), index.get(tuple(second))
        expect(
            i is not None and j is not None,
            f"pair {n} contains a segment that is not one of the inputs (keep segments whole).",
        )
        expect(label in (0, 1), f"labels are 0 (in order) or 1 (swapped); pair {n} has {label!r}.")
        expect(
            isinstance(label, numbers.Integral) and not isinstance(label, bool),
            f"pair {n} has the label {label!r} ({type(label).__name__}): use the integers 0 and "
            "1 (class indices for the cross-entropy loss), not True/False or floats.",
        )
        if abs(i - j) != 1:
            raise ExerciseError(
                f"pair {n} joins segments {i} and {j}, which are not neighbours. Taking the "
                "second segment from elsewhere is NSP's negative; SOP's negative is the SAME two "
                "neighbouring segments in the wrong order."
            )
        expect(
            {i, j} == {n, n + 1}, f"pair {n} should use segments {n} and {n + 1}, got {i} and {j}."
        )
        if (i > j) != (label == 1):
            raise ExerciseError(
                f"pair {n} is {'swapped' if i > j else 'in order'} but labelled {label}: label 1 "
                "means swapped (second segment first), 0 means original order."
            )
        swaps += i > j
    rate = swaps / len(got)
    expect(swaps > 0, "no pair was swapped: swap each pair with probability 1/2 (use rng).")
    expect(0.42 <= rate <= 0.58, f"{rate:.0%} of pairs were swapped; expected about 50%.")
    again = run_learner_code(sop_pairs, [list(s) for s in segments], random.Random(0))
    expect(
        [p[2] for p in again] == [p[2] for p in got],
        "the same rng seed gave different swaps: draw every random choice from `rng`.",
    )
    other = run_learner_code(sop_pairs, [list(s) for s in segments], random.Random(1))
    expect(
        [p[2] for p in other] != [p[2] for p in got],
        "an rng with a different seed gave the same swaps: draw every random choice from "
        "`rng` instead of seeding your own random state.",
    )
    for description, doc in (
        ("a document of two segments (one pair)", [[11, 12], [13]]),
        ("a document of ONE segment (no pair at all)", [[21, 22, 23]]),
    ):
        with at_edge(description):
            pairs = run_learner_code(sop_pairs, [list(x) for x in doc], random.Random(3))
            expect(
                isinstance(pairs, list) and len(pairs) == len(doc) - 1,
                f"{len(doc)} segment(s) give {len(doc) - 1} adjacent pair(s); you returned "
                f"{pairs!r}.",
            )
            if pairs:
                first, second, label = pairs[0]
                expect(
                    (list(first), list(second), label)
                    in ((doc[0], doc[1], 0), (doc[1], doc[0], 1)),
                    f"the one pair should be ({doc[0]}, {doc[1]}, 0) or ({doc[1]}, {doc[0]}, 1), "
                    f"got {pairs[0]!r}.",
                )
    passed(f"{len(got)} adjacent pairs, {rate:.0%} swapped, labels match the order.")


class _CountingLayer(nn.Module):
    """A stand-in layer: a small linear map, counted when built."""

    built = 0

    def __init__(self) -> None:
        super().__init__()
        _CountingLayer.built += 1
        self.linear = nn.Linear(4, 4)


def check_shared_layers(build_shared_layers: Callable) -> None:
    """`build_shared_layers(make_layer, num_layers, num_groups)` -> nn.ModuleList of num_layers
    entries where consecutive runs of num_layers // num_groups entries are the SAME module."""
    for num_layers, num_groups in ((6, 1), (6, 2), (12, 3), (4, 4), (1, 1)):
        edge = "one layer (num_layers = 1, num_groups = 1)" if num_layers == 1 else None
        with at_edge(edge) if edge else contextlib.nullcontext():
            _CountingLayer.built = 0
            got = run_learner_code(build_shared_layers, _CountingLayer, num_layers, num_groups)
            expect(
                isinstance(got, nn.ModuleList),
                f"return an nn.ModuleList (so PyTorch registers the layers), got {type(got).__name__}.",
            )
            expect(
                len(got) == num_layers,
                f"the list must hold one entry per applied layer ({num_layers}), got {len(got)}.",
            )
            run = num_layers // num_groups
            expected = [i // run for i in range(num_layers)]
            owners: dict[int, int] = {}
            pattern = [owners.setdefault(id(layer), len(owners)) for layer in got]
            distinct = len(owners)
            if distinct == num_layers and num_groups < num_layers:
                same_values = all(
                    (a.linear.weight == b.linear.weight).all()
                    for a, b in zip(list(got)[:-1], list(got)[1:])
                    if hasattr(a, "linear") and hasattr(b, "linear")
                )
                raise ExerciseError(
                    f"all {num_layers} entries are different objects"
                    + (" holding equal values (copies)" if same_values else "")
                    + ": copies are not shared, each would be trained separately. Put the SAME "
                    "object in several places of the list."
                )
            if pattern == [i % num_groups for i in range(num_layers)] and num_groups not in (
                1,
                num_layers,
            ):
                raise ExerciseError(
                    f"groups are interleaved (layer i uses group i % {num_groups}); ALBERT's groups "
                    f"are consecutive runs: layers 0..{run - 1} share one module, {run}..{2 * run - 1} "
                    "the next, and so on."
                )
            expect(
                pattern == expected,
                f"for {num_layers} layers in {num_groups} groups the sharing pattern should be "
                f"{expected} (entries with the same number are the same object), got {pattern}.",
            )
            expect(
                _CountingLayer.built == num_groups,
                f"make_layer was called {_CountingLayer.built} times; build exactly one layer per "
                f"group ({num_groups}) and reuse it.",
            )
            n_params = sum(p.numel() for p in got.parameters())
            expect(
                n_params == num_groups * 20,
                f"the list has {n_params} parameters, expected "
                f"{num_groups * 20} (one layer's 20 per group).",
            )
    passed("consecutive groups share one module each; parameters() counts each group once.")


def _albert_count(
    V: int,
    E: int,
    H: int,
    L: int,
    I: int,  # noqa: E741
    P: int,
    T: int,
    sharing: str,
    *,
    ln_per_applied_layer: bool = False,
    sublayer_ln: bool = True,
    embedding_ln: bool = True,
    embedding_ln_size: str = "E",
    embedding_projection: bool = True,
    position_tables: bool = True,
    word_table_h: bool = False,
    biases: bool = True,
    projections: int = 4,
    pooler: bool = True,
    bert_embeddings: bool = False,
    sharing_as: str | None = None,
) -> int:
    """AlbertModel's parameters (one group), with switches that reproduce the typical mistakes."""
    b = 1 if biases else 0
    if bert_embeddings:
        embeddings = (V + P + T) * H + 2 * H
    else:
        ln = (2 * E if embedding_ln_size == "E" else 2 * H) if embedding_ln else 0
        tables = (V * H if word_table_h else V * E) + ((P + T) * E if position_tables else 0)
        embeddings = tables + ln + ((E * H + b * H) if embedding_projection else 0)
    rule = sharing if sharing_as is None else sharing_as
    n_attention = 1 if rule in ("all", "attention") else L
    n_ffn = 1 if rule in ("all", "ffn") else L
    attention = projections * (H * H + b * H)
    ffn = H * I + b * I + I * H + b * H
    ln = 2 * H if sublayer_ln else 0
    lns = 2 * L * ln if ln_per_applied_layer else (n_attention + n_ffn) * ln
    pooler_count = H * H + b * H if pooler else 0
    return embeddings + n_attention * attention + n_ffn * ffn + lns + pooler_count


_SWAP = {"attention": "ffn", "ffn": "attention", "all": "all", "none": "none"}

_ALBERT_MISTAKES: tuple[tuple[dict, str], ...] = (
    (
        {"ln_per_applied_layer": True},
        "the LayerNorms are counted once per applied layer, but each "
        "sits INSIDE its sublayer and is shared with it: count a LayerNorm as often as its sublayer",
    ),
    (
        {"sublayer_ln": False},
        "the sublayer LayerNorms are missing: the attention and the "
        "feed-forward sublayer each end with a LayerNorm of 2H parameters",
    ),
    (
        {"embedding_ln": False},
        "the embedding LayerNorm (2E, on the E-dimensional sum, before the projection) is missing",
    ),
    (
        {"embedding_ln_size": "H"},
        "the embedding LayerNorm sits before the projection: 2E parameters, not 2H",
    ),
    (
        {"projections": 3},
        "three H x H projections per attention sublayer: there are FOUR (query, "
        "key, value and the output projection)",
    ),
    ({"pooler": False}, "the pooler (H x H + H) is missing"),
    (
        {"bert_embeddings": True},
        "the embeddings look like BERT's (V x H); ALBERT's are factorized "
        "(V x E tables, then an E -> H projection)",
    ),
    (
        {"sharing_as": "swap"},
        "'attention' and 'ffn' are swapped: sharing='attention' shares the "
        "attention sublayers (the feed-forward ones stay per layer), sharing='ffn' the reverse",
    ),
)


def check_albert_parameters(albert_parameters: Callable) -> None:
    """`albert_parameters(V, E, H, L, I, P, T, sharing)` -> parameters of AlbertModel (pooler
    included, one group), for sharing in 'all', 'attention', 'ffn', 'none'."""
    cases: list[tuple[Any, ...]] = [
        (30000, 128, 768, 12, 3072, 512, 2, "all"),
        (30000, 128, 768, 12, 3072, 512, 2, "none"),
        (30000, 128, 768, 12, 3072, 512, 2, "attention"),
        (30000, 128, 768, 12, 3072, 512, 2, "ffn"),
        (5000, 32, 128, 6, 256, 128, 2, "all"),
        (5000, 32, 128, 6, 256, 128, 2, "none"),
        (5000, 32, 128, 6, 256, 128, 2, "attention"),
    ]
    results = []
    for case in cases:
        V, E, H, L, I, P, T, sharing = case  # noqa: N806, E741
        config = config_from_letters(
            AlbertConfig, V=V, E=E, H=H, L=L, I=I, P=P, T=T, num_attention_heads=1, sharing=sharing
        )
        ref = count_parameters(config, "AlbertModel")["total"]
        assert ref == _albert_count(*case), case  # the mistake table starts from the truth
        got = run_learner_code(albert_parameters, V, E, H, L, I, P, T, sharing)
        expect(isinstance(got, int), f"return an int, got {type(got).__name__}.")
        results.append((case, got, ref))
    wrong = [(case, got, ref) for case, got, ref in results if got != ref]
    if not wrong:
        passed(
            "your formula matches count_parameters for every sharing strategy; ALBERT-base "
            "(all-shared) = 11,683,584."
        )
        return

    def mistaken(case: tuple[Any, ...], flags: dict) -> int:
        if flags.get("sharing_as") == "swap":
            flags = {**flags, "sharing_as": _SWAP[case[-1]]}
        return _albert_count(*case, **flags)

    hints = [
        hint
        for flags, hint in _ALBERT_MISTAKES
        if all(got == mistaken(case, flags) for case, got, _ in results)
    ]
    (V, E, H, L, I, P, T, sharing), got, ref = wrong[0]  # noqa: N806, E741
    diff = got - ref
    where = (
        f"for V={V}, E={E}, H={H}, L={L}, I={I}, sharing={sharing!r} you get {got:,}, "
        f"expected {ref:,} (off by {diff:+,})"
    )
    if not hints:
        attention_layer = 4 * (H * H + H) + 2 * H  # four projections + its LayerNorm
        ffn_layer = H * I + I + I * H + H + 2 * H
        n_attention = 1 if sharing in ("all", "attention") else L
        n_ffn = 1 if sharing in ("all", "ffn") else L
        for counted_attention in (1, L):
            for counted_ffn in (1, L):
                off = (counted_attention - n_attention) * attention_layer + (
                    counted_ffn - n_ffn
                ) * ffn_layer
                if off == 0 or diff != off:
                    continue
                for name, counted, right in (
                    ("attention", counted_attention, n_attention),
                    ("feed-forward", counted_ffn, n_ffn),
                ):
                    if counted > right:
                        hints.append(
                            f"the {name} sublayers are counted L times, but with "
                            f"sharing={sharing!r} they are shared: count them once"
                        )
                    elif counted < right:
                        hints.append(
                            f"the {name} sublayers are NOT shared with sharing="
                            f"{sharing!r}: count all L of them"
                        )
    raise ExerciseError(
        where
        + (
            ": " + "; ".join(hints) + "."
            if hints
            else ". Compare term by term with count_parameters(config)."
        )
    )


# --- design: the largest embedding size E within a parameter budget -----------------------------

_BUDGET_SHAPES: dict[str, tuple[int, int, int, int, int, int]] = {
    # name: (V, H, L, I, P, T)
    "base": (30000, 768, 12, 3072, 512, 2),
    "small": (5000, 256, 6, 1024, 128, 2),
}


def _exact_albert_count(
    V: int,  # noqa: N803
    E: int,  # noqa: N803
    H: int,  # noqa: N803
    L: int,  # noqa: N803
    I: int,  # noqa: E741, N803
    P: int,  # noqa: N803
    T: int,  # noqa: N803
    sharing: str,
) -> int:
    """AlbertModel's parameters from the library's counter (the truth the checker trusts)."""
    config = config_from_letters(
        AlbertConfig, V=V, E=E, H=H, L=L, I=I, P=P, T=T, num_attention_heads=1, sharing=sharing
    )
    return count_parameters(config, "AlbertModel")["total"]


def _largest_fitting(count: Callable[[int], int], budget: int, H: int) -> int | None:  # noqa: N803
    """The largest E in 1..H-1 with count(E) <= budget (count grows with E there), else None."""
    if count(1) > budget:
        return None
    low, high = 1, H - 1  # count(low) <= budget; find the last E that fits
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if count(mid) <= budget else (low, mid - 1)
    return low


def _budget_cases() -> list[tuple[int, int, int, int, int, int, int, str]]:
    """(budget, V, H, L, I, P, T, sharing): round budgets, a budget that is exactly the count at
    some E and one parameter below it, one too small for E = 1 and one too large to bind."""
    base, small = _BUDGET_SHAPES["base"], _BUDGET_SHAPES["small"]
    exact = _exact_albert_count(base[0], 256, *base[1:], "all")
    exact_small = _exact_albert_count(small[0], 96, *small[1:], "ffn")
    return [
        (12_000_000, *base, "all"),
        (exact, *base, "all"),
        (exact - 1, *base, "all"),
        (95_000_000, *base, "none"),
        (3_000_000, *small, "attention"),
        (exact_small, *small, "ffn"),
        (7_000_000, *base, "all"),
        (100_000_000, *small, "all"),
    ]


# Each typical mistake as the count it uses (switches of _albert_count) and what to say.
_BUDGET_MISTAKES: tuple[tuple[dict, str], ...] = (
    (
        {"embedding_projection": False},
        "your count leaves out the E -> H projection (E x H weights + H bias): every unit of E "
        "costs V + P + T + 2 + H parameters, not V + P + T + 2",
    ),
    (
        {"word_table_h": True},
        "your count has a V x H word table: in ALBERT the word table is V x E (that is the whole "
        "point of the factorization), so E multiplies V",
    ),
    (
        {"position_tables": False},
        "your count leaves out the position and segment tables: they are E-wide too, (P + T) x E",
    ),
    (
        {"biases": False, "sublayer_ln": False, "embedding_ln": False},
        "your count has the weight matrices only: add the biases (of every linear layer, the "
        "projection and the pooler included) and the LayerNorms (2E after the embeddings, 2H per "
        "distinct sublayer)",
    ),
    (
        {"biases": False},
        "your count leaves out the biases (one per output of every linear layer)",
    ),
    (
        {"sublayer_ln": False, "embedding_ln": False},
        "your count leaves out the LayerNorms (2E after the embeddings, 2H per distinct sublayer)",
    ),
    ({"pooler": False}, "your count leaves out the pooler (H x H + H)"),
    (
        {"sharing_as": "none"},
        "your count ignores `sharing`: a shared sublayer is counted once, so sharing leaves "
        "room for a much larger E",
    ),
    (
        {"sharing_as": "swap"},
        "'attention' and 'ffn' are swapped: sharing='attention' shares the attention sublayers "
        "(the feed-forward ones stay per layer), sharing='ffn' the reverse",
    ),
)


def check_embedding_size_for_budget(largest_embedding_size: Callable) -> None:
    """`largest_embedding_size(budget, V, H, L, I, P, T, sharing)` -> the largest E in 1..H-1
    whose AlbertModel (pooler included, one group) has at most `budget` parameters; None if none."""
    results = []
    for case in _budget_cases():
        budget, V, H, L, I, P, T, sharing = case  # noqa: N806, E741

        def count(E: int, V=V, H=H, L=L, I=I, P=P, T=T, sharing=sharing) -> int:  # noqa: N803, E741
            return _exact_albert_count(V, E, H, L, I, P, T, sharing)

        expected = _largest_fitting(count, budget, H)
        got = run_learner_code(largest_embedding_size, budget, V, H, L, I, P, T, sharing)
        expect(
            got is None or (isinstance(got, numbers.Integral) and not isinstance(got, bool)),
            f"return an int (or None when nothing fits), got {got!r} ({type(got).__name__}); "
            "with a closed form, divide with // and not /.",
        )
        results.append((case, count, got, expected))
    wrong = [r for r in results if r[2] != r[3]]
    if not wrong:
        base = next(got for case, _, got, _ in results if case[0] == 12_000_000)
        passed(
            f"the largest E for every budget, boundary and sharing strategy; a 12M budget at "
            f"ALBERT-base's shape (all-shared) allows E = {base}."
        )
        return

    def mistaken(case: tuple[Any, ...], flags: dict) -> int | None:
        budget, V, H, L, I, P, T, sharing = case  # noqa: N806, E741
        if flags.get("sharing_as") == "swap":
            flags = {**flags, "sharing_as": _SWAP[sharing]}
        return _largest_fitting(
            lambda E: _albert_count(V, E, H, L, I, P, T, sharing, **flags),  # noqa: N803
            budget,
            H,
        )

    hints = [
        hint
        for flags, hint in _BUDGET_MISTAKES
        if all(got == mistaken(case, flags) for case, _, got, _ in results)
    ]
    (budget, V, H, L, I, P, T, sharing), count, got, expected = wrong[0]  # noqa: N806, E741
    where = (
        f"for budget={budget:,}, V={V}, H={H}, L={L}, I={I}, P={P}, T={T}, sharing={sharing!r} "
        f"you return E={got}, expected {expected}"
    )
    if hints:
        raise ExerciseError(f"{where}: {'; '.join(hints)}.")
    if expected is None:
        expect(
            got != 0,
            f"{where}: even E = 1 needs {count(1):,} parameters, over the budget; return None "
            "when nothing fits (0 is not an embedding size).",
        )
        raise ExerciseError(
            f"{where}: even E = 1 needs {count(1):,} parameters, over the budget; return None "
            "when nothing fits."
        )
    if got is None:
        raise ExerciseError(
            f"{where}: E={expected} fits ({count(expected):,} <= {budget:,} parameters)."
        )
    if got >= H:
        raise ExerciseError(
            f"{where}: E must stay below H={H}: the factorization exists to make E smaller than "
            f"H (E >= H only adds parameters), so cap the answer at H - 1 = {H - 1}."
        )
    if got < 1:
        raise ExerciseError(f"{where}: an embedding size is at least 1.")
    used = count(got)
    if used > budget:
        raise ExerciseError(
            f"{where}: E={got} needs {used:,} parameters, {used - budget:,} over the budget. "
            "Return the last E that fits, not the first that does not."
        )
    after = count(got + 1)
    if after == budget:
        raise ExerciseError(
            f"{where}: E={got + 1} needs exactly {budget:,} parameters, which is within the "
            "budget (at most `budget`, so `<=`): an off-by-one at the boundary."
        )
    raise ExerciseError(
        f"{where}: E={got + 1} still fits ({after:,} <= {budget:,} parameters). How much does one "
        "more unit of E cost?"
    )


# --- design: partial sharing in real encoder layers ---------------------------------------------

_OWNS_WITH = {
    "attention": "attention",
    "attention_norm": "attention",
    "feed_forward": "ffn",
    "output_norm": "ffn",
}
_SHARED = {
    "all": {"attention", "ffn"},
    "attention": {"attention"},
    "ffn": {"ffn"},
    "none": set(),
}


def _sharing_config(sharing: str) -> AlbertConfig:
    return config_from_letters(
        AlbertConfig, V=50, E=8, H=16, L=4, I=32, P=16, T=2, num_attention_heads=2, sharing=sharing
    )


def _layer_parameters(config: AlbertConfig) -> int:
    """The encoder layers' share of count_parameters: attention, feed-forward, their LayerNorms."""
    counts = count_parameters(config, "AlbertModel")
    embedding_norm = 2 * config.embedding_size  # counted under layer_norm, not in the layers
    return counts["attention"] + counts["feed_forward"] + counts["layer_norm"] - embedding_norm


def _same_values(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def check_partial_sharing(share_sublayers: Callable) -> None:
    """`share_sublayers(layers, sharing)` -> nn.ModuleList of the same L EncoderLayers in which
    what `sharing` shares is layer 0's module (the same object) everywhere; the rest stays own."""
    for sharing in ("attention", "ffn", "all", "none"):
        config = _sharing_config(sharing)
        L = config.num_hidden_layers  # noqa: N806
        torch.manual_seed(0)
        originals = [EncoderLayer(config) for _ in range(L)]
        # each layer's own sublayers, recorded before the learner reassigns attributes in place
        built = [{name: getattr(layer, name) for name in SUBLAYERS} for layer in originals]
        got = run_learner_code(share_sublayers, nn.ModuleList(originals), sharing)
        expect(
            isinstance(got, nn.ModuleList),
            f"return an nn.ModuleList (so PyTorch registers the layers), got {type(got).__name__}.",
        )
        expect(
            len(got) == L,
            f"sharing={sharing!r}: the list must still hold one entry per applied layer ({L}), "
            f"got {len(got)}.",
        )
        shared = _SHARED[sharing]
        if sharing in ("attention", "ffn") and all(layer is got[0] for layer in got):
            raise ExerciseError(
                f"sharing={sharing!r}: every entry is the whole layer 0, which shares the "
                f"{'feed-forward' if sharing == 'attention' else 'attention'} sublayer too: that "
                "is sharing='all'. Share the sublayer modules, keep the layers."
            )
        for name in SUBLAYERS:
            should_share = _OWNS_WITH[name] in shared
            first = getattr(got[0], name)
            for i in range(1, L):
                module = getattr(got[i], name)
                if should_share and module is not first:
                    partner = "attention" if name == "attention_norm" else "feed_forward"
                    if name.endswith("norm") and getattr(got[i], partner) is getattr(
                        got[0], partner
                    ):
                        raise ExerciseError(
                            f"sharing={sharing!r}: layer {i}'s `{name}` is its own, but it is "
                            f"part of the {partner.replace('_', '-')} sublayer "
                            "(x = LayerNorm(x + Sublayer(x))): a shared sublayer shares its "
                            "LayerNorm too."
                        )
                    if _same_values(module, first):
                        raise ExerciseError(
                            f"sharing={sharing!r}: layer {i}'s `{name}` holds the same values as "
                            "layer 0's but is a different object: a copy is trained separately "
                            "(and counted again). Assign the module itself, "
                            f"`layers[{i}].{name} = layers[0].{name}`."
                        )
                    other = "attention" if _OWNS_WITH[name] == "ffn" else "ffn"
                    if sharing != "all" and all(
                        getattr(got[j], n) is getattr(got[0], n)
                        for j in range(L)
                        for n in SUBLAYERS
                        if _OWNS_WITH[n] == other
                    ):
                        raise ExerciseError(
                            f"'attention' and 'ffn' are swapped: sharing={sharing!r} shares the "
                            f"{'attention' if sharing == 'attention' else 'feed-forward'} "
                            "sublayer (its module and its LayerNorm) and keeps the other per layer."
                        )
                    raise ExerciseError(
                        f"sharing={sharing!r}: layer {i}'s `{name}` should be layer 0's (the same "
                        "object)."
                    )
                if not should_share and module is first:
                    raise ExerciseError(
                        f"sharing={sharing!r}: layer {i}'s `{name}` is layer 0's, but "
                        f"sharing={sharing!r} keeps each layer's own `{name}`."
                    )
        for i in range(L):
            for name in SUBLAYERS:
                owner = 0 if _OWNS_WITH[name] in shared else i
                why = " (the first layer owns what is shared)" if owner == 0 else ""
                expect(
                    getattr(got[i], name) is built[owner][name],
                    f"sharing={sharing!r}: layer {i}'s `{name}` should be the one layer {owner} "
                    f"was built with{why}.",
                )
        # the proof, twice: the exact count, and the outputs of ALBERT's own shared encoder
        expected = _layer_parameters(config)
        n_params = sum(p.numel() for p in got.parameters())
        expect(
            n_params == expected,
            f"sharing={sharing!r}: your layers hold {n_params:,} parameters; count_parameters "
            f"says {expected:,}.",
        )
        reference = SharedEncoder(config)
        for i, (i_attention, i_ffn) in enumerate(sharing_plan(L, sharing=sharing)):
            for name in SUBLAYERS:
                owner = i_attention if _OWNS_WITH[name] == "attention" else i_ffn
                getattr(reference.layers[i], name).load_state_dict(built[owner][name].state_dict())
        x = torch.randn(2, 5, config.hidden_size, generator=torch.Generator().manual_seed(1))
        ours, theirs = x, x
        with torch.no_grad():
            for layer in got:
                ours = layer(ours)[0]
            for layer in reference.layers:
                theirs = layer(theirs)[0]
        expect(
            torch.allclose(ours, theirs, atol=1e-6),
            f"sharing={sharing!r}: the output differs from ALBERT's SharedEncoder with the same "
            "weights.",
        )
    n = {s: _layer_parameters(_sharing_config(s)) for s in ("none", "attention", "ffn", "all")}
    passed(
        "shared by identity, with layer 0's weights; your four layers (H = 16, I = 32) hold "
        f"{n['none']:,} parameters unshared, {n['attention']:,} sharing the attention, "
        f"{n['ffn']:,} sharing the feed-forward and {n['all']:,} sharing all, as count_parameters "
        "says, and give SharedEncoder's outputs."
    )
