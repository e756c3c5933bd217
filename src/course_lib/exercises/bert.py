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
    config_from_letters,
    expect,
    expect_ignore_index_in_labels_only,
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
    mask_tokens: Callable, ids: Tensor, special: Tensor, seed: int
) -> tuple[Tensor, Tensor]:
    out = run_learner_code(
        mask_tokens,
        ids.clone(),
        special.clone(),
        _MASK_ID,
        _VOCAB,
        torch.Generator().manual_seed(seed),
    )
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
    passed(
        f"selected {n_sel / n_eligible:.1%} of {n_eligible:,} eligible tokens; 80/10/10 within "
        "tolerance; the same seed repeats, another seed differs."
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
    passed("your attention equals softmax(QK^T/sqrt(d) + mask) V, padding included.")


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
    passed("token + position + segment, summed element-wise.")


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
