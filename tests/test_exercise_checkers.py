"""The chapter 01 checkers accept correct answers and reject typical mistakes with specific feedback."""

import math

import pytest
import torch

from course_lib import BertConfig, count_parameters
from course_lib.exercises import ExerciseError
from course_lib.exercises.bert import (
    check_attention,
    check_embedding_sum,
    check_masking,
    check_parameter_formula,
)


def good_masking(ids, special, mask_id, vocab, g, p=0.15, p_mask=0.8):
    selected = (torch.rand(ids.shape, generator=g) < p) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=g)
    out = ids.clone()
    out[selected & (roll < p_mask)] = mask_id
    rnd = selected & (roll >= p_mask) & (roll < p_mask + 0.1)
    out[rnd] = torch.randint(5, vocab, (int(rnd.sum()),), generator=g)
    return out, labels


def test_masking_checker():
    check_masking(good_masking)
    with pytest.raises(ExerciseError, match="expected 15%"):
        check_masking(lambda *a: good_masking(*a, p=0.2))
    with pytest.raises(ExerciseError, match=r"became \[MASK\]; expected 80%"):
        check_masking(lambda *a: good_masking(*a, p_mask=0.9))

    def selects_specials(ids, special, mask_id, vocab, g):
        return good_masking(ids, torch.zeros_like(special), mask_id, vocab, g)

    with pytest.raises(ExerciseError, match="never be selected"):
        check_masking(selects_specials)


def good_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    probs = (scores + (mask if mask is not None else 0)).softmax(-1)
    return probs @ v, probs


def test_attention_checker():
    check_attention(good_attention)

    def unscaled(q, k, v, mask=None):
        probs = (q @ k.transpose(-1, -2) + mask).softmax(-1)
        return probs @ v, probs

    def wrong_axis(q, k, v, mask=None):
        probs = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask).softmax(-2)
        return probs @ v, probs

    with pytest.raises(ExerciseError, match="not scaled"):
        check_attention(unscaled)
    with pytest.raises(ExerciseError, match="LAST dimension"):
        check_attention(wrong_axis)
    with pytest.raises(ExerciseError, match="mask is ignored"):
        check_attention(lambda q, k, v, mask=None: good_attention(q, k, v))


def test_embedding_checker():
    def good(ids, types, word, position, segment):
        return word[ids] + position[torch.arange(ids.shape[1])] + segment[types]

    check_embedding_sum(good)
    with pytest.raises(ExerciseError, match="position embeddings are missing"):
        check_embedding_sum(lambda ids, types, w, p, s: w[ids] + s[types])
    with pytest.raises(ExerciseError, match="looked up by token id"):
        check_embedding_sum(lambda ids, types, w, p, s: w[ids] + p[ids] + s[types])
    with pytest.raises(ExerciseError, match="shape"):
        check_embedding_sum(lambda ids, types, w, p, s: w[ids].sum(-1))


def test_parameter_formula_checker():
    def good(V, H, L, I, P, T):  # noqa: E741
        return (V + P + T) * H + 2 * H + L * (4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H) + H * H + H

    check_parameter_formula(good)
    assert good(30522, 768, 12, 3072, 512, 2) == count_parameters(BertConfig())["total"]
    with pytest.raises(ExerciseError, match="pooler term"):
        check_parameter_formula(lambda *d: good(*d) - d[1] * d[1] - d[1])
    with pytest.raises(ExerciseError, match="LayerNorm"):
        check_parameter_formula(lambda *d: good(*d) - 2 * d[1])


def test_stubs_are_rejected_with_a_friendly_message():
    def stub(*args):
        raise NotImplementedError()

    for checker in (check_masking, check_attention, check_embedding_sum, check_parameter_formula):
        with pytest.raises(ExerciseError, match="not implemented yet"):
            checker(stub)
