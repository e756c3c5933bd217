"""Chapter 03 exercise checkers: the factorized embedding count, sentence-order pairs, a shared
layer stack, and ALBERT's whole parameter count with a sharing strategy."""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable
from typing import Any

from torch import nn

from course_lib.config import AlbertConfig
from course_lib.counting import count_parameters
from course_lib.exercises.core import (
    ExerciseError,
    config_from_letters,
    expect,
    passed,
    run_learner_code,
)
from course_lib.models.albert import AlbertEmbeddings


def _embedding_module_parameters(V: int, E: int, H: int, P: int, T: int) -> int:  # noqa: N803
    config = config_from_letters(
        AlbertConfig, V=V, E=E, H=H, P=P, T=T, L=1, I=4, num_attention_heads=1
    )
    return sum(p.numel() for p in AlbertEmbeddings(config).parameters())


def check_factorized_embeddings(albert_embedding_parameters: Callable) -> None:
    """`albert_embedding_parameters(V, E, H, P, T)` -> parameters of ALBERT's embedding module:
    word, position and segment tables in E dimensions, a LayerNorm in E, an E -> H projection."""
    cases = ((30000, 128, 768, 512, 2), (8000, 64, 256, 128, 2), (1000, 16, 96, 64, 3))
    for V, E, H, P, T in cases:  # noqa: N806  (the paper's letters)
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
    got = run_learner_code(sop_pairs, [list(s) for s in segments], random.Random(0))
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
    for num_layers, num_groups in ((6, 1), (6, 2), (12, 3), (4, 4)):
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
    projections: int = 4,
    pooler: bool = True,
    bert_embeddings: bool = False,
    sharing_as: str | None = None,
) -> int:
    """AlbertModel's parameters (one group), with switches that reproduce the typical mistakes."""
    if bert_embeddings:
        embeddings = (V + P + T) * H + 2 * H
    else:
        ln = (2 * E if embedding_ln_size == "E" else 2 * H) if embedding_ln else 0
        embeddings = (V + P + T) * E + ln + E * H + H
    rule = sharing if sharing_as is None else sharing_as
    n_attention = 1 if rule in ("all", "attention") else L
    n_ffn = 1 if rule in ("all", "ffn") else L
    attention = projections * (H * H + H)
    ffn = H * I + I + I * H + H
    ln = 2 * H if sublayer_ln else 0
    lns = 2 * L * ln if ln_per_applied_layer else (n_attention + n_ffn) * ln
    return embeddings + n_attention * attention + n_ffn * ffn + lns + (H * H + H if pooler else 0)


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
