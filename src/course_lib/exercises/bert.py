"""Chapter 01 exercise checkers: masking, attention, the embedding sum, the parameter formula.

Each checker runs the learner's function on fresh inputs, compares with the reference, and
names the typical mistake it recognises (tests/test_exercise_checkers.py holds the table of
wrong answers and the message each must produce)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from course_lib.config import BertConfig
from course_lib.counting import count_parameters
from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    config_from_letters,
    expect,
    expect_ignore_index_in_labels_only,
    expect_unchanged,
    passed,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX

# ----- exercise 1: 80/10/10 masking -------------------------------------------------------------

_VOCAB, _MASK_ID, _SPECIALS = 1000, 4, (0, 1, 2, 3, 4)


def _masking_batch(n_rows: int, seq: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(5, _VOCAB, (n_rows, seq), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    ids[: n_rows // 4, seq // 2 :] = 0  # padding in a quarter of the rows
    return ids, torch.isin(ids, torch.tensor(_SPECIALS))


def _call_masking(
    mask_tokens: Callable, ids: Tensor, special: Tensor, seed: int, vocab: int = _VOCAB
) -> tuple[Tensor, Tensor]:
    given_ids, given_special = ids.clone(), special.clone()
    out = run_learner_code(
        mask_tokens,
        given_ids,
        given_special,
        _MASK_ID,
        vocab,
        torch.Generator().manual_seed(seed),
    )
    name = getattr(mask_tokens, "__name__", "mask_tokens")
    with at_edge("inputs left unmodified"):
        expect_unchanged(ids, given_ids, "input_ids", name)
        expect_unchanged(special, given_special, "special_tokens_mask", name)
    expect(isinstance(out, tuple) and len(out) == 2, "return a tuple (masked_input_ids, labels).")
    expect(
        all(isinstance(t, Tensor) for t in out),
        f"return two tensors (masked_input_ids, labels), got {tuple(type(t).__name__ for t in out)}.",
    )
    return out


def check_masking(mask_tokens: Callable, n_rows: int = 200, seq: int = 512) -> None:
    """`mask_tokens(input_ids, special_tokens_mask, mask_token_id, vocab_size, generator)` must
    return (masked_ids, labels) with 15% of eligible tokens selected, of which 80/10/10, every
    random number drawn from `generator`."""
    ids, special = _masking_batch(n_rows, seq)
    masked, labels = _call_masking(mask_tokens, ids, special, seed=7)
    expect(
        masked.shape == ids.shape and labels.shape == ids.shape,
        f"both outputs must have the input's shape {tuple(ids.shape)}; got "
        f"{tuple(masked.shape)} and {tuple(labels.shape)}.",
    )
    expect_ignore_index_in_labels_only(
        masked,
        labels,
        swapped="the two outputs are swapped: return (masked_input_ids, labels), the "
        "ids the model reads first and the labels (with -100) second.",
        never="labels are never -100: set them to -100 at every position that was NOT "
        "selected (the loss ignores those) and to the original id where selected.",
        in_inputs="masked_input_ids contain -100: -100 belongs in labels only; the model's "
        "input holds token ids.",
    )
    changed = masked != ids
    if changed.any() and bool((labels[changed] == IGNORE_INDEX).all()):
        raise ExerciseError(
            "labels are inverted: the tokens you changed have label -100. Put the "
            "ORIGINAL id where a token was selected and -100 everywhere else."
        )
    selected = labels != IGNORE_INDEX
    expect(
        not (selected & special).any(),
        "special tokens and padding must never be selected (special_tokens_mask is True there).",
    )
    expect(
        torch.equal(labels[selected], ids[selected]),
        "labels must hold the ORIGINAL token id at selected positions (the model predicts it).",
    )
    expect(torch.equal(masked[~selected], ids[~selected]), "unselected tokens must stay unchanged.")
    n_eligible, n_sel = int((~special).sum()), int(selected.sum())

    def rate_ok(count: int, total: int, p: float) -> tuple[bool, float]:
        rate = count / max(total, 1)
        return abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / max(total, 1)), rate

    ok, rate = rate_ok(n_sel, n_eligible, 0.15)
    expect(ok, f"{rate:.1%} of eligible tokens were selected; expected 15% (labels != -100).")
    to_mask = selected & (masked == _MASK_ID)
    kept = selected & (masked == ids)
    random = selected & ~to_mask & ~kept
    for name, part, p in (("[MASK]", to_mask, 0.8), ("random", random, 0.1), ("kept", kept, 0.1)):
        ok, rate = rate_ok(int(part.sum()), n_sel, p)
        expect(ok, f"{rate:.1%} of selected tokens became {name}; expected {p:.0%}.")
    expect(
        not torch.isin(masked[random], torch.tensor(_SPECIALS)).any(),
        "random replacements must not be special tokens: draw them from [5, vocab_size).",
    )
    again = _call_masking(mask_tokens, ids, special, seed=7)
    expect(
        torch.equal(again[0], masked) and torch.equal(again[1], labels),
        "two generators with the same seed gave different masks: draw EVERY random number from "
        "`generator` (torch.rand(..., generator=generator), torch.randint(..., "
        "generator=generator)); the global random state does not repeat.",
    )
    other = _call_masking(mask_tokens, ids, special, seed=8)
    expect(
        not torch.equal(other[1], labels),
        "a generator with a different seed gave the same masks: draw from `generator` instead "
        "of seeding your own random state.",
    )
    _check_masking_edges(mask_tokens)
    passed(
        f"selected {n_sel / n_eligible:.1%} of {n_eligible:,} eligible tokens; 80/10/10 within "
        "tolerance; the same seed repeats, another seed differs; a batch of one, a tiny "
        "vocabulary and the inputs left unmodified too."
    )


def _check_masking_edges(mask_tokens: Callable) -> None:
    """Where masking changes shape or runs out of room: one row, and a vocabulary of 7 ids, where
    the random replacements can only be 5 or 6 (so a range that drops the last id shows)."""
    ids, special = _masking_batch(1, 40)
    with at_edge("a batch of one (input_ids of shape (1, 40))"):
        masked, labels = _call_masking(mask_tokens, ids, special, seed=3)
        expect(
            masked.shape == ids.shape and labels.shape == ids.shape,
            f"both outputs must keep the input's shape (1, 40); got {tuple(masked.shape)} and "
            f"{tuple(labels.shape)} (a dimension of size 1 is still a dimension: no .squeeze()).",
        )
    tiny = 7
    ids, special = _masking_batch(200, 64)
    ids = torch.where(special, ids, 5 + ids % 2)  # every ordinary token is 5 or 6
    with at_edge(f"a tiny vocabulary (vocab_size = {tiny}: ids 0-4 special, 5 and 6 ordinary)"):
        masked, labels = _call_masking(mask_tokens, ids, special, seed=11, vocab=tiny)
        selected = labels != IGNORE_INDEX
        replaced = selected & (masked != _MASK_ID) & (masked != ids)
        drawn = set(masked[replaced].tolist())
        outside = sorted(i for i in drawn if not 5 <= i < tiny)
        expect(not outside, f"random replacements {outside} are outside [5, vocab_size).")
        missing = sorted(set(range(5, tiny)) - drawn)
        expect(
            not missing,
            f"in {int(replaced.sum())} random replacements, id {missing} never appeared: every "
            "id of [5, vocab_size) must be possible, the last one included. torch.randint's "
            "upper bound is already exclusive: randint(5, vocab_size), not vocab_size - 1.",
        )


# ----- exercise 2: scaled dot-product attention -------------------------------------------------


def check_attention(attention: Callable) -> None:
    """`attention(q, k, v, mask=None)` -> (output, probabilities), as softmax(QK^T/sqrt(d) + mask) V."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 5)
    mask[0, ..., 3:] = torch.finfo(torch.float32).min  # batch 0: keys 3, 4 are padding
    out = run_learner_code(attention, q.clone(), k.clone(), v.clone(), mask.clone())
    expect(
        isinstance(out, tuple) and len(out) == 2,
        "return a tuple (output, attention_probabilities).",
    )
    got, probs = out
    expect(
        isinstance(got, Tensor) and isinstance(probs, Tensor),
        "return two tensors (output, probabilities).",
    )
    if probs.shape == v.shape and got.shape == (2, 3, 5, 5):
        raise ExerciseError("the two outputs are swapped: return (output, probabilities).")
    expect(
        probs.shape == (2, 3, 5, 5),
        f"probabilities must be [batch, heads, q, k] = (2, 3, 5, 5), got {tuple(probs.shape)}.",
    )
    expect(
        got.shape == v.shape,
        f"the output must have v's shape {tuple(v.shape)}, got {tuple(got.shape)}.",
    )
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    ref_probs = (scores + mask).softmax(-1)
    probs = probs.detach()
    if torch.allclose(probs[1], torch.full_like(probs[1], 0.2), atol=1e-5) or torch.allclose(
        probs, (scores * mask).softmax(-1), atol=1e-5, equal_nan=True
    ):
        raise ExerciseError(
            "the mask multiplies the scores: a mask of 0 (keep) then wipes every "
            "score out. The mask is additive: ADD it to the scaled scores, "
            "softmax(Q K^T / sqrt(d) + mask)."
        )
    if torch.allclose(probs, scores.softmax(-1), atol=1e-5):
        raise ExerciseError("the mask is ignored: add it to the scores before the softmax.")
    if torch.allclose(probs[1], ref_probs[1], atol=1e-5) and probs[0, ..., 3:].max() > 1e-3:
        raise ExerciseError(
            "padded keys still receive attention: the mask must be ADDED to the "
            "scaled scores (its very negative entries then vanish in the softmax); "
            "multiplying by it, or by a 0/1 mask, leaves the padded scores finite."
        )
    if not torch.isfinite(probs).all():
        raise ExerciseError(
            "the probabilities contain NaN or inf. The mask is additive: 0 keeps a "
            "key, a very negative number removes it; add it to the scores (do not "
            "multiply, and do not read 0 as 'masked')."
        )
    if not torch.allclose(probs.sum(-1), torch.ones(2, 3, 5), atol=1e-5):
        if torch.allclose(probs.sum(-2), torch.ones(2, 3, 5), atol=1e-5):
            raise ExerciseError(
                "the columns sum to 1, not the rows: take the softmax over the LAST "
                "dimension (the keys), softmax(dim=-1)."
            )
        raise ExerciseError(
            "each row of probabilities must sum to 1: add the mask BEFORE a softmax "
            "over the keys (the last dimension)."
        )
    unscaled = q @ k.transpose(-1, -2)
    if torch.allclose(probs, (unscaled + mask).softmax(-1), atol=1e-5):
        raise ExerciseError(
            "scores are not scaled: divide Q K^T by sqrt(head_dim) before the softmax."
        )
    if torch.allclose(probs, (unscaled / 8 + mask).softmax(-1), atol=1e-5):
        raise ExerciseError(
            "scores are divided by head_dim; divide by its SQUARE ROOT, sqrt(head_dim)."
        )
    if torch.allclose(probs, (scores.transpose(-1, -2) + mask).softmax(-1), atol=1e-5):
        raise ExerciseError(
            "the scores are transposed (K Q^T): row i must hold query i against every key, Q K^T."
        )
    expect(
        torch.allclose(probs, ref_probs, atol=1e-5),
        "probabilities differ from softmax(Q K^T / sqrt(d) + mask).",
    )
    if torch.allclose(got[1], scores[1] @ v[1], atol=1e-4):  # batch 1 has no padding
        raise ExerciseError(
            "the output uses the scores: multiply the PROBABILITIES (after the softmax) by V."
        )
    expect(
        torch.allclose(got, ref_probs @ v, atol=1e-5),
        "probabilities are right but the output is not probs @ V.",
    )
    _check_attention_edges(attention)
    passed(
        "your attention equals softmax(QK^T/sqrt(d) + mask) V, padding included; also for a "
        "batch of one with one head, a per-query mask, a query whose keys are all padding and "
        "large scores."
    )


def _attention_edge(attention: Callable, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> None:
    """One edge case of check_attention: the learner's (output, probabilities) against the
    reference, the inputs unchanged, every number finite."""
    given = [t.clone() for t in (q, k, v, mask)]
    out = run_learner_code(attention, *given)
    name = getattr(attention, "__name__", "attention")
    for before, after, what in zip((q, k, v, mask), given, ("q", "k", "v", "mask")):
        expect_unchanged(before, after, what, name)
    expect(
        isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, Tensor) for t in out),
        "return a tuple of two tensors (output, attention_probabilities).",
    )
    got, probs = (t.detach() for t in out)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    ref_probs = (scores + mask).softmax(-1)
    squeezed = " (a dimension of size 1 is still a dimension: do not .squeeze())"
    for what, have, want in (("probabilities", probs, ref_probs), ("output", got, ref_probs @ v)):
        expect(
            have.shape == want.shape,
            f"the {what} must have shape {tuple(want.shape)}, got {tuple(have.shape)}"
            + (squeezed if have.numel() == want.numel() else "")
            + ".",
        )
    expect(
        bool(torch.isfinite(probs).all() and torch.isfinite(got).all()),
        "the probabilities contain NaN or inf.",
    )
    expect(
        torch.allclose(probs, ref_probs, atol=1e-5),
        f"probabilities differ from softmax(Q K^T / sqrt(d) + mask) by up to "
        f"{float((probs - ref_probs).abs().max()):.2g}.",
    )
    expect(
        torch.allclose(got, ref_probs @ v, atol=1e-4),
        "probabilities are right but the output is not probs @ V.",
    )


def _check_attention_edges(attention: Callable) -> None:
    """The shapes and values where attention's parts disappear or change shape: one sequence
    and one head, a mask with one row per query, a query with no real key, huge scores."""
    g = torch.Generator().manual_seed(17)
    low = torch.finfo(torch.float32).min
    q, k, v = (torch.randn(1, 1, 4, 8, generator=g) for _ in range(3))
    mask = torch.zeros(1, 1, 1, 4)
    mask[..., 3] = low
    with at_edge("a batch of one with one head (q, k, v of shape (1, 1, 4, 8))"):
        _attention_edge(attention, q, k, v, mask)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    per_query = torch.zeros(2, 1, 5, 5)
    per_query[0] = torch.triu(torch.full((5, 5), low), diagonal=1)  # query i sees keys <= i
    per_query[1, 0, :2, 2:] = low  # sequence 1: two documents, positions 0-1 and 2-4
    per_query[1, 0, 2:, :2] = low
    with at_edge(
        "a per-query mask of shape (B, 1, T, T) (each query its own row of keys, e.g. packed "
        "documents or a causal mask; not only (B, 1, 1, T))"
    ):
        _attention_edge(attention, q, k, v, per_query)
    big = 40.0
    with at_edge(
        f"large scores (q and k scaled by {big:g}, scores in the thousands: exp overflows to "
        "inf unless each row's maximum is subtracted first, as torch.softmax does)"
    ):
        _attention_edge(attention, q * big, k * big, v, torch.zeros(2, 1, 1, 5))
    all_padding = torch.zeros(2, 1, 1, 5)
    all_padding[0] = low
    with at_edge(
        "a sequence whose keys are all padding (mask entirely very negative; its output is "
        "thrown away but must stay finite: keep the mask additive and finite, so the row "
        "becomes uniform instead of 0/0)"
    ):
        _attention_edge(attention, q, k, v, all_padding)


# ----- exercise 3: the embedding sum ------------------------------------------------------------


def check_embedding_sum(embed: Callable) -> None:
    """`embed(input_ids, token_type_ids, word, position, segment)` -> word + position + segment
    lookups, [batch, seq, hidden] (before LayerNorm)."""
    g = torch.Generator().manual_seed(3)
    word, position, segment = (torch.randn(n, 6, generator=g) for n in (20, 10, 2))
    ids = torch.randint(
        0, 10, (2, 7), generator=g
    )  # < 10 so a position-by-id mix-up runs and is named
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    got = run_learner_code(embed, ids, types, word, position, segment)
    expect(isinstance(got, Tensor), f"return a tensor, got {type(got).__name__}.")
    expect(
        got.shape == (2, 7, 6),
        f"expected shape [batch, seq, hidden] = (2, 7, 6), got {tuple(got.shape)}.",
    )
    w, p, s = word[ids], position[torch.arange(7)].expand(2, 7, 6), segment[types]
    got = got.detach()

    def close(x: Tensor) -> bool:
        return torch.allclose(got, x, atol=1e-6)

    if close(w + s):
        raise ExerciseError("position embeddings are missing: add position[0..seq-1] to every row.")
    if close(w + p):
        raise ExerciseError("segment embeddings are missing: add segment[token_type_ids].")
    if close(w + p + segment[0]):
        raise ExerciseError(
            "every token gets segment 0's vector: look the segment up per token, "
            "segment[token_type_ids] (sentence B's tokens use row 1)."
        )
    if close(w + position[1:8] + s):
        raise ExerciseError(
            "positions are off by one: the first token is position 0, so use rows "
            "0, 1, ..., seq-1 of the position table."
        )
    if close(w + position[ids] + s):
        raise ExerciseError("positions are looked up by token id; use 0, 1, ..., seq-1 instead.")
    if close(torch.nn.functional.layer_norm(w + p + s, (6,))):
        raise ExerciseError(
            "you applied a LayerNorm: return the plain sum (LayerNorm and dropout "
            "come after it, in the module)."
        )
    expect(close(w + p + s), "the result is not word + position + segment.")
    _check_embedding_edges(embed)
    passed(
        "token + position + segment, summed element-wise; also with 1 and 3 segment types and "
        "a batch of one, the tables left unmodified."
    )


def _check_embedding_edges(embed: Callable) -> None:
    """The segment table is T x H with T = 1 or 3 as well as 2 (RoBERTa keeps one row, other
    models more), and a batch can hold one sequence."""
    g = torch.Generator().manual_seed(19)
    cases = (
        ("three segment types (a segment table of 3 rows, token types 0, 1 and 2)", 2, 6, 3),
        ("one segment type (a segment table of 1 row, every token type 0)", 2, 6, 1),
        ("a batch of one (input_ids of shape (1, 5))", 1, 5, 2),
    )
    for description, batch, seq, n_types in cases:
        word, position, segment = (torch.randn(n, 4, generator=g) for n in (30, 9, n_types))
        ids = torch.randint(0, 30, (batch, seq), generator=g)
        types = torch.arange(seq).repeat(batch, 1) * n_types // seq  # 0 ... n_types - 1, in order
        given = [t.clone() for t in (ids, types, word, position, segment)]
        with at_edge(description):
            got = run_learner_code(embed, *given)
            for before, after, what in zip(
                (ids, types, word, position, segment),
                given,
                ("input_ids", "token_type_ids", "word", "position", "segment"),
            ):
                expect_unchanged(before, after, what, getattr(embed, "__name__", "embed"))
            want = word[ids] + position[:seq] + segment[types]
            expect(isinstance(got, Tensor), f"return a tensor, got {type(got).__name__}.")
            expect(
                got.shape == want.shape,
                f"expected shape [batch, seq, hidden] = {tuple(want.shape)}, got "
                f"{tuple(got.shape)}"
                + (
                    " (a dimension of size 1 is still a dimension: do not .squeeze())"
                    if got.numel() == want.numel()
                    else ""
                )
                + ".",
            )
            wrong = ~torch.isclose(got.detach(), want, atol=1e-6).all(-1)  # (batch, seq)
            if wrong.any():
                kinds = sorted(set(types[wrong].tolist()))
                if min(kinds) >= 2:
                    raise ExerciseError(
                        f"the tokens of segment type {kinds} get the wrong vector (types 0 and 1 "
                        "are right): look each token's row up, segment[token_type_ids]; a "
                        "formula between rows 0 and 1 only works for two types."
                    )
                raise ExerciseError(
                    f"{int(wrong.sum())} token(s) (segment types {kinds}) get the wrong vector: "
                    "expected word[input_ids] + position[0..seq-1] + segment[token_type_ids]."
                )


# ----- exercise 4: the parameter-count formula --------------------------------------------------

_DIMS = (  # V, H, L, I, P, T: bert-base, two small ones, and T = 1 and T = 3 so T x H != 2H
    (30522, 768, 12, 3072, 512, 2),
    (1000, 64, 3, 100, 128, 2),
    (8000, 256, 4, 1024, 128, 1),
    (500, 32, 2, 48, 40, 3),
)


def _bert_count(
    V: int,
    H: int,
    L: int,
    I: int,  # noqa: E741
    P: int,
    T: int,
    *,
    segment: bool = True,
    position: bool = True,
    embedding_ln: bool = True,
    projections: int = 4,
    attention_bias: bool = True,
    ffn_bias: bool = True,
    ffn_maps: int = 2,
    layer_lns: int = 2,
    ln_size: int = 2,
    pooler: bool = True,
    pooler_bias: bool = True,
    types: int | None = None,
) -> int:
    """BertModel's parameters, with switches that reproduce the typical mistakes."""
    t = T if types is None else types
    embeddings = (V + (P if position else 0) + (t if segment else 0)) * H
    embeddings += ln_size * H if embedding_ln else 0
    attention = projections * (H * H + (H if attention_bias else 0))
    ffn = (
        H * I + (I if ffn_bias else 0) + ((I * H + (H if ffn_bias else 0)) if ffn_maps == 2 else 0)
    )
    layer = attention + ffn + layer_lns * ln_size * H
    return embeddings + L * layer + ((H * H + (H if pooler_bias else 0)) if pooler else 0)


_BERT_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"segment": False}, "the segment (token-type) table, T x H, is missing"),
    ({"types": 2}, "the segment table has T rows: use T, not 2 (checked at T = 1 and T = 3 too)"),
    ({"position": False}, "the position table, P x H, is missing"),
    ({"embedding_ln": False}, "the LayerNorm after the embeddings (2H) is missing"),
    (
        {"projections": 3},
        "three H x H projections per layer: attention has FOUR (query, key, value "
        "and the output projection), each with a bias",
    ),
    (
        {"projections": 5},
        "attention has four H x H projections (query, key, value, output), not five",
    ),
    (
        {"attention_bias": False},
        "4H per layer is missing: the biases of the four attention projections",
    ),
    ({"layer_lns": 0}, "4H per layer is missing: the two LayerNorms of each layer (2H each)"),
    ({"ffn_bias": False}, "the feed-forward biases (I + H per layer) are missing"),
    (
        {"attention_bias": False, "ffn_bias": False, "pooler_bias": False},
        "the biases are missing: every linear map has one (4H + I + H per layer, H in the pooler)",
    ),
    ({"ffn_maps": 1}, "the feed-forward has two linear maps, H -> I and I -> H"),
    (
        {"layer_lns": 1},
        "each layer has TWO LayerNorms (after attention and after the feed-forward)",
    ),
    ({"layer_lns": 3}, "each layer has two LayerNorms, not three"),
    ({"ln_size": 1}, "a LayerNorm has 2H parameters (a scale AND a shift per feature), not H"),
    ({"pooler": False}, "the pooler (H x H + H) is missing"),
    ({"pooler_bias": False}, "the pooler's bias (H) is missing"),
)


def check_parameter_formula(bert_parameters: Callable) -> None:
    """`bert_parameters(V, H, L, I, P, T)` -> parameters of BertModel (with pooler), by hand."""
    results = []
    for dims in _DIMS:
        V, H, L, I, P, T = dims  # noqa: E741, N806  (the paper's letters)
        config = config_from_letters(
            BertConfig, V=V, H=H, L=L, I=I, P=P, T=T, num_attention_heads=4
        )
        ref = count_parameters(config, "BertModel")
        assert ref["total"] == _bert_count(*dims), dims  # the mistake table starts from the truth
        got = run_learner_code(bert_parameters, *dims)
        expect(isinstance(got, int), f"return an int, got {type(got).__name__}.")
        results.append((dims, got, ref))
    wrong = [(dims, got, ref) for dims, got, ref in results if got != ref["total"]]
    if not wrong:
        passed(
            "your formula matches count_parameters for four configurations, including bert-base "
            "(109,482,240)."
        )
        return
    (V, H, L, I, P, T), got, ref = wrong[0]  # noqa: E741, N806
    diff = got - ref["total"]
    where = (
        f"for V={V}, H={H}, L={L}, I={I}, P={P}, T={T} you get {got:,}, expected "
        f"{ref['total']:,} (off by {diff:+,})"
    )
    hints = [
        hint
        for flags, hint in _BERT_MISTAKES
        if all(g == _bert_count(*d, **flags) for d, g, _ in results)
    ]
    if not hints:  # one config's difference may still name a whole term or some LayerNorms
        for name in ("embeddings", "attention", "feed_forward", "layer_norm", "pooler"):
            if abs(diff) == ref[name]:
                hints.append(
                    f"the whole {name} term ({ref[name]:,}) is "
                    f"{'missing' if diff < 0 else 'counted twice'}"
                )
        off = [(abs(g - r["total"]), d) for d, g, r in results if g != r["total"]]
        if all(n % (2 * d[1]) == 0 and n // (2 * d[1]) <= 2 * d[2] + 1 for n, d in off):
            hints.append(
                f"{abs(diff) // (2 * H)} LayerNorm(s) of 2H parameters each are off "
                "(there are 2L + 1)"
            )
    raise ExerciseError(
        where
        + (
            ": " + "; or ".join(hints) + "."
            if hints
            else ". Compare term by term with count_parameters(config)."
        )
    )


# ----- exercise 5: whole-word masking -----------------------------------------------------------


def _word_id_rows(n_rows: int, generator: torch.Generator) -> list[list[int | None]]:
    """Rows laid out as a tokenizer's word_ids() for a pair: None for [CLS]/[SEP], words of 1-3
    pieces, and word ids that restart at 0 in sentence B (as transformers' tokenizers do)."""
    rows = []
    for _ in range(n_rows):
        row: list[int | None] = [None]
        for _sentence in range(2):
            for word in range(int(torch.randint(4, 12, (1,), generator=generator))):
                row += [word] * int(torch.randint(1, 4, (1,), generator=generator))
            row.append(None)
        rows.append(row)
    return rows


def _runs(word_ids: list[int | None]) -> list[list[int]]:
    """Token positions of each word: maximal runs of equal, non-None word ids."""
    runs: list[list[int]] = []
    for i, w in enumerate(word_ids):
        if w is None:
            continue
        if i and word_ids[i - 1] == w and runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _call_wwm(whole_word_mask: Callable, word_ids: list[int | None], seed: int) -> Tensor:
    got = run_learner_code(
        whole_word_mask, list(word_ids), 0.15, torch.Generator().manual_seed(seed)
    )
    expect(
        isinstance(got, Tensor) and got.dtype == torch.bool and got.shape == (len(word_ids),),
        f"return a bool tensor with one entry per token, shape ({len(word_ids)},); got "
        f"{type(got).__name__}"
        + (f" {got.dtype} {tuple(got.shape)}" if isinstance(got, Tensor) else "")
        + ".",
    )
    return got


def _shared_id_words(word_ids: list[int | None]) -> list[tuple[list[int], list[int]]]:
    """(positions in sentence A, positions in sentence B) of each word id used in both."""
    b_start = word_ids.index(None, 1) + 1
    pairs = []
    for w in sorted({x for x in word_ids[:b_start] if x is not None}):
        a = [i for i in range(b_start) if word_ids[i] == w]
        b = [i for i in range(b_start, len(word_ids)) if word_ids[i] == w]
        if b:
            pairs.append((a, b))
    return pairs


def check_whole_word_mask(whole_word_mask: Callable, n_rows: int = 1500) -> None:
    """`whole_word_mask(word_ids, probability, generator)` -> bool (T,): each word (a run of
    tokens with the same word id) is selected with `probability`, all its pieces together;
    special tokens (word id None) never."""
    rows = _word_id_rows(n_rows, torch.Generator().manual_seed(5))
    by_length = {1: [0, 0], 2: [0, 0], 3: [0, 0]}  # pieces -> [selected, words]
    together = total_pairs = 0  # A/B words sharing an id: how often selected alike
    for r, word_ids in enumerate(rows):
        chosen = _call_wwm(whole_word_mask, word_ids, seed=r)
        specials = [i for i, w in enumerate(word_ids) if w is None]
        expect(
            not chosen[specials].any(),
            "a special token (word id None) was selected: [CLS], [SEP] and padding are never "
            "masked.",
        )
        for run in _runs(word_ids):
            picked = chosen[run]
            if picked.any() and not picked.all():
                raise ExerciseError(
                    f"a word is split: of its pieces at positions {run}, only "
                    f"{[i for i, p in zip(run, picked.tolist()) if p]} are selected. Whole-word "
                    "masking selects all pieces of a word or none."
                )
            by_length[len(run)][0] += int(picked.all())
            by_length[len(run)][1] += 1
        for a, b in _shared_id_words(word_ids):
            together += int(bool(chosen[a[0]]) == bool(chosen[b[0]]))
            total_pairs += 1
    expect(
        together < total_pairs,
        "word w of sentence A and word w of sentence B are always selected together: word ids "
        "restart at 0 in sentence B, so group CONSECUTIVE tokens with the same id, not all "
        "tokens with the same id.",
    )
    rates = {n: hits / max(words, 1) for n, (hits, words) in by_length.items()}
    if rates[3] > rates[1] + 0.08:
        raise ExerciseError(
            f"long words are selected more often: {rates[1]:.0%} of 1-piece words but "
            f"{rates[3]:.0%} of 3-piece words. Draw once per WORD (not per token, then extend "
            "to the word), so every word has the same 15% chance."
        )
    overall = sum(h for h, _ in by_length.values()) / sum(w for _, w in by_length.values())
    expect(
        abs(overall - 0.15) < 0.02,
        f"{overall:.1%} of words are selected; expected 15% (probability is the second argument).",
    )
    _check_wwm_edges(whole_word_mask)
    first = _call_wwm(whole_word_mask, rows[0], seed=99)
    again = _call_wwm(whole_word_mask, rows[0], seed=99)
    expect(
        torch.equal(first, again),
        "two calls with the same seeded generator gave different masks: draw every random "
        "number from `generator` (e.g. torch.rand(n, generator=generator)).",
    )
    passed(
        f"every word is masked whole, {overall:.1%} of words selected (1-piece {rates[1]:.0%}, "
        f"3-piece {rates[3]:.0%}), specials never, and sentence B's words are their own, even "
        "after a one-word sentence A."
    )


def _check_wwm_edges(whole_word_mask: Callable, n_draws: int = 200) -> None:
    """Where a word's boundary is only the special token: a one-word sentence A has word id 0,
    like sentence B's first word, with only [SEP] between them; and a pair with no words."""
    g = torch.Generator().manual_seed(23)
    apart = 0
    for draw in range(n_draws):
        a_pieces = int(torch.randint(1, 4, (1,), generator=g))
        row: list[int | None] = [None] + [0] * a_pieces + [None]
        b_start = len(row)
        for word in range(int(torch.randint(1, 5, (1,), generator=g))):
            row += [word] * int(torch.randint(1, 3, (1,), generator=g))
        row.append(None)
        with at_edge(f"a one-word sentence A (word_ids {row})"):
            chosen = _call_wwm(whole_word_mask, row, seed=1000 + draw)
            expect(
                not chosen[[i for i, w in enumerate(row) if w is None]].any(),
                "a special token (word id None) was selected.",
            )
        apart += int(bool(chosen[1]) != bool(chosen[b_start]))
    expect(
        apart > 0,
        f"a one-word sentence A: its word (id 0) and sentence B's first word (also id 0, after "
        f"[SEP]) were selected together in all {n_draws} draws: they are two words. A special "
        "token (word id None) ends the word before it: compare with the previous TOKEN's id, "
        "None included (reset what you remember at None).",
    )
    row = [None, None, None]
    with at_edge("a pair of two empty sentences (word_ids [None, None, None])"):
        chosen = _call_wwm(whole_word_mask, row, seed=0)
        expect(not chosen.any(), "nothing may be selected: there is no word.")


# ----- exercise 6: an attention mask for packed documents ---------------------------------------


def _packed_doc_ids() -> Tensor:
    """(3, 12) document ids of packed rows: several documents per row, -1 = padding."""
    return torch.tensor(
        [
            [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2],
            [0, 0, 0, 0, 0, 1, 1, 1, -1, -1, -1, -1],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1],
        ]
    )


def _reference_packed_mask(doc_ids: Tensor) -> Tensor:
    same = doc_ids[:, :, None] == doc_ids[:, None, :]  # (B, T, T): same document (or both pad)
    real = doc_ids >= 0
    keep = same & real[:, None, :]  # real keys of the query's own document
    keep |= torch.eye(doc_ids.shape[1], dtype=torch.bool)[None] & ~real[:, :, None]
    return keep[:, None]  # (B, 1, T, T)


def check_packed_attention_mask(packed_attention_mask: Callable) -> None:
    """`packed_attention_mask(doc_ids)` -> bool keep-mask (B, 1, T, T) for rows that pack several
    documents (doc_ids (B, T), -1 = padding): a real token attends to the real tokens of its own
    document only, and a padding query attends to itself (any finite choice; its output is
    ignored, but a row with nothing to attend to makes the softmax NaN)."""
    worst = _check_packed_on(packed_attention_mask, _packed_doc_ids())
    edges = (
        (
            "left padding (the padding before the documents: doc_ids row "
            "[-1, -1, -1, 0, 0, 1, 1, 1, 1, 2, 2, 2]; find padding by its doc id -1, not by "
            "position)",
            torch.tensor(
                [[-1, -1, -1, 0, 0, 1, 1, 1, 1, 2, 2, 2], [0, 0, 0, 1, 1, 1, 1, 1, -1, -1, -1, -1]]
            ),
        ),
        ("a batch of one (doc_ids of shape (1, 6))", torch.tensor([[0, 0, 1, 1, 1, -1]])),
        (
            "a row of padding only (doc_ids row [-1] * 6)",
            torch.tensor([[0, 0, 0, 1, 1, -1], [-1] * 6]),
        ),
    )
    for description, doc_ids in edges:
        with at_edge(description):
            worst = max(worst, _check_packed_on(packed_attention_mask, doc_ids))
    passed(
        f"each document in a packed row gets exactly its own attention (max |packed - alone| = "
        f"{worst:.1e}), padding stays finite; left padding, a batch of one and a row of padding "
        "only too."
    )


def _check_packed_on(packed_attention_mask: Callable, doc_ids: Tensor) -> float:
    """check_packed_attention_mask on one batch of doc ids: the mask's shape and entries, then
    the proof (packed attention equals each document's attention alone); the worst difference."""
    b, t = doc_ids.shape
    given = doc_ids.clone()
    got = run_learner_code(packed_attention_mask, given)
    expect_unchanged(doc_ids, given, "doc_ids", getattr(packed_attention_mask, "__name__", "mask"))
    expect(isinstance(got, Tensor), f"return a tensor, got {type(got).__name__}.")
    if got.shape == (b, t, t):
        raise ExerciseError(
            f"shape {tuple(got.shape)}: add the head axis, (B, 1, T, T), so the mask broadcasts "
            "over every head."
        )
    expect(
        got.shape == (b, 1, t, t),
        f"expected shape {(b, 1, t, t)}, got {tuple(got.shape)}"
        + (" (do not .squeeze(): B may be 1)" if got.numel() == b * t * t else "")
        + ".",
    )
    expect(
        got.dtype == torch.bool, f"return a bool keep-mask (True = may attend), got {got.dtype}."
    )
    keep, real = got[:, 0], doc_ids >= 0
    cross = (
        keep & (doc_ids[:, :, None] != doc_ids[:, None, :]) & real[:, :, None] & real[:, None, :]
    )
    if cross.any():
        row, i, j = (int(x) for x in cross.nonzero()[0])
        raise ExerciseError(
            f"row {row}: token {i} (document {int(doc_ids[row, i])}) may attend to token {j} "
            f"(document {int(doc_ids[row, j])}). Packed documents must not see each other."
        )
    to_pad = keep & real[:, :, None] & ~real[:, None, :]
    expect(
        not to_pad.any(),
        "real tokens may attend to padding keys: the keys at doc id -1 must be masked out.",
    )
    missing = ~keep & _reference_packed_mask(doc_ids)[:, 0] & real[:, :, None]
    expect(
        not missing.any(),
        "some tokens may not attend to tokens of their own document (themselves included): "
        "keep every (query, key) pair of the same document.",
    )
    empty = ~keep.any(-1)  # (B, T): query rows with no key at all
    if empty.any():
        row, i = (int(x) for x in empty.nonzero()[0])
        raise ExerciseError(
            f"row {row}: the padding query at position {i} may attend to nothing, so its softmax "
            "is 0/0 = NaN, and NaN spreads through the next layer. Let a padding query attend "
            "to itself (its output is ignored anyway)."
        )
    # The proof: with this mask, a packed row computes exactly what each document alone computes.
    from course_lib.modules.attention import MultiHeadSelfAttention

    torch.manual_seed(0)
    config = BertConfig(hidden_size=16, num_attention_heads=2, attention_probs_dropout_prob=0.0)
    attention = MultiHeadSelfAttention(config).eval()
    x = torch.randn(b, t, 16)
    with torch.no_grad():
        packed, _ = attention(x, got)
        worst = 0.0
        for r in range(b):
            for doc in doc_ids[r].unique().tolist():
                if doc < 0:
                    continue
                cols = (doc_ids[r] == doc).nonzero().flatten()
                alone, _ = attention(x[r : r + 1, cols])
                worst = max(worst, float((alone[0] - packed[r, cols]).abs().max()))
    expect(not bool(packed.isnan().any()), "the attention output contains NaN.")
    expect(worst < 1e-5, f"packed and alone differ by {worst:.1e}; expected < 1e-5.")
    return worst
