"""The parts: attention paths agree, the layer is post-LN, bad inputs fail clearly."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import BertConfig, BertForMaskedLM, BertModel
from course_lib.modules import EncoderLayer, MultiHeadSelfAttention, scaled_dot_product_attention
from course_lib.modules.attention import additive_mask

TINY = BertConfig(
    vocab_size=50,
    hidden_size=24,
    num_attention_heads=3,
    num_hidden_layers=2,
    intermediate_size=40,
    max_position_embeddings=16,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def test_explicit_attention_matches_sdpa_and_formula():
    q, k, v = torch.randn(3, 2, 4, 5, 8).unbind(0)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()[:, None, None, :]
    out, probs = scaled_dot_product_attention(q, k, v, additive_mask(keep, q.dtype))
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=additive_mask(keep, q.dtype))
    assert torch.allclose(out, fused, atol=1e-6)
    assert torch.allclose(probs.sum(-1), torch.ones(2, 4, 5))
    assert probs[0, :, :, 3:].abs().max() == 0  # padded keys get exactly zero weight
    manual = torch.softmax(q[1] @ k[1].transpose(-1, -2) / math.sqrt(8), -1) @ v[1]
    assert torch.allclose(out[1], manual, atol=1e-6)


def test_attention_module_paths_agree():
    attn = MultiHeadSelfAttention(TINY).eval()
    x = torch.randn(2, 7, 24)
    keep = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[1, ..., 5:] = False
    fast, none = attn(x, keep, output_attentions=False)
    slow, probs = attn(x, keep, output_attentions=True)
    assert none is None and probs.shape == (2, 3, 7, 7)
    assert torch.allclose(fast, slow, atol=1e-6)


def test_post_ln_layer_output_is_normalised():
    layer = EncoderLayer(TINY).eval()
    out, _ = layer(torch.randn(2, 5, 24) * 10)
    # post-LN: the last op is a LayerNorm with unit scale, so every vector has mean 0, std 1
    assert torch.allclose(out.mean(-1), torch.zeros(2, 5), atol=1e-5)
    assert torch.allclose(out.std(-1, unbiased=False), torch.ones(2, 5), atol=1e-3)


def test_outputs_shapes_and_padding_invariance():
    model = BertModel(TINY).eval()
    ids = torch.randint(1, 50, (1, 6))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(1, 6), torch.zeros(1, 4)], 1).long()
    a = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    b = model(input_ids=padded, attention_mask=mask)
    assert a.last_hidden_state.shape == (1, 6, 24) and a.pooler_output.shape == (1, 24)
    assert len(a.attentions) == 2 and a.attentions[0].shape == (1, 3, 6, 6)
    assert len(a.hidden_states) == 3
    # padding must not change what real tokens see
    assert torch.allclose(a.last_hidden_state, b.last_hidden_state[:, :6], atol=1e-5)


def test_mlm_logits_without_labels_are_full():
    model = BertForMaskedLM(TINY).eval()
    out = model(input_ids=torch.randint(0, 50, (2, 5)))
    assert out.mlm_logits.shape == (2, 5, 50) and out.loss is None


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"input_ids": torch.randint(0, 50, (5,))}, "unsqueeze"),
        ({"input_ids": torch.randint(0, 50, (1, 17))}, "max_position_embeddings=16"),
        ({"input_ids": torch.full((1, 4), 50)}, "outside the vocabulary"),
        ({"input_ids": torch.rand(1, 4)}, "integer token ids"),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "attention_mask": torch.ones(2, 5)},
            "attention_mask has shape",
        ),
        (
            {
                "input_ids": torch.ones(2, 4, dtype=torch.long),
                "token_type_ids": torch.full((2, 4), 2),
            },
            "type_vocab_size=2",
        ),
    ],
)
def test_bad_inputs_fail_before_computation(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        BertModel(TINY)(**kwargs)


def test_mlm_labels_shape_checked():
    model = BertForMaskedLM(TINY)
    with pytest.raises(ValueError, match="labels has shape"):
        model(
            input_ids=torch.ones(2, 4, dtype=torch.long), labels=torch.ones(2, 3, dtype=torch.long)
        )


def test_bf16_autocast_runs_with_padding():
    model = BertForMaskedLM(TINY)
    ids = torch.randint(1, 50, (2, 6))
    mask = torch.ones_like(ids)
    mask[0, 3:] = 0
    labels = torch.where(torch.rand(2, 6) < 0.5, ids, torch.full_like(ids, -100))
    labels[1, 0] = ids[1, 0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.isfinite(out.loss)


def test_task_targets_are_named_per_task():
    """One forward for every task model; each task names its own targets and refuses others."""
    from course_lib.models import BertForQuestionAnswering, BertForTokenClassification

    torch.manual_seed(0)
    ids = torch.randint(5, 50, (2, 6))
    qa = BertForQuestionAnswering(TINY)
    out = qa(ids, start_positions=torch.tensor([1, 2]), end_positions=torch.tensor([3, 9]))
    assert out.start_logits.shape == (2, 6) and out.loss is not None
    with pytest.raises(ValueError, match="start_positions and end_positions, not labels"):
        qa(ids, labels=torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="next_sentence_label"):
        BertForTokenClassification(TINY)(ids, next_sentence_label=torch.tensor([0, 1]))
