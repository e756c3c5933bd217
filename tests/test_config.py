"""Every invalid config value fails on creation with a message naming field, value and fix."""

import pytest

from course_lib import BertConfig


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("hidden_size", 0, "positive integer"),
        ("vocab_size", -5, "positive integer"),
        ("num_hidden_layers", 2.5, "positive integer"),
        ("intermediate_size", 0, "positive integer"),
        ("max_position_embeddings", 0, "positive integer"),
        ("hidden_dropout_prob", 1.0, r"\[0, 1\)"),
        ("attention_probs_dropout_prob", -0.1, r"\[0, 1\)"),
        ("hidden_act", "swish2", "one of"),
        ("layer_norm_eps", 0.0, "> 0"),
        ("type_vocab_size", -1, ">= 0"),
        ("pad_token_id", 30522, "vocab_size"),
    ],
)
def test_invalid_values_name_the_field(field, value, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        BertConfig(**{field: value})
    assert field in str(err.value) and repr(value) in str(err.value)


def test_heads_must_divide_hidden():
    with pytest.raises(ValueError, match="not divisible") as err:
        BertConfig(hidden_size=100, num_attention_heads=3)
    assert "hidden_size=100" in str(err.value) and "[1, 2, 4, 5" in str(err.value)


def test_presets_have_published_sizes():
    expected = {
        "bert-tiny": (2, 128),
        "bert-mini": (4, 256),
        "bert-small": (4, 512),
        "bert-medium": (8, 512),
        "bert-base": (12, 768),
        "bert-large": (24, 1024),
    }
    for name, (layers, hidden) in expected.items():
        c = BertConfig.from_preset(name)
        assert (c.num_hidden_layers, c.hidden_size) == (layers, hidden)
        assert c.num_attention_heads == hidden // 64 and c.intermediate_size == 4 * hidden
    assert BertConfig.from_preset("bert-tiny", vocab_size=8000).vocab_size == 8000
    with pytest.raises(ValueError, match="unknown preset"):
        BertConfig.from_preset("bert-huge")


def test_dict_round_trip_and_wrong_family():
    c = BertConfig.from_preset("bert-mini", vocab_size=999)
    assert BertConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="model_type='albert'"):
        BertConfig.from_dict({**c.to_dict(), "model_type": "albert"})
    with pytest.raises(ValueError, match="unknown config fields"):
        BertConfig.from_dict({**c.to_dict(), "hiden_size": 3})
    with pytest.raises(ValueError, match="hidden_size"):
        c.replace(hidden_size=-1)
