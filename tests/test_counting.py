"""count_parameters is analytic; these tests prove it equals the built models' parameter counts."""

import pytest

from course_lib import BertConfig, count_parameters
from course_lib.counting import COMPONENTS
from course_lib.models import BERT_CLASSES as MODEL_CLASSES

SMALL_PRESETS = ["bert-tiny", "bert-mini", "bert-small"]


@pytest.mark.parametrize("preset", SMALL_PRESETS)
@pytest.mark.parametrize("cls_name", sorted(MODEL_CLASSES))
def test_counts_equal_built_models(preset, cls_name):
    config = BertConfig.from_preset(preset, vocab_size=1000, num_labels=5)
    model = MODEL_CLASSES[cls_name](config)
    counted = count_parameters(config, cls_name)
    assert counted["total"] == sum(p.numel() for p in model.parameters())
    assert counted["total"] == sum(counted[c] for c in COMPONENTS)


@pytest.mark.parametrize("pre_ln", [False, True])
def test_counts_with_odd_sizes_and_pre_ln(pre_ln):
    config = BertConfig(
        vocab_size=333,
        hidden_size=60,
        num_attention_heads=5,
        num_hidden_layers=3,
        intermediate_size=70,
        max_position_embeddings=77,
        type_vocab_size=3,
        pre_layer_norm=pre_ln,
    )
    for cls_name, cls in MODEL_CLASSES.items():
        assert count_parameters(config, cls)["total"] == cls(config).num_parameters(), cls_name


def test_published_bert_sizes():
    base = BertConfig.from_preset("bert-base")
    large = BertConfig.from_preset("bert-large")
    # exact transformers counts
    assert count_parameters(base, "BertModel")["total"] == 109_482_240
    assert count_parameters(base, "BertForPreTraining")["total"] == 110_106_428
    # the paper's 110M and 340M are these numbers rounded to two significant figures
    assert round(count_parameters(base)["total"], -7) == 110_000_000
    assert round(count_parameters(large)["total"], -7) == 340_000_000
    assert count_parameters(large)["total"] == 335_141_888


def test_all_presets_count_without_building():
    for name in BertConfig.presets:
        counted = count_parameters(BertConfig.from_preset(name))
        assert counted["total"] > 0
        assert counted["attention"] == BertConfig.from_preset(name).num_hidden_layers * 4 * (
            BertConfig.from_preset(name).hidden_size ** 2 + BertConfig.from_preset(name).hidden_size
        )


def test_unknown_class_name():
    with pytest.raises(ValueError, match="unknown model class"):
        count_parameters(BertConfig.from_preset("bert-tiny"), "BertForCooking")
