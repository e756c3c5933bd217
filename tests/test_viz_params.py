"""Parameter-count explorer: family table, widget callbacks and the stacked-bar breakdown."""

from __future__ import annotations

import base64
import dataclasses
import types

import pytest

from course_lib import BertConfig
from course_lib.counting import count_parameters
from course_lib.viz import params
from course_lib.viz.params import (
    CUSTOM,
    PARAMETER_FAMILIES,
    format_count,
    parameter_explorer,
    plot_parameter_breakdown,
)


def hand_count(config: BertConfig, model_class: str = "BertModel") -> dict[str, int]:
    """BERT counted by hand, independently of course_lib.counting (no heads)."""
    h, i, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    counts = {
        "embeddings": (config.vocab_size + config.max_position_embeddings + config.type_vocab_size)
        * h,
        "attention": n * 4 * (h * h + h),
        "feed_forward": n * (2 * h * i + i + h),
        "layer_norm": 2 * h * (2 * n + 1),
        "pooler": h * h + h,
        "heads": 0 if model_class == "BertModel" else 2 * h + 2,  # pretend: an NSP head only
    }
    counts["total"] = sum(counts.values())
    return counts


@pytest.fixture
def families(monkeypatch):
    """The explorer with BERT counted by `hand_count` (calls recorded), other families as usual."""
    calls: list[tuple[BertConfig, str]] = []

    def counting(config, model_class):
        if type(config) is not BertConfig:
            return count_parameters(config, model_class=model_class)
        calls.append((config, model_class))
        return hand_count(config, model_class)

    monkeypatch.setattr(params, "count_parameters", counting)
    return calls


def test_family_table_lists_bert_with_its_size_fields():
    bert = PARAMETER_FAMILIES["bert"]
    assert bert.config_class is BertConfig
    assert bert.model_classes == (
        "BertModel",
        "BertForPreTraining",
        "BertForMaskedLM",
        "BertForSequenceClassification",
        "BertForTokenClassification",
        "BertForQuestionAnswering",
    )
    assert "DistilBertForPreTraining" not in PARAMETER_FAMILIES["distilbert"].model_classes
    assert bert.fields[:4] == (
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
    )
    assert "pre_layer_norm" in bert.fields  # bool fields come along (they can change the count)
    assert "hidden_dropout_prob" not in bert.fields
    assert set(bert.presets) == set(BertConfig.presets)


def test_widget_shows_the_counts_of_the_preset(families):
    widget = parameter_explorer("bert", preset="bert-mini")
    config = BertConfig.from_preset("bert-mini")
    assert widget.preset_select.value == "bert-mini"
    assert (
        widget.fields["hidden_size"].value == 256 and widget.fields["num_hidden_layers"].value == 4
    )
    assert widget.counts == hand_count(config)
    assert families[-1] == (config, "BertModel")
    assert f"{hand_count(config)['total']:,}" in widget.table.value
    assert widget.image.value[:4] == b"\x89PNG"
    assert list(widget.family_select.options) == list(PARAMETER_FAMILIES)


def test_field_change_recounts_and_leaves_the_preset(families):
    widget = parameter_explorer("bert", preset="bert-tiny")
    before = widget.image.value
    widget.fields["num_hidden_layers"].value = 6
    assert widget.preset_select.value == CUSTOM
    assert widget.config.num_hidden_layers == 6
    assert widget.counts == hand_count(BertConfig.from_preset("bert-tiny", num_hidden_layers=6))
    assert widget.image.value != before
    # Editing the fields back to a preset's values selects that preset again.
    widget.fields["num_hidden_layers"].value = 2
    assert widget.preset_select.value == "bert-tiny"


def test_preset_change_sets_every_field_and_counts_once(families):
    widget = parameter_explorer("bert", preset="bert-tiny")
    n_calls = len(families)
    widget.preset_select.value = "bert-base"
    assert len(families) == n_calls + 1  # one recount, not one per field
    assert widget.values()["hidden_size"] == 768 and widget.values()["num_attention_heads"] == 12
    assert widget.counts["total"] == hand_count(BertConfig.from_preset("bert-base"))["total"]


def test_invalid_config_shows_the_error_and_keeps_the_last_counts(families):
    widget = parameter_explorer("bert", preset="bert-tiny")
    counts, image = widget.counts, widget.image.value
    widget.fields["num_attention_heads"].value = 3
    assert "not divisible by num_attention_heads=3" in widget.status.value
    assert widget.counts == counts and widget.image.value == image
    widget.fields["num_attention_heads"].value = 4
    assert widget.status.value == ""
    assert widget.config.num_attention_heads == 4


def test_model_class_is_passed_to_the_counter(families):
    widget = parameter_explorer("bert", preset="bert-tiny")
    widget.model_class_select.value = "BertForPreTraining"
    assert families[-1][1] == "BertForPreTraining"
    assert widget.counts["heads"] == 2 * 128 + 2
    with pytest.raises(ValueError, match="unknown model class 'GPT2Model'"):
        parameter_explorer("bert", model_class="GPT2Model")
    with pytest.raises(ValueError, match="unknown preset 'bert-huge'"):
        parameter_explorer("bert", preset="bert-huge")
    with pytest.raises(ValueError, match="unknown family 'gpt'; choose from"):
        parameter_explorer("gpt")


def test_switching_family_rebuilds_the_fields(families):
    widget = parameter_explorer("bert", preset="bert-tiny")
    assert "sharing" not in widget.fields
    widget.family_select.value = "albert"
    assert list(widget.fields)[:4] == [
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
    ]
    assert type(widget.fields["sharing"]).__name__ == "Dropdown"  # from `choices`
    assert widget.model_class_select.value == "AlbertModel"
    assert widget.preset_select.value in PARAMETER_FAMILIES["albert"].presets
    widget.fields["sharing"].value = "none"
    assert widget.counts == count_parameters(widget.config, model_class="AlbertModel")
    widget.family_select.value = "bert"
    assert "sharing" not in widget.fields and widget.model_class_select.value == "BertModel"


def test_every_family_entry_names_real_fields_and_classes():
    for name, family in PARAMETER_FAMILIES.items():
        names = {f.name for f in dataclasses.fields(family.config_class)}
        assert set(family.fields) <= names, name
        assert set(family.choices) | set(family.sliders) <= set(family.fields), name
        for low, high, step in family.sliders.values():
            assert low < high and step > 0 and (high - low) % step == 0, name
        assert family.model_classes[0].endswith("Model") and len(family.model_classes) >= 2, name


def test_displayed_chart_is_a_png_output_that_follows_the_controls(families, monkeypatch):
    import IPython.display

    outputs, updates = [], []

    def fake_display(obj, raw=False, display_id=None):
        outputs.append(obj)
        return (
            types.SimpleNamespace(update=lambda data, raw: updates.append(data))
            if display_id
            else None
        )

    monkeypatch.setattr(IPython.display, "display", fake_display)
    widget = parameter_explorer(preset="bert-tiny")
    widget._ipython_display_()
    controls, chart = outputs
    assert "application/vnd.jupyter.widget-view+json" in controls and "image/png" not in controls
    assert base64.b64decode(chart["image/png"]) == widget.image.value
    widget.preset_select.value = "bert-base"
    assert (
        base64.b64decode(updates[-1]["image/png"])
        == widget.image.value
        != base64.b64decode(chart["image/png"])
    )
    assert updates[-1]["text/plain"] == f"{widget.counts['total']:,} parameters"


def test_breakdown_bars_are_the_counts():
    tiny, base = (hand_count(BertConfig.from_preset(n)) for n in ("bert-tiny", "bert-base"))
    fig = plot_parameter_breakdown({"tiny": tiny, "base": base})
    ax = fig.axes[0]
    components = ["embeddings", "attention", "feed_forward", "layer_norm", "pooler", "heads"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        c.replace("_", " ") for c in components
    ]
    bars = ax.patches
    assert len(bars) == 2 * len(components)
    # Bars go component by component, one per model; widths are the counts, stacked left to right.
    for k, component in enumerate(components):
        for m, counts in enumerate((tiny, base)):
            bar = bars[2 * k + m]
            assert bar.get_width() == counts[component]
            assert bar.get_x() == sum(counts[c] for c in components[:k])
    labels = [t.get_text().strip() for t in ax.texts]
    assert labels == [
        f"{format_count(tiny['total'])} ({tiny['total']:,})",
        f"{format_count(base['total'])} ({base['total']:,})",
    ]


def test_normalised_breakdown_adds_up_to_100():
    fig = plot_parameter_breakdown(
        {"tiny": hand_count(BertConfig.from_preset("bert-tiny"))}, normalize=True
    )
    ax = fig.axes[0]
    assert sum(bar.get_width() for bar in ax.patches) == pytest.approx(100.0)
    assert ax.get_xlabel() == "share of parameters (%)"


def test_breakdown_rejects_inconsistent_counts():
    with pytest.raises(ValueError, match="add up to 30 but total is 31"):
        plot_parameter_breakdown({"m": {"embeddings": 10, "attention": 20, "total": 31}})
    with pytest.raises(ValueError, match="need a 'total' key"):
        plot_parameter_breakdown({"m": {"embeddings": 10}})
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_parameter_breakdown({})


def test_format_count():
    assert [format_count(n) for n in (999, 4386, 110_106_428, 1.2e9)] == [
        "999",
        "4.4K",
        "110.1M",
        "1.2B",
    ]


def test_default_counter_is_course_lib_count_parameters():
    config = BertConfig.from_preset("bert-tiny")
    widget = parameter_explorer("bert", preset="bert-tiny", model_class="BertForMaskedLM")
    assert widget.counts == count_parameters(config, model_class="BertForMaskedLM")
    hand = hand_count(config)  # BertModel by hand; the MLM model has no pooler
    assert widget.counts["total"] - widget.counts["heads"] == hand["total"] - hand["pooler"]


def test_every_course_family_is_registered_and_counts_exactly():
    assert list(PARAMETER_FAMILIES)[:5] == ["bert", "roberta", "albert", "deberta", "distilbert"]
    widget = parameter_explorer("bert")
    for name in ("roberta", "albert", "deberta", "distilbert"):
        family = PARAMETER_FAMILIES[name]
        widget.family_select.value = name
        preset = widget.preset_select.value
        assert preset in family.presets, name
        for model_class in (family.model_classes[-1], family.model_classes[0]):  # a task, the base
            widget.model_class_select.value = model_class
            assert widget.status.value == "", (name, model_class, widget.status.value)
            want = count_parameters(family.config_from_preset(preset), model_class)
            assert widget.counts == want, (name, model_class)


def test_albert_sharing_and_deberta_negative_fields():
    widget = parameter_explorer("albert", preset="albert-base")
    shared = widget.counts["total"]
    assert widget.fields["sharing"].options == ("all", "attention", "ffn", "none")
    widget.fields["sharing"].value = "none"
    assert widget.config.sharing == "none" and widget.counts["total"] > shared
    widget = parameter_explorer("deberta", preset="deberta-v3-base")
    # -1 means "max_position_embeddings"; the field must not clamp it to a positive bound.
    assert widget.fields["max_relative_positions"].value == -1
    assert widget.config.max_relative_positions == -1
    assert widget.fields["norm_rel_ebd"].options == ("layer_norm", "none")


def test_albert_embedding_size_is_a_slider_that_recounts_exactly():
    from course_lib.models.albert import AlbertConfig

    widget = parameter_explorer("albert", preset="albert-base")
    slider = widget.fields["embedding_size"]
    assert type(slider).__name__ == "IntSlider" and slider.value == 128
    assert (slider.min, slider.max, slider.step) == (16, 1024, 16)
    for e in (64, 768):  # two of Table 3's settings
        slider.value = e
        expected = count_parameters(
            AlbertConfig.from_preset("albert-base", embedding_size=e),
            model_class=widget.model_class_select.value,
        )
        assert widget.config.embedding_size == e and widget.counts == expected
    assert widget.preset_select.value == CUSTOM
    widget.preset_select.value = "albert-large"  # a preset puts E back on the slider
    assert slider.value == 128


def test_electra_and_modernbert_count_exactly_in_the_explorer():
    """Chapter 05's families: every preset and class equals count_parameters, and a small config
    set through the fields equals the parameters of the model built from it (tied weights once)."""
    from course_lib.models import MODEL_CLASSES

    widget = parameter_explorer("electra")
    assert PARAMETER_FAMILIES["electra"].model_classes == (
        "ElectraModel",
        "ElectraForPreTraining",
        "ElectraForMaskedLM",
    )
    assert PARAMETER_FAMILIES["modernbert"].model_classes == (
        "ModernBertModel",
        "ModernBertForMaskedLM",
    )
    small = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=48)
    for name in ("electra", "modernbert"):
        family = PARAMETER_FAMILIES[name]
        widget.family_select.value = name
        for preset in family.presets:
            widget.preset_select.value = preset
            for model_class in family.model_classes:
                widget.model_class_select.value = model_class
                assert widget.status.value == "", (name, preset, model_class, widget.status.value)
                want = count_parameters(family.config_from_preset(preset), model_class)
                assert widget.counts == want, (name, preset, model_class)
        extra = {"vocab_size": 100, "embedding_size": 16} if name == "electra" else {}
        for field_name, value in {**small, **extra}.items():
            widget.fields[field_name].value = value
        assert widget.preset_select.value == CUSTOM and widget.status.value == ""
        model = MODEL_CLASSES[widget.model_class_select.value](widget.config)
        assert widget.counts["total"] == sum(p.numel() for p in model.parameters()), name


def test_explorer_counts_follow_electra_e_and_modernbert_biases():
    widget = parameter_explorer("electra", preset="electra-small")
    slider = widget.fields["embedding_size"]
    assert type(slider).__name__ == "IntSlider" and slider.value == 128
    tables = 30522 + 512 + 2  # V + P + T rows, E wide
    assert widget.counts["embeddings"] == tables * 128 + 128 * 256 + 256  # + E -> H projection
    slider.value = 256  # E = H: the projection goes
    assert widget.counts == count_parameters(widget.config, widget.model_class_select.value)
    assert widget.counts["embeddings"] == tables * 256
    widget = parameter_explorer(
        "modernbert", preset="modernbert-base", model_class="ModernBertModel"
    )
    assert widget.counts["total"] == 149_014_272  # ModernBERT-base's published size (HF config)
    assert "local_attention" not in widget.fields and "unpad" not in widget.fields
    widget.fields["attention_bias"].value = True  # Wqkv (3H) + Wo (H) per layer
    assert widget.counts["total"] == 149_014_272 + 22 * 4 * 768
