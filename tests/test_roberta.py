"""RoBERTa: fairseq position ids, parity with transformers' RoBERTa, exact parameter counts.

Random-init transformers models from small configs (never downloaded), padded batches with
pad_token_id=1 and odd lengths; every output within 1e-5; state dicts round-trip exactly.
"""

import pytest
import torch
import transformers
from parity import (
    assert_losses_equal,
    assert_outputs_equal,
    assert_state_dicts_equal,
    perturb_biases_and_norms,
)

import course_lib.interop.roberta  # noqa: F401  (registers the RoBERTa conversions)
from course_lib.counting import COMPONENTS, count_parameters
from course_lib.interop.core import from_transformers, to_transformers
from course_lib.models import roberta as rob
from course_lib.models.roberta import (
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaModel,
    create_position_ids_from_input_ids,
)

CLASSES = [
    "RobertaModel",
    "RobertaForMaskedLM",
    "RobertaForSequenceClassification",
    "RobertaForTokenClassification",
    "RobertaForQuestionAnswering",
]
CONFIGS = {
    # name: (hidden, heads, layers, intermediate, activation); relu also checks that the LM
    # head keeps exact GELU whatever hidden_act is
    "h48-heads4-relu": (48, 4, 2, 37, "relu"),
    "h40-heads5-gelu_new": (40, 5, 1, 64, "gelu_new"),
}
VOCAB, PAD, MAX_POS, SEQ = 211, 1, 20, 13
TOL = 1e-5


def hf_model(cls_name: str, dims, num_labels: int = 3):
    hidden, heads, layers, inter, act = dims
    config = transformers.RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        intermediate_size=inter,
        hidden_act=act,
        max_position_embeddings=MAX_POS,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=PAD,
        num_labels=2 if cls_name.endswith("QuestionAnswering") else num_labels,
        attn_implementation="eager",
    )
    torch.manual_seed(len(cls_name))
    return perturb_biases_and_norms(getattr(transformers, cls_name)(config).eval())


def padded_batch(seq: int = SEQ):
    """Three rows of different real lengths (13, 9, 4) padded with <pad>=1."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, VOCAB, (3, seq), generator=g)
    ids[:, 0] = 0  # <s>
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = PAD
    return dict(input_ids=ids, attention_mask=mask)


# --- position ids ------------------------------------------------------------------------------


def test_position_ids_start_after_padding_index():
    ids = torch.tensor([[0, 31, 32, 2, 1, 1], [0, 40, 2, 1, 1, 1], [0, 5, 6, 7, 8, 2]])
    expected = torch.tensor([[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1], [2, 3, 4, 5, 6, 7]])
    assert torch.equal(create_position_ids_from_input_ids(ids, padding_idx=1), expected)
    reference = transformers.models.roberta.modeling_roberta.RobertaEmbeddings
    assert torch.equal(reference.create_position_ids_from_input_ids(ids, 1), expected)


def test_pad_row_of_position_table_is_zero_and_gets_no_gradient():
    model = RobertaModel(
        RobertaConfig(
            vocab_size=50,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=1,
            intermediate_size=32,
            max_position_embeddings=MAX_POS,
        )
    )
    table = model.embeddings.position_embeddings.weight
    assert torch.count_nonzero(table[PAD]) == 0 and torch.count_nonzero(table[PAD + 1]) > 0
    ids = torch.tensor([[0, 7, 8, 2, 1, 1]])
    out = model(ids, attention_mask=(ids != PAD).long()).last_hidden_state
    # Not out.sum(): the sum of a LayerNorm's output (gamma 1, beta 0) is constant, so its
    # gradient is zero up to rounding and the test would pass or fail by rounding noise.
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
    (out * weights).sum().backward()
    assert torch.count_nonzero(table.grad[PAD]) == 0
    assert torch.count_nonzero(table.grad[2:6]) > 0 and torch.count_nonzero(table.grad[6:]) == 0


def test_too_long_sequence_names_the_offset():
    config = RobertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=32,
        max_position_embeddings=MAX_POS,
    )
    model = RobertaModel(config)
    model(torch.full((1, MAX_POS - 2), 5))  # 18 tokens use positions 2..19: fits exactly
    with pytest.raises(ValueError, match="allows 18 tokens"):
        model(torch.full((1, MAX_POS - 1), 5))


def test_single_segment_type():
    model = RobertaModel(
        RobertaConfig(
            vocab_size=50,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=1,
            intermediate_size=32,
            max_position_embeddings=MAX_POS,
        )
    )
    assert model.embeddings.token_type_embeddings.num_embeddings == 1
    with pytest.raises(ValueError, match="type_vocab_size=1"):
        model(torch.full((1, 4), 5), token_type_ids=torch.tensor([[0, 0, 1, 1]]))


# --- config ------------------------------------------------------------------------------------


def test_config_defaults_presets_and_validation():
    base = RobertaConfig.from_preset("roberta-base")
    assert (base.vocab_size, base.max_position_embeddings, base.type_vocab_size) == (50265, 514, 1)
    assert (base.layer_norm_eps, base.pad_token_id, base.num_attention_heads) == (1e-5, 1, 12)
    large = RobertaConfig.from_preset("roberta-large")
    assert (large.num_hidden_layers, large.hidden_size, large.intermediate_size) == (24, 1024, 4096)
    assert RobertaConfig.from_dict(base.to_dict()) == base
    with pytest.raises(ValueError, match="model_type='roberta'"):
        from course_lib.config import BertConfig

        BertConfig.from_dict(base.to_dict())
    with pytest.raises(ValueError, match="max_position_embeddings=2 is invalid"):
        RobertaConfig(max_position_embeddings=2)
    with pytest.raises(ValueError, match="classifier_dropout=1.5 is invalid"):
        RobertaConfig(classifier_dropout=1.5)
    with pytest.raises(ValueError, match="needs a RobertaConfig"):
        RobertaForMaskedLM(BertConfig.from_preset("bert-tiny"))


# --- parity with transformers --------------------------------------------------------------------


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, config_name):
    hf = hf_model(cls_name, CONFIGS[config_name])
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name and isinstance(ours.config, RobertaConfig)
    assert_outputs_equal(ours, hf, padded_batch(), CONFIGS[config_name][2], TOL)


@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name):
    hf = hf_model(cls_name, CONFIGS["h48-heads4-relu"])
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    assert back.config.pad_token_id == PAD and back.config.layer_norm_eps == 1e-5
    assert_state_dicts_equal(hf.state_dict(), back.state_dict())


@pytest.mark.parametrize(
    "cls_name, kwargs",
    [
        ("RobertaForMaskedLM", {"labels": "mlm"}),
        ("RobertaForSequenceClassification", {"labels": torch.tensor([0, 2, 1])}),
        ("RobertaForTokenClassification", {"labels": torch.randint(0, 3, (3, SEQ))}),
        (
            "RobertaForQuestionAnswering",
            {
                "start_positions": torch.tensor([1, 3, 20]),
                "end_positions": torch.tensor([2, 5, 20]),
            },
        ),
    ],
)
def test_losses_equal_transformers(cls_name, kwargs):
    hf = hf_model(cls_name, CONFIGS["h48-heads4-relu"])
    ours = from_transformers(hf)
    assert_losses_equal(ours, hf, padded_batch(), kwargs, TOL)


def test_mlm_decoder_is_tied_after_conversion():
    ours = from_transformers(hf_model("RobertaForMaskedLM", CONFIGS["h48-heads4-relu"]))
    assert ours.mlm_head.decoder.weight is ours.backbone.embeddings.word_embeddings.weight


# --- parameter counts ----------------------------------------------------------------------------


@pytest.mark.parametrize("cls_name", CLASSES)
def test_counts_equal_built_models(cls_name):
    config = RobertaConfig(
        vocab_size=333,
        hidden_size=60,
        num_attention_heads=5,
        num_hidden_layers=3,
        intermediate_size=70,
        max_position_embeddings=77,
        num_labels=5,
    )
    counted = count_parameters(config, cls_name)
    assert counted["total"] == getattr(rob, cls_name)(config).num_parameters()
    assert counted["total"] == sum(counted[c] for c in COMPONENTS)


def test_published_roberta_sizes():
    # exact transformers counts (RobertaModel includes the pooler, as transformers builds it)
    base, large = (
        RobertaConfig.from_preset("roberta-base"),
        RobertaConfig.from_preset("roberta-large"),
    )
    assert count_parameters(base, "RobertaModel")["total"] == 124_645_632
    assert count_parameters(base, "RobertaForMaskedLM")["total"] == 124_697_433
    assert count_parameters(base, "RobertaForSequenceClassification")["total"] == 124_647_170
    assert count_parameters(large, "RobertaModel")["total"] == 355_359_744
    # the embedding table grows from BERT's 30522 to 50265 byte-level BPE tokens
    assert count_parameters(base)["embeddings"] == (50265 + 514 + 1) * 768
    with pytest.raises(ValueError, match="no ForPreTraining"):
        count_parameters(base, "RobertaForPreTraining")


def test_task_heads_are_chosen_by_class_and_read_their_own_first_token():
    """No pooler: pooler_output stays None and the classification head reads <s> itself; the
    LM head is exact GELU under any hidden_act; token dropout is classifier_dropout."""
    config = RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=24,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=30,
        hidden_act="relu",
        max_position_embeddings=MAX_POS,
        classifier_dropout=0.3,
        num_labels=4,
    )
    classifier = rob.RobertaForSequenceClassification(config).eval()
    batch = padded_batch()
    with torch.no_grad():
        out = classifier(**batch)
        by_hand = classifier.classifier(classifier.backbone(**batch).last_hidden_state)
    assert classifier.backbone.pooler is None and out.pooler_output is None
    assert out.logits.shape == (3, 4) and torch.equal(out.logits, by_hand)
    assert RobertaForMaskedLM(config).mlm_head.act is torch.nn.functional.gelu
    assert rob.RobertaForTokenClassification(config).classifier.dropout.p == 0.3
