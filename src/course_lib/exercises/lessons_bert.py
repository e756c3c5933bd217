"""Chapter 01's lesson build checks (BERT): WordPiece's greedy split, LayerNorm, the embedding sum,
scaled dot-product and multi-head attention, an encoder layer, 80/10/10 masking, NSP pairs, span
decoding, pair packing, and the labs' two languages.

Each `check_*` is a `BuildCheck` (course_lib.exercises.build): it runs the learner's code on fresh
inputs, compares with the library, names the first mistake with the numbers, probing the edges
where a part disappears, repeats or changes shape (a batch of one, one head, T = 1, per-query
and all-padding masks, three segment types, tiny vocabularies, inputs left unmodified), and
returns what the rest of the notebook uses (tests/test_lesson_checks_bert.py plants the typical
mistakes)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import BertConfig
from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import ExerciseError, NotWrittenYet, expect, run_learner_code
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import bert as bert_labs
from course_lib.modules.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.encoder import EncoderLayer
from course_lib.objectives.masking import MaskingConfig, mask_tokens
from course_lib.training.finetune import best_span as library_best_span

_MIN = torch.finfo(torch.float32).min


def _max_diff(a: Tensor, b: Tensor) -> float:
    return (a.detach().float() - b.detach().float()).abs().max().item() if a.numel() else 0.0


def _tensor(value: Any, what: str) -> Tensor:
    expect(isinstance(value, Tensor), f"{what} must be a tensor, got {type(value).__name__}.")
    return value


# ----- 01/01: WordPiece's greedy longest-match split ------------------------------------------------


def wordpiece(word: str, vocab: dict[str, int], unk: str = "[UNK]") -> list[str]:
    """Greedy longest-match-first split of one word (BERT's WordpieceTokenizer; the `tokenizers`
    library's WordPiece model computes the same: tests/test_lesson_checks_bert.py)."""
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


_WP_VOCAB = [
    "[UNK]", "<unk>", "un", "una", "##aff", "##a", "##ff", "##able", "##ab", "##le", "p", "pl",
    "play", "##ing", "##in", "##g", "##i", "##n", "ing", "a", "x", "##y", "the", "##s", "s",
]  # fmt: skip
_WP_CASES = (
    ("a word split in three pieces", "unaffable", "[UNK]"),
    ("a word whose longest first piece is a whole word", "playing", "[UNK]"),
    ("a word that is one vocabulary entry", "the", "[UNK]"),
    ("a one-character word", "a", "[UNK]"),
    ("a word where only a continuation is missing", "playz", "[UNK]"),
    ("a word whose FIRST character is unknown", "zing", "[UNK]"),
    ("another unknown token, unk='<unk>'", "xq", "<unk>"),
    ("a word of one continuation after another", "xyyy", "[UNK]"),
    ("'ing' as a continuation: only '##ing' may follow", "sing", "[UNK]"),
)


def _wordpiece_variant(
    word: str, vocab: dict[str, int], unk: str, shortest: bool = False, hashes: bool = True
) -> list[str]:
    """The typical wrong splits: the shortest entry first, continuations without '##'."""
    pieces, start = [], 0
    while start < len(word):
        ends = range(start + 1, len(word) + 1) if shortest else range(len(word), start, -1)
        for end in ends:
            piece = word[start:end] if start == 0 or not hashes else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def _probe_wordpiece(candidate: Callable) -> str:
    vocab = {piece: i for i, piece in enumerate(_WP_VOCAB)}
    results = []
    for edge, word, unk in _WP_CASES:
        before = dict(vocab)
        got = run_learner_code(candidate, word, vocab, unk)
        expect(vocab == before, "the vocabulary was modified: only look pieces up in it.")
        expect(
            isinstance(got, list) and all(isinstance(p, str) for p in got),
            f"return a list of piece strings, got {type(got).__name__}.",
        )
        results.append((edge, word, unk, got, wordpiece(word, vocab, unk)))
    wrong = [r for r in results if r[3] != r[4]]
    if not wrong:
        return "longest match first, '##' continuations, a whole unknown word becomes `unk`."
    edge, word, unk, got, expected = wrong[0]
    where = f"{edge}: {word!r} -> {got}, expected {expected}"

    def everywhere(**variant: bool) -> bool:
        return all(g == _wordpiece_variant(w, vocab, u, **variant) for _, w, u, g, _ in results)

    if everywhere(shortest=True):
        raise ExerciseError(
            f"{where} — take the LONGEST entry that fits first: try end = len(word) and "
            "shorten, not the other way round."
        )
    if everywhere(hashes=False) or any(
        not p.startswith("##") and i > 0 and p not in (unk, "[UNK]", "<unk>")
        for i, p in enumerate(got)
    ):
        raise ExerciseError(
            f"{where} — a piece after the first continues the word: look it up with '##' in front."
        )
    if expected == [unk] and unk in got and len(got) > 1:
        raise ExerciseError(
            f"{where} — when no piece fits, the WHOLE word becomes {unk!r}, not just the rest."
        )
    if expected == [unk] and got and got[0] in ("[UNK]", "<unk>") and got[0] != unk:
        raise ExerciseError(f"{where} — use the `unk` argument, not a hard-coded {got[0]!r}.")
    raise ExerciseError(f"{where} — greedy longest match first, left to right.")


check_wordpiece = BuildCheck(
    _probe_wordpiece,
    fallback=wordpiece,
    fallback_name="greedy longest-match `wordpiece` (what the tokenizer computes)",
    todo="split `word` greedily: the longest vocabulary entry that starts it, then the longest "
    "'##' entry that continues, ...; return [unk] when no entry fits.",
)


# ----- 01/02: LayerNorm, the embedding sum, attention, multi-head attention ------------------------


def _library_layer_norm(x: Tensor, norm: nn.LayerNorm) -> Tensor:
    """LayerNorm over the last dimension with `norm`'s weight, bias and eps."""
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _probe_layer_norm(candidate: Callable) -> str:
    g = torch.Generator().manual_seed(0)
    cases = []
    for edge, shape, scale in (
        ("a (2, 5, 8) batch", (2, 5, 8), 1.0),
        ("hidden size 2", (3, 4, 2), 1.0),
        ("a batch of one token", (1, 1, 16), 1.0),
        ("features with a tiny spread (variance 1e-6, eps 1e-5)", (2, 3, 8), 1e-3),
    ):
        norm = nn.LayerNorm(shape[-1], eps=1e-5)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.5 * torch.randn(shape[-1], generator=g))
            norm.bias.copy_(0.5 * torch.randn(shape[-1], generator=g))
        x = (100 if scale == 1.0 else 0) + scale * torch.randn(*shape, generator=g)
        cases.append((edge, x, norm))
    for edge, x, norm in cases:
        before = x.clone()
        with torch.no_grad():
            got = _tensor(run_learner_code(candidate, x, norm), "the result")
        expect(torch.equal(x, before), "`x` was modified in place: compute a new tensor.")
        expected = _library_layer_norm(before, norm).detach()
        expect(
            got.shape == expected.shape,
            f"{edge}: expected the input's shape {tuple(expected.shape)}, got {tuple(got.shape)}.",
        )
        if torch.allclose(got, expected, atol=1e-4):
            continue
        mean = before.mean(-1, keepdim=True)
        unbiased = (before - mean) / torch.sqrt(before.var(-1, keepdim=True) + norm.eps)
        if torch.allclose(got, unbiased * norm.weight + norm.bias, atol=1e-4):
            raise ExerciseError(
                f"{edge}: off by up to {_max_diff(got, expected):.3g} — the variance is the "
                "unbiased one (divided by H - 1); LayerNorm divides by H: "
                "var(unbiased=False)."
            )
        std_eps = (before - mean) / (before.std(-1, unbiased=False, keepdim=True) + norm.eps)
        if torch.allclose(got, std_eps * norm.weight + norm.bias, atol=1e-4):
            raise ExerciseError(
                f"{edge}: off by up to {_max_diff(got, expected):.3g} — eps goes INSIDE the "
                "square root, sqrt(variance + eps), not after it."
            )
        plain = (before - mean) / torch.sqrt(
            before.var(-1, keepdim=True, unbiased=False) + norm.eps
        )
        if torch.allclose(got, plain, atol=1e-4):
            raise ExerciseError(
                f"{edge}: the learned scale and shift are missing: multiply by norm.weight and "
                "add norm.bias."
            )
        raise ExerciseError(
            f"{edge}: differs from LayerNorm by up to {_max_diff(got, expected):.3g}: normalise "
            "each vector over the LAST dimension (mean and variance over the hidden features)."
        )
    return "mean 0 and variance 1 over the hidden features, then the learned scale and shift."


check_layer_norm = BuildCheck(
    _probe_layer_norm,
    fallback=_library_layer_norm,
    fallback_name="torch.nn.functional.layer_norm",
    todo="normalise x over its last dimension to mean 0 and variance 1 (with norm.eps), then "
    "scale by norm.weight and shift by norm.bias.",
)


def _library_embeddings(
    input_ids: Tensor, token_type_ids: Tensor, tables: BertEmbeddings
) -> Tensor:
    """LayerNorm(word + position + segment), the embeddings without dropout."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    x = tables.word_embeddings(input_ids) + tables.position_embeddings(positions)
    return tables.LayerNorm(x + tables.token_type_embeddings(token_type_ids))


def _embedding_cases() -> list[tuple[str, Tensor, Tensor, BertEmbeddings]]:
    torch.manual_seed(0)
    two = BertEmbeddings(BertConfig(vocab_size=30, hidden_size=8, max_position_embeddings=12,
                                    type_vocab_size=2, num_attention_heads=2)).eval()  # fmt: skip
    three = BertEmbeddings(BertConfig(vocab_size=30, hidden_size=8, max_position_embeddings=12,
                                      type_vocab_size=3, num_attention_heads=2)).eval()  # fmt: skip
    for tables in (two, three):
        with torch.no_grad():
            tables.LayerNorm.weight.add_(0.3 * torch.randn(8))
            tables.LayerNorm.bias.add_(0.3 * torch.randn(8))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 12, (2, 7), generator=g)  # < 12 positions: a lookup by id runs
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    return [
        ("a two-segment batch (2, 7)", ids, types, two),
        ("a batch of one sequence", ids[:1], types[:1], two),
        ("a single token (T = 1)", ids[:1, :1], types[:1, :1], two),
        (
            "three segment types (type_vocab_size = 3)",
            ids,
            torch.tensor([[0, 0, 1, 1, 2, 2, 2], [0, 2, 2, 1, 1, 0, 0]]),
            three,
        ),
    ]


def _probe_embeddings(candidate: Callable) -> str:
    for edge, ids, types, tables in _embedding_cases():
        before = (ids.clone(), types.clone())
        with torch.no_grad():
            got = _tensor(run_learner_code(candidate, ids, types, tables), "the embeddings")
            expected = _library_embeddings(ids, types, tables)
        expect(
            torch.equal(ids, before[0]) and torch.equal(types, before[1]),
            "the ids were modified in place: look them up, do not change them.",
        )
        expect(
            got.shape == expected.shape,
            f"{edge}: expected (B, T, H) = {tuple(expected.shape)}, got {tuple(got.shape)}"
            + (" — .squeeze() dropped a dimension of size 1" if got.dim() < 3 else "")
            + ".",
        )
        if torch.allclose(got, expected, atol=1e-5):
            continue
        w = tables.word_embeddings(ids)
        p = tables.position_embeddings(torch.arange(ids.shape[1]))
        s = tables.token_type_embeddings(types)
        seg = tables.token_type_embeddings.weight

        def close(x: Tensor, got: Tensor = got, tables: BertEmbeddings = tables) -> bool:
            return torch.allclose(got, tables.LayerNorm(x), atol=1e-5)

        with torch.no_grad():
            if torch.allclose(got, w + p + s, atol=1e-5):
                raise ExerciseError(f"{edge}: the LayerNorm is missing: normalise the sum.")
            if close(w + s):
                raise ExerciseError(f"{edge}: the position embeddings (rows 0..T-1) are missing.")
            if close(w + p):
                raise ExerciseError(f"{edge}: the segment embeddings are missing.")
            if close(w + p + seg[0] + types[..., None] * (seg[1] - seg[0])):
                raise ExerciseError(
                    f"{edge}: segment vectors are interpolated between rows 0 and 1; with "
                    f"{seg.shape[0]} segment types look each token's row up: "
                    "token_type_embeddings(token_type_ids)."
                )
            if close(w + tables.position_embeddings(ids) + s):
                raise ExerciseError(f"{edge}: positions are looked up by token id; use 0..T-1.")
            if ids.shape[1] < 12 and close(
                w + tables.position_embeddings.weight[1 : ids.shape[1] + 1] + s
            ):
                raise ExerciseError(f"{edge}: positions are off by one: the first token is 0.")
        raise ExerciseError(
            f"{edge}: differs from LayerNorm(word + position + segment) by up to "
            f"{_max_diff(got, expected):.3g}."
        )
    return "word + position + segment, normalised; a batch of one, T = 1 and 3 segment types."


check_embeddings = BuildCheck(
    _probe_embeddings,
    fallback=_library_embeddings,
    fallback_name="BertEmbeddings (without dropout)",
    todo="look up the word, position (0..T-1) and segment rows of `tables`, add them and apply "
    "tables.LayerNorm; return (B, T, H).",
)


def _attention_cases() -> list[tuple[str, Tensor, Tensor, Tensor, Tensor | None]]:
    g = torch.Generator().manual_seed(0)

    def qkv(*shape: int, scale: float = 1.0) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(scale * torch.randn(*shape, generator=g) for _ in range(3))  # type: ignore[return-value]

    padding = torch.zeros(2, 1, 1, 5)
    padding[0, ..., 3:] = _MIN  # row 0: keys 3 and 4 are padding
    causal = torch.zeros(5, 5).masked_fill(torch.ones(5, 5).triu(1).bool(), _MIN)
    per_query = causal.expand(2, 1, 5, 5).clone()  # (B, 1, T, T): each query its own keys
    return [
        (
            "(B, nh, T, hs) = (2, 3, 5, 8) with a padding mask (B, 1, 1, T)",
            *qkv(2, 3, 5, 8),
            padding,
        ),
        ("no mask (mask=None)", *qkv(2, 3, 5, 8), None),
        ("a per-query mask (B, 1, T, T): query i sees keys <= i", *qkv(2, 3, 5, 8), per_query),
        ("[..., n, d] tensors with no head dimension, (1, 6, 4)", *qkv(1, 6, 4), None),
        ("a batch of one, one head, one token (1, 1, 1, 4)", *qkv(1, 1, 1, 4), None),
        (
            "large scores (q, k of size 30): the softmax must not overflow",
            *qkv(2, 2, 4, 8, scale=30.0),
            None,
        ),
    ]


def _probe_attention(candidate: Callable) -> str:
    for edge, q, k, v, mask in _attention_cases():
        inputs = [t.clone() for t in (q, k, v)] + [None if mask is None else mask.clone()]
        out = run_learner_code(candidate, *inputs)
        expect(
            all(torch.equal(a, b) for a, b in zip(inputs[:3], (q, k, v)))
            and (mask is None or torch.equal(inputs[3], mask)),
            "an input was modified in place: compute new tensors (scores = ..., not q *= ...).",
        )
        expect(
            isinstance(out, tuple) and len(out) == 2,
            "return a tuple (output, weights).",
        )
        got, weights = (_tensor(t, "each output") for t in out)
        ref, ref_weights = scaled_dot_product_attention(q, k, v, mask)
        n_q, n_k = q.shape[-2], k.shape[-2]
        if (
            weights.shape == v.shape
            and got.shape == ref_weights.shape
            and v.shape != ref_weights.shape
        ):
            raise ExerciseError("the two outputs are swapped: return (output, weights).")
        expect(
            weights.shape == ref_weights.shape,
            f"{edge}: the weights must be [..., n_queries, n_keys] = {tuple(ref_weights.shape)}, "
            f"got {tuple(weights.shape)}"
            + (
                " — .squeeze() dropped a dimension of size 1"
                if weights.dim() < ref_weights.dim()
                else ""
            )
            + ".",
        )
        expect(
            got.shape == ref.shape,
            f"{edge}: the output must have v's shape {tuple(ref.shape)}, got {tuple(got.shape)}.",
        )
        weights = weights.detach()
        if not torch.isfinite(weights).all():
            raise ExerciseError(
                f"{edge}: the weights contain NaN or inf"
                + (
                    " — exp() of a large score overflows: use .softmax(dim=-1) (it subtracts the "
                    "row maximum first)"
                    if "large" in edge
                    else " — the mask is additive: add it to the scores (0 keeps a key, a very "
                    "negative number removes it)"
                )
                + "."
            )
        if torch.allclose(weights, ref_weights, atol=1e-5) and torch.allclose(got, ref, atol=1e-5):
            continue
        scores = q @ k.transpose(-2, -1)
        d = q.shape[-1]
        if mask is not None and torch.allclose(
            weights, (scores / math.sqrt(d)).softmax(-1), atol=1e-5
        ):
            raise ExerciseError(
                f"{edge}: the mask is ignored: add it to the scores before the softmax."
            )
        if mask is not None and mask.shape[-2] > 1:
            first_row = mask[..., :1, :]
            if torch.allclose(weights, (scores / math.sqrt(d) + first_row).softmax(-1), atol=1e-5):
                raise ExerciseError(
                    f"{edge}: every query used the FIRST query's mask row; the mask broadcasts "
                    "against the (…, n_queries, n_keys) scores as it is: add it without reshaping."
                )
        masked = 0 if mask is None else mask
        if torch.allclose(weights, (scores + masked).softmax(-1), atol=1e-5):
            raise ExerciseError(
                f"{edge}: the scores are not scaled: divide by sqrt(d) = {math.sqrt(d):.3g}."
            )
        if torch.allclose(weights, (scores / d + masked).softmax(-1), atol=1e-5):
            raise ExerciseError(f"{edge}: the scores are divided by d; divide by sqrt(d).")
        if n_q == n_k and torch.allclose(
            weights, (scores.transpose(-2, -1) / math.sqrt(d) + masked).softmax(-1), atol=1e-5
        ):
            raise ExerciseError(f"{edge}: the scores are transposed: row i is query i, q @ k^T.")
        if not torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5):
            raise ExerciseError(
                f"{edge}: the rows of the weights do not sum to 1: softmax over the LAST "
                "dimension (the keys)."
            )
        if torch.allclose(weights, ref_weights, atol=1e-5):
            raise ExerciseError(
                f"{edge}: the weights are right but the output differs by "
                f"{_max_diff(got, ref):.3g}: return weights @ v."
            )
        raise ExerciseError(
            f"{edge}: the weights differ from softmax(q k^T / sqrt(d) + mask) by up to "
            f"{_max_diff(weights, ref_weights):.3g}."
        )
    return "padding and per-query masks, no head dimension, one token, large scores."


check_attention = BuildCheck(
    _probe_attention,
    fallback=scaled_dot_product_attention,
    fallback_name="course_lib.modules.scaled_dot_product_attention",
    todo="return (softmax(q k^T / sqrt(d) + mask) v, the softmax weights) for [..., n, d] "
    "tensors, the mask added when it is given.",
)


def _library_multi_head_attention(
    x: Tensor, w: dict[str, Tensor], num_heads: int, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """MultiHeadSelfAttention with the weights `w` (query/key/value/output .weight/.bias)."""
    hidden = x.shape[-1]
    config = BertConfig(hidden_size=hidden, num_attention_heads=num_heads, intermediate_size=4,
                        vocab_size=8, attention_probs_dropout_prob=0.0)  # fmt: skip
    module = MultiHeadSelfAttention(config).eval()
    module.load_state_dict({k: v.detach() for k, v in w.items()})
    out, probs = module(x, mask, output_attentions=True)
    return out, probs  # type: ignore[return-value]


def _mha_weights(hidden: int, g: torch.Generator) -> dict[str, Tensor]:
    w = {}
    for name in ("query", "key", "value", "output"):
        w[f"{name}.weight"] = torch.randn(hidden, hidden, generator=g) / math.sqrt(hidden)
        w[f"{name}.bias"] = 0.1 * torch.randn(hidden, generator=g)
    return w


def _probe_multi_head_attention(candidate: Callable) -> str:
    g = torch.Generator().manual_seed(3)
    padding = torch.zeros(2, 1, 1, 6)
    padding[1, ..., 4:] = _MIN
    cases = (
        ("(B, T, H) = (2, 6, 16), 4 heads", (2, 6, 16), 4, None),
        ("4 heads with a padding mask (B, 1, 1, T)", (2, 6, 16), 4, padding),
        ("one head (head size = H)", (2, 6, 16), 1, None),
        ("16 heads of size 1", (2, 6, 16), 16, None),
        ("a batch of one sequence of one token", (1, 1, 16), 2, None),
    )
    for edge, shape, heads, mask in cases:
        x = torch.randn(*shape, generator=g)
        w = _mha_weights(shape[-1], g)
        before = x.clone()
        with torch.no_grad():
            out = run_learner_code(candidate, x, dict(w), heads, mask)
            ref, ref_probs = _library_multi_head_attention(before, w, heads, mask)
        expect(torch.equal(x, before), "`x` was modified in place.")
        expect(isinstance(out, tuple) and len(out) == 2, "return a tuple (output, weights).")
        got, probs = (_tensor(t, "each output") for t in out)
        expect(
            got.shape == ref.shape,
            f"{edge}: the output must be (B, T, H) = {tuple(ref.shape)}, got {tuple(got.shape)}.",
        )
        expect(
            probs.shape == ref_probs.shape,
            f"{edge}: the weights must be (B, heads, T, T) = {tuple(ref_probs.shape)}, got "
            f"{tuple(probs.shape)}.",
        )
        if torch.allclose(got, ref, atol=1e-5) and torch.allclose(probs, ref_probs, atol=1e-5):
            continue
        if torch.allclose(probs, ref_probs, atol=1e-5):
            raise ExerciseError(
                f"{edge}: the weights are right, the output differs by {_max_diff(got, ref):.3g}: "
                "move the heads back next to each other, (B, nh, T, hs) -> (B, T, nh, hs) -> "
                "(B, T, H), then apply the output projection."
            )
        raise ExerciseError(
            f"{edge}: the attention weights differ by up to {_max_diff(probs, ref_probs):.3g}: "
            "project, then cut the H features into heads, (B, T, H) -> (B, T, nh, hs) -> "
            "(B, nh, T, hs), and scale by sqrt(hs), the HEAD size."
        )
    return "4, 1 and 16 heads, a padding mask, a batch of one token."


check_multi_head_attention = BuildCheck(
    _probe_multi_head_attention,
    fallback=_library_multi_head_attention,
    fallback_name="course_lib.modules.MultiHeadSelfAttention",
    todo="project x with w, split into num_heads heads, attend in every head at once, merge the "
    "heads and apply the output projection; return ((B, T, H), weights (B, nh, T, T)).",
)


# ----- 01/03: an encoder layer (MiniLayer.forward) --------------------------------------------------

LAYER_RENAMES = {"attention.": "", "feed_forward.": ""}


class MiniLayerReference(nn.Module):
    """The library's EncoderLayer (post-LN), with MiniLayer's flat parameter names."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads = c.num_attention_heads
        hidden = c.hidden_size
        self.query, self.key, self.value, self.output = (
            nn.Linear(hidden, hidden) for _ in range(4)
        )
        self.attention_norm = nn.LayerNorm(hidden, eps=c.layer_norm_eps)
        self.up = nn.Linear(hidden, c.intermediate_size)
        self.down = nn.Linear(c.intermediate_size, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=c.layer_norm_eps)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, T, H), additive mask (B, 1, 1, T) -> (B, T, H)."""
        b, t, h = x.shape

        def split(y: Tensor) -> Tensor:  # (B, T, H) -> (B, nh, T, hs)
            return y.view(b, t, self.heads, h // self.heads).transpose(1, 2)

        context, _ = scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), mask
        )
        x = self.attention_norm(x + self.output(context.transpose(1, 2).reshape(b, t, h)))
        return self.output_norm(x + self.down(F.gelu(self.up(x))))


def _layer_renamed(layer: EncoderLayer) -> dict[str, Tensor]:
    out = {}
    for name, value in layer.state_dict().items():
        for old, new in LAYER_RENAMES.items():
            name = name.replace(old, new)
        out[name] = value
    return out


def _probe_mini_layer(candidate: type) -> str:
    cases = (
        ("4 heads, a padded batch (B, T) = (2, 7)", 4, 2, 7, [7, 4]),
        ("one head", 1, 2, 7, [7, 5]),
        ("a batch of one sequence of one token", 2, 1, 1, [1]),
        ("a row of padding only", 4, 2, 5, [5, 0]),
    )
    for edge, heads, batch, length, real in cases:
        config = BertConfig(vocab_size=10, hidden_size=16, num_attention_heads=heads,
                            intermediate_size=32, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)  # fmt: skip
        torch.manual_seed(heads * 10 + length)
        library = EncoderLayer(config).eval()
        with torch.no_grad():
            for p in library.parameters():
                p.add_(0.1 * torch.randn_like(p))
        mine = run_learner_code(candidate, config)
        try:
            mine.load_state_dict(_layer_renamed(library))
        except (RuntimeError, AttributeError) as err:
            raise ExerciseError(
                f"the library's weights do not load into your layer ({str(err).splitlines()[0]}): "
                "keep the parameter names of the given __init__."
            ) from None
        mine.eval()
        x = torch.randn(batch, length, 16)
        keep = torch.arange(length)[None, :] < torch.tensor(real)[:, None]  # (B, T)
        mask = torch.zeros(batch, 1, 1, length).masked_fill(~keep[:, None, None, :], _MIN)
        before = x.clone()
        with torch.no_grad():
            got = _tensor(run_learner_code(mine, x, mask.clone()), "the layer's output")
            ref, _ = library(before, mask, output_attentions=True)
        expect(torch.equal(x, before), "`x` was modified in place.")
        expect(
            got.shape == ref.shape,
            f"{edge}: expected (B, T, H) = {tuple(ref.shape)}, got {tuple(got.shape)}.",
        )
        if not torch.isfinite(got).all():
            raise ExerciseError(
                f"{edge}: your layer returns NaN"
                + (
                    " for the row of padding only — a mask of -inf makes every score of that row "
                    "-inf; ADD the given mask (a large finite negative number) to the scores"
                    if 0 in real
                    else ""
                )
                + "."
            )
        if torch.allclose(got, ref, atol=1e-5):
            continue
        diff = _max_diff(got, ref)
        pre = library.attention_norm
        with torch.no_grad():
            pre_ln_attn, _ = library.attention(pre(before), mask, True)
            pre_x = before + pre_ln_attn
            pre_out = pre_x + library.feed_forward(library.output_norm(pre_x))
        if torch.allclose(got, pre_out, atol=1e-4):
            raise ExerciseError(
                f"{edge}: this is pre-LN (x + Sublayer(LN(x))); BERT is post-LN: "
                "LN(x + Sublayer(x)), normalise AFTER adding the residual."
            )
        raise ExerciseError(
            f"{edge}: your layer differs from the library's EncoderLayer by up to {diff:.3g}: "
            "split into heads (B, nh, T, hs), softmax(q k^T / sqrt(hs) + mask) v, merge the "
            "heads, output projection, residual then LayerNorm; feed-forward up, GELU, down, "
            "residual then LayerNorm."
        )
    return "equal to EncoderLayer with 4 heads and one, a single token, a row of padding only."


check_mini_layer = BuildCheck(
    _probe_mini_layer,
    fallback=MiniLayerReference,
    fallback_name="EncoderLayer (as MiniLayerReference, with MiniLayer's names)",
    todo="write MiniLayer.forward: multi-head self-attention with the additive mask, residual + "
    "LayerNorm, then the GELU feed-forward, residual + LayerNorm (post-LN).",
)


# ----- 01/04: 80/10/10 masking ------------------------------------------------------------------------


def library_mask_tokens(
    input_ids: Tensor,
    special: Tensor,
    mask_id: int,
    real_ids: Tensor,
    generator: torch.Generator,
    p: float = 0.15,
    p_mask: float = 0.8,
    p_random: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """course_lib.objectives.masking.mask_tokens with the lesson's signature."""
    config = MaskingConfig(
        mlm_probability=p, mask_replace_prob=p_mask, random_replace_prob=p_random
    )
    return mask_tokens(input_ids, special, mask_id, int(real_ids.max()) + 1, config, generator,
                       non_special_ids=real_ids)  # fmt: skip


def _probe_mask_tokens(candidate: Callable) -> str:
    g = torch.Generator().manual_seed(5)
    big = torch.randint(5, 200, (16, 64), generator=g)
    big[:, 0], big[:, -1] = 2, 3
    big[:4, 40:] = 0
    cases = (
        ("a (16, 64) batch, vocabulary 200", big, torch.arange(5, 200), {}),
        ("a batch of one sequence", big[:1], torch.arange(5, 200), {}),
        (
            "other rates (p=0.5, p_mask=0.6, p_random=0.3)",
            big,
            torch.arange(5, 200),
            {"p": 0.5, "p_mask": 0.6, "p_random": 0.3},
        ),  # fmt: skip
        (
            "a tiny vocabulary of 3 real ids (5, 6, 7), every target replaced at random",
            torch.randint(5, 8, (8, 32), generator=g),
            torch.arange(5, 8),
            {"p": 0.9, "p_mask": 0.0, "p_random": 1.0},
        ),  # fmt: skip
    )
    for edge, ids, real_ids, rates in cases:
        special = ids < 5
        before = ids.clone()
        out = run_learner_code(
            candidate, ids, special.clone(), 4, real_ids, torch.Generator().manual_seed(11), **rates
        )
        expect(
            torch.equal(ids, before),
            "`input_ids` was modified in place: build the masked ids in a new tensor "
            "(torch.where or input_ids.clone()); the caller still needs the originals.",
        )
        expect(isinstance(out, tuple) and len(out) == 2, "return a tuple (masked_ids, labels).")
        masked, labels = (_tensor(t, "each output") for t in out)
        ref_masked, ref_labels = library_mask_tokens(
            before, special, 4, real_ids, torch.Generator().manual_seed(11), **rates
        )
        expect(
            masked.shape == ids.shape and labels.shape == ids.shape,
            f"{edge}: both outputs must have the input's shape {tuple(ids.shape)}, got "
            f"{tuple(masked.shape)} and {tuple(labels.shape)}.",
        )
        if torch.equal(masked, ref_masked) and torch.equal(labels, ref_labels):
            continue
        if (masked == IGNORE_INDEX).any() and not (labels == IGNORE_INDEX).any():
            raise ExerciseError("the two outputs are swapped: return (masked_ids, labels).")
        if not torch.equal(labels, ref_labels):
            selected = labels != IGNORE_INDEX
            if (selected & special).any():
                raise ExerciseError(
                    f"{edge}: a special token or padding was selected: targets are drawn among "
                    "the positions where `special` is False."
                )
            if torch.equal(selected, ref_labels != IGNORE_INDEX):
                raise ExerciseError(
                    f"{edge}: the right positions are targets, but the labels are wrong: the "
                    "ORIGINAL id at a target, -100 everywhere else."
                )
            rate = selected.float().sum() / (~special).sum()
            raise ExerciseError(
                f"{edge}: the targets differ from the library's ({rate:.1%} of the eligible "
                f"tokens selected, p = {rates.get('p', 0.15)}): draw torch.rand(B, T, "
                "generator=generator) < p FIRST, and use the `p` argument."
            )
        target = ref_labels != IGNORE_INDEX
        n_mask = int((masked[target] == 4).sum())
        n_ref = int((ref_masked[target] == 4).sum())
        if n_mask != n_ref:
            raise ExerciseError(
                f"{edge}: {n_mask} targets became [MASK], the library {n_ref} (p_mask = "
                f"{rates.get('p_mask', 0.8)}): draw the second torch.rand(B, T) for every "
                "position and compare it with the `p_mask` and `p_random` arguments."
            )
        random_ids = masked[target & (ref_masked != 4) & (ref_masked != before)]
        if len(real_ids) <= 3 and int(real_ids.max()) not in masked[target].tolist():
            raise ExerciseError(
                f"{edge}: id {int(real_ids.max())}, the last real id, is never drawn: "
                "torch.randint's upper bound is exclusive — index real_ids with "
                "torch.randint(len(real_ids), (B, T), generator=generator)."
            )
        if torch.isin(random_ids, torch.arange(5)).any():
            raise ExerciseError(
                f"{edge}: a random replacement is a special id: draw from real_ids."
            )
        raise ExerciseError(
            f"{edge}: the random replacements differ from the library's: draw them third, as "
            "real_ids[torch.randint(len(real_ids), (B, T), generator=generator)], one per position."
        )
    return "the library's masks, draw for draw: a batch of one, other rates, 3 real ids."


check_mask_tokens = BuildCheck(
    _probe_mask_tokens,
    fallback=library_mask_tokens,
    fallback_name="course_lib.objectives.masking.mask_tokens",
    todo="draw targets (rand < p, never special), then what happens to each (rand: [MASK] below "
    "p_mask, random below p_mask + p_random), then a random real id; return (masked_ids, labels).",
)


# ----- 01/04: NSP pairs -------------------------------------------------------------------------------


def nsp_examples(
    docs: list[list[list[int]]],
    budget: int,
    rng: random.Random,
    cls_id: int,
    sep_id: int,
    short_prob: float = 0.1,
) -> list[dict[str, Any]]:
    """NSP examples [CLS] A [SEP] B [SEP] from documents given as lists of sentence ids (the
    lesson's version of course_lib.data.make_nsp_examples)."""
    examples = []
    for d, doc in enumerate(docs):
        i = 0
        while i < len(doc) - 1:
            goal = rng.randint(2, budget) if rng.random() < short_prob else budget
            j, length = i, 0
            while j < len(doc) and (length < goal or j - i < 2):
                length, j = length + len(doc[j]), j + 1
            a_end = rng.randint(i + 1, j - 1)
            a = [t for s in doc[i:a_end] for t in s]
            if rng.random() < 0.5:
                other = docs[rng.choice([k for k in range(len(docs)) if k != d])]
                b = [t for s in other[rng.randrange(len(other)) :] for t in s][
                    : max(goal - len(a), 1)
                ]
                label, i = 1, a_end
            else:
                b = [t for s in doc[a_end:j] for t in s]
                label, i = 0, j
            while len(a) + len(b) > budget:
                (a if len(a) > len(b) else b).pop()
            examples.append({
                "input_ids": [cls_id, *a, sep_id, *b, sep_id],
                "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                "next_sentence_label": label,
            })  # fmt: skip
    rng.shuffle(examples)
    return examples


def _nsp_docs(
    n_docs: int, sentences: tuple[int, int], length: tuple[int, int], seed: int
) -> list[list[list[int]]]:
    """Documents whose ids tell where they come from: document d, token k -> 1000 * (d + 1) + k."""
    g = random.Random(seed)
    docs = []
    for d in range(n_docs):
        doc, k = [], 0
        for _ in range(g.randint(*sentences)):
            n = g.randint(*length)
            doc.append([1000 * (d + 1) + k + i for i in range(n)])
            k += n
        docs.append(doc)
    return docs


def _probe_nsp_examples(candidate: Callable) -> str:
    cls_id, sep_id = 2, 3
    cases = (
        ("150 documents, budget 30", _nsp_docs(150, (2, 12), (2, 9), 0), 30),
        ("two documents only", _nsp_docs(2, (6, 8), (3, 6), 1), 20),
        ("documents of exactly two sentences", _nsp_docs(30, (2, 2), (2, 6), 2), 30),
        ("sentences longer than the budget (truncation)", _nsp_docs(20, (2, 5), (10, 25), 3), 12),
    )
    totals = {"examples": 0, "notnext": 0}
    for edge, docs, budget in cases:
        before = [[list(s) for s in d] for d in docs]
        got = run_learner_code(candidate, docs, budget, random.Random(0), cls_id, sep_id)
        expect(docs == before, "the documents were modified: read them, build new lists.")
        expect(isinstance(got, list) and got, f"{edge}: return a non-empty list of examples.")
        again = run_learner_code(candidate, before, budget, random.Random(0), cls_id, sep_id)
        expect(
            again == got,
            "the same rng seed gave different examples: draw every random choice from `rng` "
            "(rng.random(), rng.randint, rng.choice), not from the `random` module.",
        )
        for n, e in enumerate(got):
            ids, types, label = e["input_ids"], e["token_type_ids"], e["next_sentence_label"]
            where = f"{edge}: example {n} ({len(ids)} ids, label {label})"
            expect(
                ids[0] == cls_id and ids[-1] == sep_id and ids.count(sep_id) == 2,
                f"{where} must be [CLS] A [SEP] B [SEP]: got {ids[:3]} ... {ids[-2:]}.",
            )
            split = ids.index(sep_id)
            a, b = ids[1:split], ids[split + 1 : -1]
            expect(a and b, f"{where}: A and B must each hold at least one token.")
            expect(
                len(ids) <= budget + 3,
                f"{where} is longer than budget + 3 = {budget + 3}: trim the longer segment "
                "until len(A) + len(B) <= budget.",
            )
            want = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            if types != want:
                raise ExerciseError(
                    f"{where}: token_type_ids {types}, expected {want}: segment A (0) owns [CLS], "
                    "A and the first [SEP]; B and the last [SEP] are 1."
                )
            doc_a = {t // 1000 for t in a}
            doc_b = {t // 1000 for t in b}
            expect(len(doc_a) == 1, f"{where}: A mixes documents {sorted(doc_a)}.")
            if label == 0 and doc_b != doc_a:
                raise ExerciseError(
                    f"{where}: IsNext (label 0) but B comes from document {sorted(doc_b)}, A from "
                    f"{sorted(doc_a)} — label 0 is the real continuation, 1 the random B."
                )
            if label == 0 and min(b) < max(a):
                raise ExerciseError(f"{where}: IsNext but B does not follow A in the document.")
            if label == 1 and doc_b & doc_a:
                raise ExerciseError(
                    f"{where}: NotNext (label 1) but B comes from A's own document "
                    f"{sorted(doc_a)[0] - 1}: pick the other document among the OTHERS."
                )
        totals["examples"] += len(got)
        totals["notnext"] += sum(e["next_sentence_label"] for e in got)
    share = totals["notnext"] / totals["examples"]
    se = math.sqrt(0.25 / totals["examples"])
    expect(
        abs(share - 0.5) < 4 * se,
        f"{share:.1%} of {totals['examples']} examples are NotNext; expected 50% (within "
        f"{4 * se:.1%}): flip a fair coin per example.",
    )
    return f"{totals['examples']} examples on 4 corpora, {share:.1%} NotNext, provenance right."


check_nsp_examples = BuildCheck(
    _probe_nsp_examples,
    fallback=nsp_examples,
    fallback_name="course_lib.data.make_nsp_examples (the lesson's version on sentence ids)",
    todo="walk each document, gather a chunk up to the budget, cut it into A and B, take B from "
    "another document half of the time (label 1), trim to the budget; return the examples.",
)


# ----- 01/04: the training loop by hand ----------------------------------------------------------


def train_by_hand(
    model: nn.Module,
    batches: list[dict[str, Tensor]],
    peak_lr: float,
    warmup: float,
    max_grad_norm: float,
    fused: bool = False,
    *,
    decay_all: bool = False,
    lr_at: float = 0.5,
    clip: str = "before",
    zero_grad: bool = True,
    betas: tuple[float, float] = (0.9, 0.98),
    schedule: bool = True,
) -> list[float]:
    """The engine's optimizer step written out (AdamW, decay 0.01 on matrices only, linear warmup
    then decay evaluated mid-step, clipping, zero_grad); the keyword switches reproduce the
    typical mistakes the check names."""
    device = next(model.parameters()).device
    matrices = [p for p in model.parameters() if p.ndim >= 2 or decay_all]
    vectors = [p for p in model.parameters() if p.ndim < 2 and not decay_all]
    groups = [{"params": matrices, "weight_decay": 0.01}]
    if vectors:
        groups.append({"params": vectors, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=peak_lr, betas=betas, eps=1e-6, fused=fused)
    losses = []
    for step, batch in enumerate(batches):
        progress = (step + lr_at) / len(batches)
        factor = progress / warmup if progress < warmup else (1 - progress) / (1 - warmup)
        for group in optimizer.param_groups:
            group["lr"] = peak_lr * (factor if schedule else 1.0)
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        if clip == "before":
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if clip == "after":
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def _train_case(seed: int, steps: int) -> tuple[nn.Module, list[dict[str, Tensor]]]:
    from course_lib.models.bert import BertForMaskedLM

    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(seed)
    model = BertForMaskedLM(config)
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(steps):
        ids = torch.randint(5, 40, (4, 10), generator=g)
        labels = torch.where(torch.rand(4, 10, generator=g) < 0.3, ids, IGNORE_INDEX)
        labels[:, 1] = ids[:, 1]  # at least one target per row
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                        "token_type_ids": torch.zeros_like(ids), "labels": labels})  # fmt: skip
    return model, batches


_LOOP_MISTAKES: tuple[tuple[dict[str, Any], str], ...] = (
    (
        {"decay_all": True},
        "weight decay reaches the biases and LayerNorm gains: decay only the "
        "matrices (p.ndim >= 2), the 1-D tensors get weight_decay 0.0",
    ),
    (
        {"lr_at": 0.0},
        "the learning rate is evaluated at the START of each step (the first step "
        "gets lr 0): use the middle, progress = (step + 0.5) / steps",
    ),
    (
        {"lr_at": 1.0},
        "the learning rate is evaluated at the END of each step (the last step gets "
        "lr 0): use the middle, progress = (step + 0.5) / steps",
    ),
    (
        {"schedule": False},
        "the learning rate stays at its peak: set every group's lr to peak_lr "
        "times the warmup/decay factor before each step",
    ),
    (
        {"clip": "none"},
        "the gradient is not clipped before the step (never, or only after optimizer.step(), "
        "when it no longer matters): clip_grad_norm_(model.parameters(), max_grad_norm) between "
        "backward() and step()",
    ),
    (
        {"zero_grad": False},
        "the gradients are never cleared, so every step adds up all the "
        "earlier ones: optimizer.zero_grad() after each step",
    ),
    (
        {"betas": (0.9, 0.999)},
        "AdamW's betas are the default (0.9, 0.999): the recipe uses "
        "betas=(0.9, 0.98) (and eps=1e-6)",
    ),
)


def _probe_train_by_hand(candidate: Callable) -> str:
    import copy

    cases = (
        ("3 steps, warmup 40%, clipping at 1.0", 3, 0.4, 1.0),
        ("a single step", 1, 0.4, 1.0),
        ("clipping at 0.05, so it acts on every step", 4, 0.25, 0.05),
    )
    for edge, steps, warmup, max_norm in cases:
        model, batches = _train_case(steps, steps)
        kept = [{k: v.clone() for k, v in b.items()} for b in batches]
        mine = copy.deepcopy(model).train()
        losses = run_learner_code(candidate, mine, batches, 1e-2, warmup, max_norm, False)
        expect(
            all(torch.equal(b[k], c[k]) for b, c in zip(batches, kept) for k in b),
            "a batch was modified: the loop only reads the batches.",
        )
        expect(
            isinstance(losses, list) and len(losses) == steps,
            f"{edge}: return the list of the {steps} losses (loss.item() per step), got "
            f"{losses if not isinstance(losses, list) else f'{len(losses)} values'}.",
        )

        def weights_after(setting: tuple = (model, kept, warmup, max_norm), **variant: Any) -> dict:
            start, data, share, norm = setting
            ref = copy.deepcopy(start).train()
            train_by_hand(ref, data, 1e-2, share, norm, False, **variant)
            return ref.state_dict()

        got, want = mine.state_dict(), weights_after()
        diff = max((got[k].float() - want[k].float()).abs().max().item() for k in want)
        if diff < 1e-6:
            continue
        for variant, hint in _LOOP_MISTAKES:
            other = weights_after(**variant)
            if max((got[k].float() - other[k].float()).abs().max().item() for k in other) < 1e-6:
                raise ExerciseError(f"{edge}: the weights differ by up to {diff:.2g} — {hint}.")
        raise ExerciseError(
            f"{edge}: after {steps} step(s) the weights differ from the engine's step by up to "
            f"{diff:.2g}: AdamW (betas (0.9, 0.98), eps 1e-6, decay 0.01 on matrices only), lr "
            "from the mid-step warmup/decay, loss.backward(), clip, step, zero_grad."
        )
    return "the engine's weights after 1, 3 and 4 steps, with and without active clipping."


check_train_by_hand = BuildCheck(
    _probe_train_by_hand,
    fallback=train_by_hand,
    fallback_name="Trainer's optimizer step (as train_by_hand)",
    todo="build AdamW with two parameter groups, then per batch: set the lr, loss.backward(), "
    "clip, step, zero_grad; return the losses.",
)


# ----- 01/06: span decoding and pair packing --------------------------------------------------------


def _library_best_span(
    start_logits: Tensor,
    end_logits: Tensor,
    max_answer_len: int,
    context_start: int,
    context_end: int,
) -> tuple[int, int]:
    """course_lib.training.finetune.best_span with the lesson's argument order."""
    return library_best_span(start_logits, end_logits, context_start, context_end, max_answer_len)


def _probe_best_span(candidate: Callable) -> str:
    g = torch.Generator().manual_seed(0)
    cases = []
    s, e = torch.randn(20, generator=g), torch.randn(20, generator=g)
    s[11], e[8] = 5.0, 5.0
    cases.append(("the best end lies before the best start", s, e, 10, 6, 15))
    s2, e2 = torch.randn(20, generator=g), torch.randn(20, generator=g)
    e2[15] = 9.0
    s2[14] = 9.0
    cases.append(
        ("the best pair would end on the [SEP] right after the context", s2, e2, 10, 6, 15)
    )
    s3, e3 = torch.randn(20, generator=g), torch.randn(20, generator=g)
    s3[7], e3[11] = 6.0, 6.0  # a 5-token span: allowed at 5, not at 4
    cases.append(("a span of exactly max_answer_len = 5 tokens", s3, e3, 5, 6, 15))
    cases.append(("max_answer_len = 4, one token shorter", s3, e3, 4, 6, 15))
    cases.append(
        (
            "max_answer_len = 1: start == end",
            *(torch.randn(12, generator=g) for _ in range(2)),
            1,
            3,
            10,
        )
    )
    cases.append(
        ("a context of one token", *(torch.randn(8, generator=g) for _ in range(2)), 10, 4, 5)
    )
    for _ in range(20):
        cases.append(
            ("random scores", torch.randn(16, generator=g), torch.randn(16, generator=g), 3, 2, 14)
        )
    for edge, start, end, max_len, lo, hi in cases:
        got = run_learner_code(candidate, start.clone(), end.clone(), max_len, lo, hi)
        expected = _library_best_span(start, end, max_len, lo, hi)
        expect(
            isinstance(got, tuple) and len(got) == 2,
            f"return a tuple (start, end), got {type(got).__name__}.",
        )
        got = (int(got[0]), int(got[1]))
        if got == expected:
            continue
        where = (
            f"{edge} (context [{lo}, {hi}), max_answer_len {max_len}): got {got}, expected "
            f"{expected}"
        )
        if got[1] >= hi or got[0] < lo:
            raise ExerciseError(
                f"{where} — both ends must lie in [context_start, context_end): end exclusive."
            )
        if got[1] < got[0]:
            if got == (int(start.argmax()), int(end.argmax())):
                raise ExerciseError(
                    f"{where} — the two argmaxes taken separately can form no legal span: "
                    "search the PAIRS with start <= end."
                )
            raise ExerciseError(f"{where} — the end comes before the start.")
        if got[1] - got[0] + 1 > max_len:
            raise ExerciseError(
                f"{where} — a span of {got[1] - got[0] + 1} tokens is longer than max_answer_len "
                f"= {max_len} (start..end counts both ends: end - start + 1)."
            )
        if expected[1] - expected[0] + 1 == max_len:
            raise ExerciseError(
                f"{where} — spans of exactly max_answer_len tokens are allowed: end can reach "
                "start + max_answer_len - 1."
            )
        raise ExerciseError(f"{where} — take the legal pair with the highest start + end score.")
    return "legal spans only: inside the context, start <= end, at most max_answer_len tokens."


check_best_span = BuildCheck(
    _probe_best_span,
    fallback=_library_best_span,
    fallback_name="course_lib.training.finetune.best_span",
    todo="return the (start, end) with the highest start + end score, start <= end, at most "
    "max_answer_len tokens, both in [context_start, context_end).",
)


def pack_pair(
    ids_a: list[int], ids_b: list[int], cls_id: int, sep_id: int
) -> tuple[list[int], list[int]]:
    """[CLS] A [SEP] B [SEP] and its token_type_ids (0 for [CLS], A and the first [SEP])."""
    return [cls_id, *ids_a, sep_id, *ids_b, sep_id], [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)


def _probe_pack_pair(candidate: Callable) -> str:
    cases = (
        ("a typical pair", [11, 12, 13, 14], [21, 22, 23], 2, 3),
        ("a one-token A", [11], [21, 22], 2, 3),
        ("a one-token B", [11, 12], [21], 2, 3),
        ("other special ids ([CLS] = 101, [SEP] = 102)", [11, 12, 13], [21, 22], 101, 102),
    )
    for edge, a, b, cls_id, sep_id in cases:
        before = (list(a), list(b))
        got = run_learner_code(candidate, a, b, cls_id, sep_id)
        expect((a, b) == before, "ids_a or ids_b was modified: build a new list.")
        expect(
            isinstance(got, tuple) and len(got) == 2, "return a tuple (input_ids, token_type_ids)."
        )
        ids, types = (list(x) for x in got)
        want_ids, want_types = pack_pair(a, b, cls_id, sep_id)
        if ids != want_ids:
            raise ExerciseError(
                f"{edge}: input_ids {ids}, expected {want_ids}: [CLS] A [SEP] B [SEP], with "
                "the cls_id and sep_id arguments."
            )
        if types != want_types:
            raise ExerciseError(
                f"{edge}: token_type_ids {types}, expected {want_types}: segment A (0) owns "
                "[CLS] and the FIRST [SEP]; B and the last [SEP] are 1 — one type per id."
            )
    return "[CLS] A [SEP] B [SEP] with segments 0/1, down to one-token segments."


check_pack_pair = BuildCheck(
    _probe_pack_pair,
    fallback=pack_pair,
    fallback_name="the tokenizer's pair encoding",
    todo="return ([CLS] A [SEP] B [SEP], token_type_ids: 0 for [CLS], A and the first [SEP], 1 "
    "for B and the last [SEP]).",
)


# ----- 01/08: the labs' two languages ----------------------------------------------------------------


def _probe_sample_pairs(candidate: Callable) -> str:
    cases = (("the lab's size (32 symbols, 4 pairs, batch 8)", 32, 8, 4), ("a batch of one pair", 32, 1, 1),
             ("a permutation of 2 symbols", 2, 5, 3))  # fmt: skip
    for edge, n, batch, pairs in cases:
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(n))
        before = perm.clone()
        got = _tensor(
            run_learner_code(candidate, perm, batch, pairs, torch.Generator().manual_seed(1)),
            "the ids",
        )
        expect(torch.equal(perm, before), "`perm` was modified.")
        expected = bert_labs.sample_pairs(before, batch, pairs, torch.Generator().manual_seed(1))
        expect(
            got.shape == expected.shape,
            f"{edge}: expected (batch, 2 * pairs) = {tuple(expected.shape)}, got {tuple(got.shape)}.",
        )
        if torch.equal(got, expected):
            continue
        shift = (got - expected).unique()
        if len(shift) == 1:
            raise ExerciseError(
                f"{edge}: every id is {int(shift):+d} off: content ids start at N_SPECIAL = "
                f"{bert_labs.N_SPECIAL}."
            )
        if torch.equal(got[:, 0::2], expected[:, 1::2]) and torch.equal(
            got[:, 1::2], expected[:, 0::2]
        ):
            raise ExerciseError(
                f"{edge}: each pair is (perm[b], b): the first token is read off its RIGHT "
                "neighbour, so perm[b] comes first."
            )
        raise ExerciseError(
            f"{edge}: row 0 is {got[0].tolist()}, expected {expected[0].tolist()}: draw b as "
            "ONE torch.randint(0, len(perm), (batch, pairs), generator=generator)."
        )
    return "the library's pairs, draw for draw, down to one pair and 2 symbols."


check_sample_pairs = BuildCheck(
    _probe_sample_pairs,
    fallback=bert_labs.sample_pairs,
    fallback_name="course_lib.labs.bert.sample_pairs",
    todo="draw b (batch, pairs) from `generator`, interleave (perm[b], b) and add N_SPECIAL; "
    "return (batch, 2 * pairs) ids.",
)


def library_tags(ids: Tensor, word_class: Tensor) -> Tensor:
    """The tag language's tags: class of the left neighbour at odd positions, -100 elsewhere."""
    x = ids - bert_labs.N_SPECIAL
    tags = torch.full_like(ids, IGNORE_INDEX)
    tags[:, 1::2] = word_class[x[:, 0:-1:2]]
    return tags


def _probe_tags(candidate: Callable) -> str:
    word_class, emission = bert_labs.make_tag_language(3)
    cases = (("a (4, 8) batch", 4, 8), ("a batch of one", 1, 8), ("an odd length, 7", 3, 7),
             ("two tokens", 2, 2), ("one token: no odd position", 2, 1))  # fmt: skip
    for edge, batch, length in cases:
        g = torch.Generator().manual_seed(batch * 10 + length)
        ids, expected = bert_labs.sample_tagged(word_class, emission, batch, max(length, 2), g)
        ids, expected = ids[:, :length], expected[:, :length]
        before = ids.clone()
        try:
            got = _tensor(run_learner_code(candidate, ids, word_class), "the tags")
        except NotWrittenYet:
            raise
        except ExerciseError as err:
            hint = (
                " — at an odd length the last token has no right neighbour to tag: the left "
                "neighbours of the odd positions are x[:, 0:-1:2], not every even position"
                if length % 2
                else ""
            )
            raise ExerciseError(f"{edge}: {err}{hint}") from None
        expect(torch.equal(ids, before), "`ids` was modified.")
        expect(
            got.shape == ids.shape,
            f"{edge}: expected the shape of ids {tuple(ids.shape)}, got {tuple(got.shape)}.",
        )
        if torch.equal(got, expected):
            continue
        if (got[:, 0::2] != IGNORE_INDEX).any():
            raise ExerciseError(
                f"{edge}: even positions carry no tag: they must hold -100 (IGNORE_INDEX)."
            )
        raise ExerciseError(
            f"{edge}: row 0 is {got[0].tolist()}, expected {expected[0].tolist()}: the tag at odd "
            "position i is word_class of the content index (id - N_SPECIAL) at i - 1."
        )
    return "the library's tags, odd lengths, a single token and a batch of one included."


check_tags = BuildCheck(
    _probe_tags,
    fallback=library_tags,
    fallback_name="course_lib.labs.bert.sample_tagged's tags",
    todo="return (B, T) tags: word_class[id - N_SPECIAL] of the left neighbour at every odd "
    "position, -100 at the even ones.",
)
