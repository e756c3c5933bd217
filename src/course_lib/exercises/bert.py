"""Chapter 01 exercise checkers: masking, attention, the embedding sum, the parameter formula."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course_lib.config import BertConfig
from course_lib.counting import count_parameters
from course_lib.exercises.core import ExerciseError, expect, passed, run_learner_code


def check_masking(mask_tokens: Callable, n_rows: int = 200, seq: int = 512) -> None:
    """`mask_tokens(input_ids, special_tokens_mask, mask_token_id, vocab_size, generator)` must
    return (masked_ids, labels) with 15% of eligible tokens selected, of which 80/10/10."""
    vocab, mask_id, specials = 1000, 4, torch.tensor([0, 1, 2, 3, 4])
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(5, vocab, (n_rows, seq), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    ids[: n_rows // 4, seq // 2 :] = 0  # padding in a quarter of the rows
    special = torch.isin(ids, specials)
    out = run_learner_code(mask_tokens, ids.clone(), special.clone(), mask_id, vocab, torch.Generator().manual_seed(7))
    expect(isinstance(out, tuple) and len(out) == 2, "return a tuple (masked_input_ids, labels).")
    masked, labels = out
    expect(
        masked.shape == ids.shape and labels.shape == ids.shape,
        f"both outputs must have the input's shape {tuple(ids.shape)}; got "
        f"{tuple(masked.shape)} and {tuple(labels.shape)}.",
    )
    selected = labels != -100
    expect(not (selected & special).any(), "special tokens and padding must never be selected.")
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
    to_mask = selected & (masked == mask_id)
    kept = selected & (masked == ids)
    random = selected & ~to_mask & ~kept
    for name, part, p in (("[MASK]", to_mask, 0.8), ("random", random, 0.1), ("kept", kept, 0.1)):
        ok, rate = rate_ok(int(part.sum()), n_sel, p)
        expect(ok, f"{rate:.1%} of selected tokens became {name}; expected {p:.0%}.")
    expect(not torch.isin(masked[random], specials).any(), "random replacements must not be special tokens.")
    passed(f"selected {n_sel / n_eligible:.1%} of {n_eligible:,} eligible tokens; 80/10/10 within tolerance.")


def check_attention(attention: Callable) -> None:
    """`attention(q, k, v, mask=None)` -> (output, probabilities), as softmax(QK^T/sqrt(d) + mask) V."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 5)
    mask[0, ..., 3:] = torch.finfo(torch.float32).min
    out = run_learner_code(attention, q, k, v, mask)
    expect(isinstance(out, tuple) and len(out) == 2, "return a tuple (output, attention_probabilities).")
    got, probs = out
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    ref_probs = (scores + mask).softmax(-1)
    expect(probs.shape == (2, 3, 5, 5), f"probabilities must be [batch, heads, q, k] = (2, 3, 5, 5), got {tuple(probs.shape)}.")
    expect(got.shape == v.shape, f"the output must have v's shape {tuple(v.shape)}, got {tuple(got.shape)}.")
    expect(torch.allclose(probs.sum(-1), torch.ones(2, 3, 5), atol=1e-5), "each row of probabilities must sum to 1: softmax over the LAST dimension (keys).")
    if torch.allclose(probs, (q @ k.transpose(-1, -2) + mask).softmax(-1), atol=1e-5):
        raise ExerciseError("scores are not scaled: divide Q K^T by sqrt(head_dim) before the softmax.")
    if torch.allclose(probs, scores.softmax(-1), atol=1e-5):
        raise ExerciseError("the mask is ignored: add it to the scores before the softmax.")
    expect(torch.allclose(probs, ref_probs, atol=1e-5), "probabilities differ from softmax(Q K^T / sqrt(d) + mask).")
    expect(torch.allclose(got, ref_probs @ v, atol=1e-5), "probabilities are right but the output is not probs @ V.")
    passed("your attention equals softmax(QK^T/sqrt(d) + mask) V, padding included.")


def check_embedding_sum(embed: Callable) -> None:
    """`embed(input_ids, token_type_ids, word, position, segment)` -> word + position + segment
    lookups, [batch, seq, hidden] (before LayerNorm)."""
    g = torch.Generator().manual_seed(3)
    word, position, segment = (torch.randn(n, 6, generator=g) for n in (20, 10, 2))
    ids = torch.randint(0, 10, (2, 7), generator=g)  # < 10 so a position-by-id mix-up runs and is named
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    got = run_learner_code(embed, ids, types, word, position, segment)
    expect(got.shape == (2, 7, 6), f"expected shape [batch, seq, hidden] = (2, 7, 6), got {tuple(got.shape)}.")
    w, p, s = word[ids], position[torch.arange(7)].expand(2, 7, 6), segment[types]
    if torch.allclose(got, w + s, atol=1e-6):
        raise ExerciseError("position embeddings are missing: add position[0..seq-1] to every row.")
    if torch.allclose(got, w + p, atol=1e-6):
        raise ExerciseError("segment embeddings are missing: add segment[token_type_ids].")
    if torch.allclose(got, w + position[ids] + s, atol=1e-6):
        raise ExerciseError("positions are looked up by token id; use 0, 1, ..., seq-1 instead.")
    expect(torch.allclose(got, w + p + s, atol=1e-6), "the result is not word + position + segment.")
    passed("token + position + segment, summed element-wise.")


def check_parameter_formula(bert_parameters: Callable) -> None:
    """`bert_parameters(V, H, L, I, P, T)` -> parameters of BertModel (with pooler), by hand."""
    for dims in ((30522, 768, 12, 3072, 512, 2), (1000, 64, 3, 100, 128, 2), (8000, 256, 4, 1024, 128, 1)):
        V, H, L, I, P, T = dims  # noqa: E741  (the paper's letters)
        config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, intermediate_size=I,
                            max_position_embeddings=P, type_vocab_size=T, num_attention_heads=4)
        ref = count_parameters(config, "BertModel")
        got = run_learner_code(bert_parameters, V, H, L, I, P, T)
        expect(isinstance(got, int), f"return an int, got {type(got).__name__}.")
        diff = got - ref["total"]
        if diff == 0:
            continue
        hints = []
        for name in ("embeddings", "attention", "feed_forward", "layer_norm", "pooler"):
            if abs(diff) == ref[name]:
                hints.append(f"the whole {name} term ({ref[name]:,}) is {'missing' if diff < 0 else 'counted twice'}")
        if abs(diff) == L * 4 * H or abs(diff) == L * (I + H):
            hints.append("check the biases of the per-layer linear maps")
        if abs(diff) % (2 * H) == 0 and abs(diff) // (2 * H) <= 2 * L + 1:
            hints.append(f"{abs(diff) // (2 * H)} LayerNorm(s) of 2H parameters each are off (there are 2L + 1)")
        raise ExerciseError(
            f"for V={V}, H={H}, L={L}, I={I}, P={P}, T={T} you get {got:,}, expected {ref['total']:,} "
            f"(off by {diff:+,}). " + ("; ".join(hints) or "Compare term by term with count_parameters(config).")
        )
    passed("your formula matches count_parameters for three configurations, including bert-base (109,482,240).")
