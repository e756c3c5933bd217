"""The instant checks of ALBERT's lesson build cells (chapter 03, notebooks 01-03 and 06).

Each `check_*` is a `BuildCheck`: it runs the learner's code on fresh inputs it makes itself,
compares with the library (or a reference written here from the library's pieces and tested
equal to it), and names the first mistake with numbers, probing the edges the lessons talk
about: E = H (no projection), three segment types, one token, a batch of one, one layer, copies
that are not shared, a two-sentence chunk, a pair that already fits, a tie in length, a two-word
vocabulary, inputs left unmodified.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from course_lib.config import AlbertConfig
from course_lib.counting import count_parameters
from course_lib.data.pairs import concat_segments, truncate_pair
from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import ExerciseError, expect, expect_tensor, run_learner_code
from course_lib.labs import albert as sop_lab
from course_lib.labs import albert_sharing as sharing_lab
from course_lib.labs.albert import conditional_entropy
from course_lib.models.albert import AlbertEmbeddings
from course_lib.modules.encoder import EncoderLayer
from course_lib.modules.sharing import SUBLAYERS

# ----- notebook 01: the factorized embedding count ------------------------------------------------


def factorized_embedding_parameters(V: int, E: int, H: int, P: int = 512, T: int = 2) -> int:  # noqa: N803
    """count_parameters' "embeddings" of an ALBERT: (V + P + T) x E tables and, when E < H, the
    E -> H projection (E x H + H); at E = H there is no projection (the LayerNorm is booked
    under layer_norm)."""
    config = AlbertConfig(
        vocab_size=V, embedding_size=E, hidden_size=H, max_position_embeddings=P,
        type_vocab_size=T, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4,
    )  # fmt: skip
    return count_parameters(config, "AlbertModel")["embeddings"]


_COUNT_CASES = (
    (30000, 128, 768, 512, 2),
    (8000, 64, 256, 128, 2),
    (1000, 16, 96, 64, 3),  # three segment types, a shorter position table
    (500, 64, 64, 32, 2),  # E = H: no projection
)


def _probe_count(fn: Callable) -> str:
    for V, E, H, P, T in _COUNT_CASES:  # noqa: N806  (the paper's letters)
        got = run_learner_code(fn, V, E, H, P, T)
        expect(
            isinstance(got, int) and not isinstance(got, bool),
            f"return an int (a number of parameters), got {type(got).__name__}.",
        )
        want = factorized_embedding_parameters(V, E, H, P, T)
        if got == want:
            continue
        where = f"for V={V}, E={E}, H={H}, P={P}, T={T} you count {got:,}, expected {want:,}"
        projection = E * H + H if E != H else 0
        hints = {
            (V + P + T) * H: "that is BERT's count (V + P + T) x H: ALBERT's tables are E-wide",
            (V + P + T) * E + E * H + H: f"at E = H = {H} there is no projection (the tables are "
            "already H-wide; the original code skips it too)",
            want - H: "the projection's bias (H numbers) is missing",
            want - projection: "the E -> H projection (E x H weights + H bias) is missing",
            want + 2 * E: "the LayerNorm (2E) is in, but count_parameters books it under "
            "layer_norm, not embeddings: leave it out here",
            V * E + (P + T) * H + projection: "the position and segment tables are E-wide too: "
            "the whole sum is computed in E dimensions, then projected",
            (V + 512 + 2) * E + projection: "use the P and T you are given, not 512 and 2",
            (V + P + 2) * E + projection: "use the T you are given (here 3 segment types), not 2",
        }
        hint = hints.get(got)
        raise ExerciseError(f"{where}: {hint}." if hint else f"{where} (off by {got - want:+,}).")
    return "your count equals count_parameters' embeddings, three segment types and E = H included."


check_factorized_count = BuildCheck(
    _probe_count,
    fallback=factorized_embedding_parameters,
    fallback_name="count_parameters(config)['embeddings']",
    todo="count the E-wide word, position and segment tables plus the E -> H projection "
    "(weights and bias; none at E = H).",
)


# ----- notebook 01: the factorized embedding module ------------------------------------------------

_PARTS = {
    "word": "word_embeddings",
    "position": "position_embeddings",
    "segment": "token_type_embeddings",
    "norm": "LayerNorm",
    "projection": "projection",
}


def _library_embeddings(V: int, P: int, T: int, E: int, H: int, seed: int) -> AlbertEmbeddings:  # noqa: N803
    torch.manual_seed(seed)
    config = AlbertConfig(
        vocab_size=V, embedding_size=E, hidden_size=H, max_position_embeddings=P,
        type_vocab_size=T, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4,
        layer_norm_eps=1e-6,
    )  # fmt: skip
    emb = AlbertEmbeddings(config).eval()
    with torch.no_grad():  # a LayerNorm that is not the identity, so that a missing one shows
        emb.LayerNorm.weight.uniform_(0.5, 1.5)
        emb.LayerNorm.bias.normal_(0, 0.5)
    return emb


def _probe_module(cls: Callable) -> str:
    # (V, P, T, E, H, batch, tokens): a sentence pair, three segment types with a batch of one,
    # one token, and a batch longer than the sequence (positions count tokens, not rows)
    for V, P, T, E, H, batch, n, seed in (  # noqa: N806
        (60, 16, 2, 8, 24, 2, 7, 0),
        (40, 12, 3, 4, 10, 1, 9, 1),
        (30, 8, 2, 6, 12, 3, 1, 2),
        (50, 10, 2, 5, 20, 6, 4, 3),
    ):
        label = f"V={V}, P={P}, T={T}, E={E}, H={H}, input ({batch}, {n})"
        library = _library_embeddings(V, P, T, E, H, seed)
        mine = run_learner_code(cls, V, P, T, E, H, eps=1e-6)
        expect(isinstance(mine, nn.Module), f"the class must build an nn.Module, got {mine!r}.")
        mine.eval()
        for name, theirs in _PARTS.items():
            part = getattr(mine, name, None)
            expect(
                isinstance(part, nn.Module),
                f"name the parts `word`, `position`, `segment`, `norm` and `projection` (the "
                f"check copies the library's weights by these names); `{name}` is missing.",
            )
            for key, value in getattr(library, theirs).state_dict().items():
                have = part.state_dict().get(key)
                if have is None or have.shape != value.shape:
                    shown = "missing" if have is None else f"of shape {tuple(have.shape)}"
                    why = {
                        "word": f"V x E = {V} x {E}: the big table is E-wide, not H-wide",
                        "position": f"P x E = {P} x {E}: the position table is E-wide too",
                        "segment": f"T x E = {T} x {E}: one row per segment type, E-wide",
                        "norm": f"E = {E} wide: the LayerNorm normalises the E-wide sum, before "
                        "the projection (2E parameters, not 2H)",
                        "projection": f"an nn.Linear(E, H) = ({E} -> {H}) with a bias",
                    }[name]
                    raise ExerciseError(
                        f"({label}) `{name}.{key}` is {shown}, expected {tuple(value.shape)}: "
                        f"{why}."
                    )
            part.load_state_dict(getattr(library, theirs).state_dict())
        n_mine = sum(p.numel() for p in mine.parameters())
        n_lib = sum(p.numel() for p in library.parameters())
        expect(
            n_mine == n_lib,
            f"({label}) your module holds {n_mine:,} parameters, AlbertEmbeddings {n_lib:,}: "
            "only the five parts, nothing else.",
        )
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, V, (batch, n), generator=g)
        segments = torch.randint(0, T, (batch, n), generator=g)
        ids0, seg0 = ids.clone(), segments.clone()
        for types in (segments, None):
            with torch.no_grad():
                got = expect_tensor(
                    run_learner_code(mine, ids, types), "MyFactorizedEmbedding.forward"
                )
                want = library(ids, types)
            expect(
                torch.equal(ids, ids0) and torch.equal(segments, seg0),
                f"({label}) forward changed its inputs in place.",
            )
            expect(
                tuple(got.shape) == (batch, n, H),
                f"({label}) return (B, T, H) = {(batch, n, H)}, got {tuple(got.shape)}.",
            )
            if torch.allclose(got, want, atol=1e-5):
                continue
            which = "with token_type_ids" if types is not None else "without token_type_ids"
            with torch.no_grad():
                words = library.word_embeddings(ids)
                pos = library.position_embeddings(torch.arange(n))
                seg = library.token_type_embeddings(
                    torch.zeros_like(ids) if types is None else types
                )
                no_norm = library.projection(words + pos + seg)
                no_segment = library.projection(library.LayerNorm(words + pos))
                no_position = library.projection(library.LayerNorm(words + seg))
            if torch.allclose(got, no_norm, atol=1e-5):
                raise ExerciseError(f"({label}) the LayerNorm is not applied: project norm(sum).")
            if torch.allclose(got, no_segment, atol=1e-5):
                raise ExerciseError(
                    f"({label}, {which}) the segment embedding is missing: add the segment "
                    "table's row (segment 0 when token_type_ids is None)."
                )
            if torch.allclose(got, no_position, atol=1e-5):
                raise ExerciseError(f"({label}) the position embedding is missing.")
            raise ExerciseError(
                f"({label}, {which}) the output differs from AlbertEmbeddings with the same "
                f"weights by up to {(got - want).abs().max():.3g}: word + position (0 .. T-1 in "
                "every row) + segment, LayerNorm in E dimensions, then the projection."
            )
    return (
        "equal to AlbertEmbeddings with the same weights: three segment types, one token, a batch "
        "of one and batches longer than the sequence."
    )


class _LibraryFactorizedEmbedding(nn.Module):
    """The library's AlbertEmbeddings behind the lesson's constructor and part names."""

    def __init__(self, V: int, P: int, T: int, E: int, H: int, eps: float = 1e-12) -> None:  # noqa: N803
        super().__init__()
        config = AlbertConfig(
            vocab_size=V, embedding_size=E, hidden_size=H, max_position_embeddings=P,
            type_vocab_size=T, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4,
            layer_norm_eps=eps, hidden_dropout_prob=0.0,
        )  # fmt: skip
        self.inner = AlbertEmbeddings(config)
        self.word, self.position = self.inner.word_embeddings, self.inner.position_embeddings
        self.segment, self.norm = self.inner.token_type_embeddings, self.inner.LayerNorm
        self.projection = self.inner.projection

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        return self.inner(input_ids, token_type_ids)


check_factorized_embedding = BuildCheck(
    _probe_module,
    fallback=_LibraryFactorizedEmbedding,
    fallback_name="AlbertEmbeddings",
    todo="build E-wide word/position/segment tables, a LayerNorm in E and an E -> H projection, "
    "and sum, normalise and project in forward.",
)


# ----- notebook 02: one layer applied L times -------------------------------------------------------


def shared_encoder(
    layer: Callable, x: Tensor, num_layers: int, keep: Tensor | None = None
) -> Tensor:
    """All-shared ALBERT's encoder: the same layer applied num_layers times, each time to the
    previous output, with the same keep-mask. layer(x, keep) -> (x, attention)."""
    for _ in range(num_layers):
        x, _ = layer(x, keep)
    return x


class _RecordingLayer:
    """A stand-in layer with the encoder layers' calling convention: (x, keep) -> (x, probs).
    It records its calls; padding (keep False) changes what it computes."""

    def __init__(self, width: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(width, width, generator=g) / math.sqrt(width)
        self.calls: list[bool] = []

    def __call__(self, x: Tensor, keep: Tensor | None = None) -> tuple[Tensor, Tensor]:
        self.calls.append(keep is not None)
        scores = x @ x.transpose(-1, -2) / math.sqrt(x.shape[-1])  # (B, T, T)
        if keep is not None:
            scores = scores.masked_fill(~keep.view(keep.shape[0], 1, -1), float("-inf"))
        probs = scores.softmax(-1)
        return torch.tanh(probs @ x @ self.w), probs


def _probe_shared_encoder(my_shared_encoder: Callable) -> str:
    # (batch, tokens, layers, padded): ALBERT-base's 12, one layer, a batch of one with padding
    for batch, n, layers, padded, seed in (
        (2, 5, 6, True, 0),
        (3, 4, 1, False, 1),
        (1, 6, 12, True, 2),
    ):
        label = f"{layers} layer{'s' * (layers > 1)}, input ({batch}, {n}, 8)"
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, n, 8, generator=g)
        keep = torch.ones(batch, n, dtype=torch.bool)
        if padded:
            keep[0, n - 2 :] = False
        layer = _RecordingLayer(8, seed)
        x0 = x.clone()
        got = run_learner_code(my_shared_encoder, layer, x, layers, keep if padded else None)
        if isinstance(got, tuple):
            raise ExerciseError(
                f"({label}) you returned a tuple: the layer returns (x, attention); keep x and "
                "feed it to the next application, return the final x."
            )
        got = expect_tensor(got, "my_shared_encoder")
        expect(torch.equal(x, x0), f"({label}) your encoder changed x in place.")
        calls = len(layer.calls)
        expect(
            calls == layers,
            f"({label}) the layer was applied {calls} times: apply the one shared layer "
            f"num_layers = {layers} times.",
        )
        expect(
            all(layer.calls) or not padded,
            f"({label}) the keep-mask was not passed to every application: padded tokens must "
            "stay masked in every layer.",
        )
        want = shared_encoder(_RecordingLayer(8, seed), x, layers, keep if padded else None)
        if torch.allclose(got, want, atol=1e-6):
            continue
        once = _RecordingLayer(8, seed)(x, keep if padded else None)[0]
        if torch.allclose(got, once, atol=1e-6):
            raise ExerciseError(
                f"({label}) every application read the ORIGINAL x: feed each layer the "
                "previous one's output."
            )
        raise ExerciseError(
            f"({label}) the output differs from applying the layer {layers} times by up to "
            f"{(got - want).abs().max():.3g}."
        )
    return "the same layer, applied 1, 6 and 12 times, the mask passed every time."


check_shared_encoder = BuildCheck(
    _probe_shared_encoder,
    fallback=shared_encoder,
    fallback_name="course_lib.exercises.lessons_albert.shared_encoder (AlbertModel's loop)",
    todo="apply the same layer num_layers times, each to the previous output, passing `keep`.",
)


# ----- notebook 02: which layers share a sublayer? -------------------------------------------------


def shared_sublayers(layers: Sequence[nn.Module]) -> dict[str, list[list[int]]]:
    """For each sublayer name, the groups of layer indices holding the identical module object
    (by `is`, not by value), groups in order of first appearance — as
    SharedEncoder.shared_sublayers()."""
    table = {}
    for name in SUBLAYERS:
        groups: dict[int, list[int]] = {}
        for i, layer in enumerate(layers):
            groups.setdefault(id(getattr(layer, name)), []).append(i)
        table[name] = list(groups.values())
    return table


def _sharing_cases() -> list[tuple[str, list[nn.Module]]]:
    config = AlbertConfig(
        vocab_size=20, embedding_size=4, hidden_size=8, num_hidden_layers=4,
        num_attention_heads=2, intermediate_size=16,
    )  # fmt: skip
    torch.manual_seed(0)

    def fresh(n: int) -> list[nn.Module]:
        return [EncoderLayer(config) for _ in range(n)]

    one = fresh(1)[0]
    a, b = fresh(2)
    attention_only = fresh(4)
    for layer in attention_only[1:]:
        layer.attention, layer.attention_norm = (
            attention_only[0].attention,
            attention_only[0].attention_norm,
        )
    interleaved = [a, b, a, b]
    copies = [one] + [copy.deepcopy(one) for _ in range(3)]
    return [
        ("all-shared, 4 layers", [one] * 4),
        ("not shared, 4 layers", fresh(4)),
        ("one layer", [one]),
        ("two groups of 3", [a, a, a, b, b, b]),
        ("attention (and its LayerNorm) shared, feed-forward not", attention_only),
        ("layers 0 and 2 one object, 1 and 3 another", interleaved),
        ("four deep copies of one layer (equal values, different objects)", copies),
    ]


def _grouped_by_value(layers: Sequence[nn.Module], name: str) -> list[list[int]]:
    """The groups a comparison of weights would give (the typical mistake)."""
    groups: list[list[int]] = []
    for i, layer in enumerate(layers):
        state = getattr(layer, name).state_dict()
        for group in groups:
            other = getattr(layers[group[0]], name).state_dict()
            if all(torch.equal(a, b) for a, b in zip(other.values(), state.values())):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _probe_sublayers(my_shared_sublayers: Callable) -> str:
    for what, layers in _sharing_cases():
        got = run_learner_code(my_shared_sublayers, list(layers))
        want = shared_sublayers(layers)
        expect(
            isinstance(got, dict) and set(got) == set(SUBLAYERS),
            f"({what}) return a dict with one entry per sublayer, {list(SUBLAYERS)}; got "
            f"{sorted(got) if isinstance(got, dict) else type(got).__name__}.",
        )
        got = {name: [list(g) for g in groups] for name, groups in got.items()}
        if got == want:
            continue
        name = next(n for n in SUBLAYERS if got[n] != want[n])
        where = f"({what}) `{name}`: you group {got[name]}, expected {want[name]}"
        if "copies" in what or _grouped_by_value(layers, name) == got[name]:
            raise ExerciseError(
                f"{where}: copies with equal values are NOT shared (each is trained on its own): "
                "group by identity (`is`, or id()), not by comparing weights."
            )
        if sorted(map(sorted, got[name])) == sorted(map(sorted, want[name])):
            raise ExerciseError(f"{where}: list the groups in order of their first layer.")
        if "interleaved" in what or "0 and 2" in what:
            raise ExerciseError(
                f"{where}: the same object need not sit in consecutive layers; collect every "
                "layer that holds it, wherever it is."
            )
        if "attention" in what:
            raise ExerciseError(
                f"{where}: look at each sublayer object (layer.{name}), not at the whole layer: "
                "here the layers differ, but some of their sublayers are one object."
            )
        raise ExerciseError(f"{where}.")
    return (
        "grouped by identity: all-shared, not shared, one layer, groups, attention-only, "
        "interleaved and deep copies."
    )


check_shared_sublayers = BuildCheck(
    _probe_sublayers,
    fallback=shared_sublayers,
    fallback_name="SharedEncoder.shared_sublayers",
    todo="for each sublayer name, group the layer indices whose sublayer is the same object.",
)


# ----- notebook 03: one SOP pair from a chunk ------------------------------------------------------

Segment = tuple[list[int], list[int]]


def sop_pair(
    chunk: Sequence[Segment], rng: random.Random, budget: int
) -> tuple[Segment, Segment, int]:
    """One of ALBERT's sentence-order pairs from a chunk of >= 2 consecutive sentences, as
    make_sop_examples builds it: split at rng.randint(1, len(chunk) - 1), swap when
    rng.random() < 0.5 (label 1), then cut to `budget` tokens longest first (B on a tie), A
    from its front and B from its back so that the junction survives."""
    split = rng.randint(1, len(chunk) - 1)
    a, b = concat_segments(chunk[:split]), concat_segments(chunk[split:])
    swapped = rng.random() < 0.5
    if swapped:
        a, b = b, a
    truncate_pair(a, b, budget, "junction")
    return a, b, int(swapped)


def _chunk(rng: random.Random, lengths: Sequence[int], start: int = 100) -> list[Segment]:
    out, token = [], start
    for n in lengths:
        ids = list(range(token, token + n))
        token += n
        words = sorted(rng.randrange(n) for _ in range(n))  # word ids, non-decreasing
        out.append((ids, [w - words[0] for w in words]))
    return out


_SOP_CASES = (
    ("a chunk of five sentences", (6, 9, 4, 7, 5), 20),
    ("a chunk of two sentences", (5, 8), 40),
    ("a pair that already fits", (3, 4, 2), 50),
    ("a tight budget", (12, 3, 9, 14), 7),
    ("segments of equal length", (4, 4), 6),
)


def _probe_sop(my_sop_pair: Callable) -> str:
    swaps = 0
    for seed in range(40):
        for what, lengths, budget in _SOP_CASES:
            chunk = _chunk(random.Random(seed), lengths)
            before = copy.deepcopy(chunk)
            rng, ref_rng = random.Random(seed), random.Random(seed)
            got = run_learner_code(my_sop_pair, chunk, rng, budget)
            expect(
                chunk == before,
                f"({what}) your function changed the chunk's sentences in place (a `del` or "
                "slice assignment on a list you did not copy): build new lists for A and B.",
            )
            want = sop_pair(copy.deepcopy(chunk), ref_rng, budget)
            expect(
                isinstance(got, tuple | list) and len(got) == 3,
                f"return (a, b, label), got {got!r:.80}.",
            )
            (a_ids, a_words), (b_ids, b_words), label = got
            got_n = (list(a_ids), list(a_words)), (list(b_ids), list(b_words)), label
            if got_n == want:
                expect(
                    rng.random() == ref_rng.random(),
                    f"({what}) your function drew from rng in another order or number than "
                    "make_sop_examples (first one randint for the split, then one random() for "
                    "the swap): the same seed must give the same pairs.",
                )
                swaps += label
                continue
            where = f"({what}, budget {budget}, seed {seed})"
            expect(label in (0, 1) and not isinstance(label, bool), f"{where} label {label!r}: "
                   "use the integers 0 (in order) and 1 (swapped).")  # fmt: skip
            first = [t for ids, _ in chunk for t in ids]
            position = {t: i for i, t in enumerate(first)}
            if a_ids and b_ids and all(t in position for t in [*a_ids, *b_ids]):
                a_first = position[a_ids[0]] < position[b_ids[0]]
                if a_first == bool(label):
                    raise ExerciseError(
                        f"{where} your pair is {'in order' if a_first else 'swapped'} but "
                        f"labelled {label}: 1 means swapped (B's text first)."
                    )
            total = len(a_ids) + len(b_ids)
            expect(total <= budget, f"{where} A and B hold {total} tokens, over the budget.")
            if len(a_ids) != len(a_words) or len(b_ids) != len(b_words):
                raise ExerciseError(
                    f"{where} the word ids were not cut along with the tokens: every token keeps "
                    "its word id (whole-word masking reads them)."
                )
            (wa, _), (wb, _), wlabel = want
            if label == wlabel and (len(a_ids), len(b_ids)) == (len(wa), len(wb)):
                if a_ids != wa or b_ids != wb:
                    raise ExerciseError(
                        f"{where} the right lengths, the wrong ends: A loses tokens from its "
                        "FRONT and B from its BACK, so the tokens at the A|B junction, where the "
                        "order shows, survive."
                    )
            if label == wlabel and total == len(wa) + len(wb):
                raise ExerciseError(
                    f"{where} A keeps {len(a_ids)} and B {len(b_ids)} tokens, expected "
                    f"{len(wa)} and {len(wb)}: cut one token at a time from the LONGER segment "
                    "(B on a tie), so both keep a share."
                )
            raise ExerciseError(
                f"{where} your pair differs from make_sop_examples' with the same rng: draw the "
                "split point first (rng.randint(1, len(chunk) - 1)), then the swap "
                "(rng.random() < 0.5), then cut."
            )
    rate = swaps / (40 * len(_SOP_CASES))
    return (
        f"identical to make_sop_examples' pairs over 200 draws ({rate:.0%} swapped), junction kept."
    )


check_sop_pair = BuildCheck(
    _probe_sop,
    fallback=sop_pair,
    fallback_name="make_sop_examples' pair builder",
    todo="split the chunk at a random sentence boundary, swap half the time (label 1), and cut "
    "A's front and B's back, longest first, to the budget.",
)


# ----- notebook 06: the conditional entropy ------------------------------------------------------------


def _entropy_tables() -> list[tuple[str, Tensor]]:
    g = torch.Generator().manual_seed(0)

    def table(rows: int, cols: int, spread: float) -> Tensor:
        return torch.log_softmax(
            torch.randn(rows, cols, generator=g, dtype=torch.float64) * spread, -1
        )

    return [
        ("a 512 x 512 table", table(512, 512, 1.0)),
        ("a two-word vocabulary", table(2, 2, 2.0)),
        ("a peaked 7 x 7 table", table(7, 7, 6.0)),
        ("3 contexts over 5 words", table(3, 5, 1.5)),
    ]


def _probe_entropy(my_conditional_entropy: Callable) -> str:
    for what, log_table in _entropy_tables():
        before = log_table.clone()
        got = run_learner_code(my_conditional_entropy, log_table)
        expect(
            torch.equal(log_table, before),
            f"({what}) your function changed `log_table` in place (`.exp_()`?): the lab still "
            "needs the log-probabilities.",
        )
        if isinstance(got, Tensor):
            expect(
                got.numel() == 1, f"return one number, got a tensor of shape {tuple(got.shape)}."
            )
            got = got.item()
        expect(isinstance(got, float), f"return a float (nats), got {type(got).__name__}.")
        want = conditional_entropy(log_table)
        if abs(got - want) < 1e-9:
            continue
        p = log_table.exp()
        rows, cols = log_table.shape
        per_row = -(p * log_table).sum(-1)
        where = f"({what}) you return {got:.4f} nats, expected {want:.4f}"
        hints = (
            (-want, "the sign: entropy is MINUS the sum of p log p"),
            (float(per_row.sum()), f"the sum over the {rows} contexts: average them (prev is "
             "uniform, each row weighs 1/V)"),
            (float(per_row.mean()) / cols, "averaged over every entry: sum over the next word, "
             "then average over the contexts"),
            (float(-(p * log_table).sum(0).mean()), "summed over the contexts for each next "
             "word: each ROW is a distribution, P(next | prev) — sum along the row"),
            (want / math.log(2), "in bits (log base 2): the losses are in nats"),
            (float(per_row.sum()) / 512, "divided by 512, the lab's vocabulary: divide by the "
             "number of contexts in this table"),
        )  # fmt: skip
        for value, hint in hints:
            if abs(got - value) < 1e-9:
                raise ExerciseError(f"{where}: {hint}.")
        marginal = p.mean(0)
        if abs(got - float(-(marginal * marginal.log()).sum())) < 1e-9:
            raise ExerciseError(
                f"{where}: that is H(next), the entropy of the marginal; the conditional entropy "
                "averages the entropy of each row P(. | prev)."
            )
        raise ExerciseError(f"{where}.")
    return "H(next | prev) in nats, on a two-word vocabulary, a peaked table and 3 x 5 too."


check_conditional_entropy = BuildCheck(
    _probe_entropy,
    fallback=conditional_entropy,
    fallback_name="course_lib.labs.albert.conditional_entropy",
    todo="return -(1/V) sum_i sum_j P(j|i) log P(j|i) in nats, from the table of log P(j|i).",
)


# ----- notebook 03: the topic cue, token overlap ----------------------------------------------------


def token_overlap(example: dict[str, Any], special_ids: set[int] | frozenset[int]) -> float:
    """Jaccard overlap |A & B| / |A | B| of the token SETS of segment A (token type 0) and B
    (type 1), special tokens left out; 0.0 when both are empty. Order-blind by construction."""
    ids, types = example["input_ids"], example["token_type_ids"]
    a = {i for i, t in zip(ids, types) if t == 0 and i not in special_ids}
    b = {i for i, t in zip(ids, types) if t == 1 and i not in special_ids}
    return len(a & b) / max(1, len(a | b))


_SPECIAL = frozenset({0, 1, 2, 3})  # [PAD], [UNK], [CLS], [SEP] of the probe's examples


def _pair(a: Sequence[int], b: Sequence[int]) -> dict[str, Any]:
    ids = [2, *a, 3, *b, 3]
    return {"input_ids": ids, "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1)}


_OVERLAP_CASES = (
    ("A = [10, 11, 12], B = [12, 13]", (10, 11, 12), (12, 13)),
    ("repeated tokens, A = [10, 10, 10, 11], B = [10, 12]", (10, 10, 10, 11), (10, 12)),
    ("no shared token", (20, 21), (22, 23, 24)),
    ("A and B the same set", (30, 31), (31, 30, 30)),
    ("a segment holding only [UNK]s, A = [1, 1], B = [1]", (1, 1), (1,)),
    ("a one-token A", (40,), (40, 41, 42, 43)),
    ("a long A and a short B", (50, 51, 52, 53), (53, 54)),
)


def _overlap_hints(example: dict[str, Any], got: float, what: str) -> list[str]:
    """The typical mistakes whose value equals `got` on this example."""
    ids, types = example["input_ids"], example["token_type_ids"]
    seg_a = [i for i, t in zip(ids, types) if t == 0]
    seg_b = [i for i, t in zip(ids, types) if t == 1]
    sa = {i for i in seg_a if i not in _SPECIAL}
    sb = {i for i in seg_b if i not in _SPECIAL}
    candidates = (
        (len(set(seg_a) & set(seg_b)) / max(1, len(set(seg_a) | set(seg_b))), "leave the "
         "special tokens out ([CLS], [SEP] and the other `special_ids`): [SEP] ends both "
         "segments, so every pair would share it"),
        (len(sa & sb) / max(1, min(len(sa), len(sb))), "divide by the size of the UNION of the "
         "two sets (Jaccard), not the smaller set"),
        (len(sa & sb) / max(1, len(sa)), "divide by the size of the UNION of the two sets, not "
         "of A's: the feature must not change when A and B swap"),
        (float(len(sa & sb)), "a ratio, |A & B| / |A | B|, not the count of shared tokens"),
    )  # fmt: skip
    hints = [hint for value, hint in candidates if abs(got - value) < 1e-12]
    if not hints and "repeated" in what:
        hints.append("compare the SETS of tokens: a token repeated in A counts once")
    return hints


def _probe_overlap(my_overlap: Callable) -> str:
    first: str | None = None
    for what, a, b in _OVERLAP_CASES:
        for one, other in ((a, b), (b, a)):
            example = _pair(one, other)
            before = copy.deepcopy(example)
            got = run_learner_code(my_overlap, example, set(_SPECIAL))
            expect(example == before, f"({what}) your function changed the example in place.")
            expect(
                isinstance(got, float | int) and not isinstance(got, bool),
                f"return a number, got {type(got).__name__}.",
            )
            want = token_overlap(example, _SPECIAL)
            if abs(got - want) < 1e-12:
                continue
            where = f"({what}) you return {got:.3f}, expected {want:.3f}"
            hints = _overlap_hints(example, got, what)
            if len(hints) == 1:  # one mistake explains it: name it
                raise ExerciseError(f"{where}: {hints[0]}.")
            first = first or (f"{where}: {hints[0]}." if hints else f"{where}.")
    if first:
        raise ExerciseError(first)
    return (
        "the Jaccard overlap of the token sets, specials out, symmetric, repeats and "
        "[UNK]-only included."
    )


check_overlap = BuildCheck(
    _probe_overlap,
    fallback=token_overlap,
    fallback_name="course_lib.exercises.lessons_albert.token_overlap",
    todo="return |A & B| / |A | B| for the token sets of segments A and B, special tokens left out.",
)


# ----- notebook 06: the two baselines of the SOP lab ----------------------------------------------


def _sop_batches() -> list[tuple[str, Tensor]]:
    """Fresh NSP and SOP pairs, a batch of one, and pairs built by hand for the edges: a word
    shared at another position, a shared counter with no shared word, tied counters."""
    g = torch.Generator().manual_seed(2024)
    nsp = sop_lab.make_pairs("nsp", 300, g)[0]
    sop = sop_lab.make_pairs("sop", 300, g)[0]
    hand = nsp[:4].clone()
    w = sop_lab.N_SPECIAL + sop_lab.N_COUNTERS  # the first topic word
    words = sop_lab.SEGMENT_WORDS
    hand[:, 2 : 2 + words] = w + 2  # A: topic word 2 everywhere
    hand[:, sop_lab.START_B + 1 : sop_lab.START_B + 1 + words] = w + 1  # B: topic word 1 everywhere
    hand[0, 2], hand[0, sop_lab.START_B + words] = w, w  # row 0: A's first word is B's last
    hand[1, 1], hand[1, sop_lab.START_B] = (
        sop_lab.N_SPECIAL + 3,
        sop_lab.N_SPECIAL + 3,
    )  # row 1: same counter
    hand[2, 1], hand[2, sop_lab.START_B] = (
        sop_lab.N_SPECIAL + 5,
        sop_lab.N_SPECIAL + 2,
    )  # row 2: B's is lower
    return [("NSP pairs", nsp), ("SOP pairs", sop), ("a batch of one", sop[:1]), ("edges", hand)]


def _probe_baseline(fn: Callable, reference: Callable, name: str, mistakes: Callable) -> str:
    for what, ids in _sop_batches():
        before = ids.clone()
        got = expect_tensor(run_learner_code(fn, ids), name)
        expect(torch.equal(ids, before), f"({what}) `{name}` changed `input_ids` in place.")
        want = reference(ids)
        expect(
            tuple(got.shape) == tuple(want.shape),
            f"({what}) return one label per pair, shape {tuple(want.shape)}, got "
            f"{tuple(got.shape)}" + (" (a `.squeeze()` on a batch of one?)" if got.dim() == 0 else "."),
        )  # fmt: skip
        wrong = (got.long() != want).nonzero().flatten().tolist()
        if wrong:
            mistakes(what, ids, got.long(), want, wrong[0])
    return f"`{name}` equals the library's on NSP and SOP pairs, a batch of one and the edges."


def _overlap_mistakes(what: str, ids: Tensor, got: Tensor, want: Tensor, i: int) -> None:
    where = f"({what}) pair {i}: you say {int(got[i])}, the rule says {int(want[i])}"
    if torch.equal(got, 1 - want):
        raise ExerciseError(
            f"{where}; every label is flipped: 0 means 'together' (A and B share a word)."
        )
    a, b = sop_lab.segment_words(ids[i : i + 1])
    a, b = a[0], b[0]
    counters = sop_lab.segment_counters(ids[i : i + 1])
    if int(want[i]) == 0 and not bool((a == b).any()):
        raise ExerciseError(
            f"{where}: A's words {a.tolist()} and B's {b.tolist()} share a word at different "
            "positions. Compare the two SETS of words, not position by position."
        )
    if int(want[i]) == 1 and int(counters[0][0]) == int(counters[1][0]):
        raise ExerciseError(
            f"{where}: A and B show the same counter ({int(counters[0][0])}) but no common word; "
            "the counters are not topic words (read only lab.segment_words)."
        )
    raise ExerciseError(f"{where} (A's words {a.tolist()}, B's {b.tolist()}).")


def _order_mistakes(what: str, ids: Tensor, got: Tensor, want: Tensor, i: int) -> None:
    a, b = sop_lab.segment_counters(ids)
    where = (
        f"({what}) pair {i}: counters A = {int(a[i])}, B = {int(b[i])}: you say {int(got[i])}, "
        f"the rule says {int(want[i])}"
    )
    if torch.equal(got, 1 - want):
        raise ExerciseError(f"{where}; every label is flipped: 0 means 'in order' (B's is larger).")
    if int(a[i]) == int(b[i]):
        raise ExerciseError(
            f"{where}: with equal counters B is not larger, so the pair is not 'in order' (<=, "
            "not <)."
        )
    raise ExerciseError(f"{where}: compare the two counters only (lab.segment_counters).")


def _probe_overlap_classifier(fn: Callable) -> str:
    return _probe_baseline(
        fn, sop_lab.overlap_classifier, "my_overlap_classifier", _overlap_mistakes
    )


def _probe_order_rule(fn: Callable) -> str:
    return _probe_baseline(fn, sop_lab.order_rule, "my_order_rule", _order_mistakes)


check_overlap_classifier = BuildCheck(
    _probe_overlap_classifier,
    fallback=sop_lab.overlap_classifier,
    fallback_name="lab.overlap_classifier",
    todo="label 0 when A and B share at least one topic word, else 1, one label per pair.",
)
check_order_rule = BuildCheck(
    _probe_order_rule,
    fallback=sop_lab.order_rule,
    fallback_name="lab.order_rule",
    todo="label 0 when B's counter is larger than A's, else 1, one label per pair.",
)


# ----- notebook 07: the samplers of the sharing labs ----------------------------------------------


def _same_draws(
    fn: Callable, reference: Callable, name: str, cases: list[tuple[str, dict]]
) -> None:
    """Compare `fn` with `reference` draw for draw on each case (fresh generators, same seed)."""
    for what, kwargs in cases:
        got = run_learner_code(fn, generator=torch.Generator().manual_seed(7), **kwargs)
        want = reference(generator=torch.Generator().manual_seed(7), **kwargs)
        expect(
            isinstance(got, tuple) and len(got) == 2,
            f"({what}) return (ids, answers), got {type(got).__name__}.",
        )
        ids, answers = (expect_tensor(x, name) for x in got)
        w_ids, w_answers = want
        expect(
            ids.shape == w_ids.shape and answers.shape == w_answers.shape,
            f"({what}) ids and answers are (batch, nodes) = {tuple(w_ids.shape)}, got "
            f"{tuple(ids.shape)} and {tuple(answers.shape)}.",
        )
        if torch.equal(ids, w_ids - sharing_lab.N_SPECIAL) or torch.equal(
            answers, w_answers - sharing_lab.N_SPECIAL
        ):
            raise ExerciseError(
                f"({what}) node v is token id N_SPECIAL + v = {sharing_lab.N_SPECIAL} + v: add the offset "
                "to the ids and the answers."
            )
        if not torch.equal(ids, w_ids):
            rows_same = bool((ids == ids[:1]).all()) and len(ids) > 1
            raise ExerciseError(
                f"({what}) the ids differ from the library's draws"
                + (": every row holds the same permutation, draw one randperm per row."
                   if rows_same else ": one torch.randperm(nodes, generator=generator) per row, "
                   "in row order.")
            )  # fmt: skip
        if not torch.equal(answers, w_answers):
            raise ExerciseError(
                f"({what}) the ids match but the answers do not: {_answer_hint(what)}"
            )


def _answer_hint(what: str) -> str:
    return {
        "hops": "start from v = f(x), then for each relation s hop v <- f(s(v)) (s first, then f).",
        "pointers": "start from x itself (arange), then follow f `hops` times: f^hops(x).",
    }.get(what.split(":")[0], "compare with the docstring.")


def _probe_sample_hops(fn: Callable) -> str:
    four = sharing_lab.draw_relations(2, 5)
    cases = [
        ("hops: the lab's three relations", {"batch": 64}),
        ("hops: a batch of one", {"batch": 1}),
        ("hops: one relation", {"batch": 16, "relations": (sharing_lab.S2,)}),
        ("hops: two relations on 5 nodes", {"batch": 16, "relations": four, "nodes": 5}),
    ]
    _same_draws(fn, sharing_lab.sample_hops, "my_sample_hops", cases)
    return "draw for draw the library's, also with one relation, 5 nodes and a batch of one."


def _probe_sample_pointers(fn: Callable) -> str:
    cases = [
        ("pointers: four steps", {"batch": 64, "hops": 4}),
        ("pointers: a batch of one", {"batch": 1, "hops": 2}),
        ("pointers: zero steps (the answer is x itself)", {"batch": 8, "hops": 0}),
        ("pointers: one step on 5 nodes", {"batch": 8, "hops": 1, "nodes": 5}),
    ]
    _same_draws(fn, sharing_lab.sample_pointers, "my_sample_pointers", cases)
    return "draw for draw the library's, from zero steps to four, on 5 and 8 nodes."


check_sample_hops = BuildCheck(
    _probe_sample_hops,
    fallback=sharing_lab.sample_hops,
    fallback_name="lab.sample_hops",
    todo="one random permutation f per row; from v = f(x), hop v <- f(s(v)) for each relation s.",
)
check_sample_pointers = BuildCheck(
    _probe_sample_pointers,
    fallback=sharing_lab.sample_pointers,
    fallback_name="lab.sample_pointers",
    todo="one random permutation f per row; the answer at x is f applied `hops` times to x.",
)
