"""The architecture figures are BERT's stack with the changed blocks marked, and what they say
agrees with the library's configs; the input-representation figure labels every token."""

from __future__ import annotations

import pytest

from course_lib.config import (
    AlbertConfig,
    BertConfig,
    DebertaConfig,
    DistilBertConfig,
    ElectraConfig,
    ModernBertConfig,
    RobertaConfig,
)
from course_lib.viz.architecture import (
    FAMILIES,
    architecture_figure,
    family_blocks,
    input_representation_figure,
)
from course_lib.viz.params import PARAMETER_FAMILIES


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _note(family: str, label: str) -> str:
    return next(b.note for b in family_blocks(family) if b.label == label)


def test_every_family_of_the_course_has_a_figure():
    assert set(PARAMETER_FAMILIES) <= set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_variant_is_bert_with_some_blocks_changed(family):
    bert, blocks = family_blocks("bert"), family_blocks(family)
    assert len(blocks) == len(bert)  # the same skeleton
    changed = [b for b in blocks if b.changed]
    assert (not changed) if family == "bert" else changed
    for old, new in zip(bert, blocks):  # an unchanged block is BERT's, word for word
        if not new.changed:
            assert new == old
    fig = architecture_figure(family)
    texts = _texts(fig)
    assert all(b.label in texts for b in blocks)
    assert fig._repr_png_()[:4] == b"\x89PNG"


def test_notes_agree_with_the_configs():
    assert BertConfig.from_preset("bert-base").num_attention_heads == 12
    assert _note("bert", "self-attention").startswith("12 heads")
    assert BertConfig().intermediate_size == 4 * BertConfig().hidden_size
    assert "E = 128" in _note("albert", "factorized embedding")
    assert AlbertConfig().embedding_size == 128
    assert RobertaConfig().vocab_size // 1000 == 50 and "50k" in _note("roberta", "byte-level BPE")
    assert DistilBertConfig().num_hidden_layers * 2 == BertConfig().num_hidden_layers
    assert DistilBertConfig().type_vocab_size == 0 and "no segments" in _note(
        "distilbert", "embeddings"
    )
    small = ElectraConfig.presets["electra-small"]
    assert (small["embedding_size"], small["hidden_size"]) == (128, 256)
    modern = ModernBertConfig()
    assert modern.global_attn_every_n_layers == 3 and modern.local_attention == 128
    assert "every 3rd layer" in _note("modernbert", "rotary attention")
    assert "window 128" in _note("modernbert", "rotary attention")
    assert modern.max_position_embeddings == 8192 and "8,192" in _note("modernbert", "BPE tokens")
    assert not DebertaConfig().position_biased_input  # no absolute position at the input
    assert "no absolute position" in _note("deberta", "embeddings")


def test_albert_marks_the_shared_layer_and_distilbert_the_halved_depth():
    assert {b.repeat for b in family_blocks("albert") if b.repeat} == {"one layer, applied L times"}
    assert all("x L/2" in b.repeat for b in family_blocks("distilbert") if b.repeat)


def test_unknown_family_names_the_known_ones():
    with pytest.raises(ValueError, match="no architecture figure for 'gpt'.*albert"):
        architecture_figure("gpt")


def test_input_representation_segments_follow_the_first_sep():
    tokens = ["[CLS]", "my", "dog", "[SEP]", "he", "likes", "[SEP]"]
    texts = _texts(input_representation_figure(tokens))
    segments = [t for t in texts if t in ("E_A", "E_B")]
    assert segments == ["E_A"] * 4 + ["E_B"] * 3
    assert [t for t in texts if t.startswith("E_") and t[2:].isdigit()] == [
        f"E_{i}" for i in range(7)
    ]
    assert all(f"E_{t}" in texts for t in tokens)
    single = _texts(input_representation_figure(["[CLS]", "hi", "[SEP]"]))
    assert [t for t in single if t in ("E_A", "E_B")] == ["E_A"] * 3


def test_input_representation_rejects_bad_input():
    with pytest.raises(ValueError, match="one segment id per token"):
        input_representation_figure(["[CLS]", "a"], [0])
    with pytest.raises(ValueError, match="at least one token"):
        input_representation_figure([])
