"""ELECTRA: parity with transformers (weight for weight), exact round trips, exact counts.

Random-init transformers models are built from small configs (never downloaded), converted,
and compared on padded batches of odd length with two segments; then converted back, state
dicts equal. Counts: the formulas equal the built models, and the published sizes.
"""

import pytest
import torch
import transformers
from parity import max_diff, padded_batch

from course_lib.config.electra import ElectraConfig, generator_config
from course_lib.counting import COMPONENTS, count_parameters
from course_lib.interop import from_transformers, to_transformers
from course_lib.models import ELECTRA_CLASSES
from course_lib.models.electra import ElectraForMaskedLM, ElectraForPreTraining, ElectraModel

CLASSES = list(ELECTRA_CLASSES)
CONFIGS = {
    # name: (E, hidden, heads, layers, intermediate, activation)
    "E16-H32-heads4": (16, 32, 4, 2, 37, "gelu"),  # factorized, as ELECTRA-small
    "E24-H24-heads3-relu": (24, 24, 3, 3, 50, "relu"),  # E == H: no projection, as base/large
    "E40-H20-heads5-gelu_new": (40, 20, 5, 1, 64, "gelu_new"),  # E > H (a projection down)
}
VOCAB = 97
TOL = 2e-5


def hf_config(dims, **extra):
    e, hidden, heads, layers, inter, act = dims
    return transformers.ElectraConfig(
        vocab_size=VOCAB,
        embedding_size=e,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        intermediate_size=inter,
        hidden_act=act,
        max_position_embeddings=40,
        attn_implementation="eager",  # so transformers returns attention maps
        **extra,
    )


def hf_model(cls_name, dims, seed=0, **extra):
    torch.manual_seed(seed)
    return getattr(transformers, cls_name)(hf_config(dims, **extra)).eval()


def compare_outputs(mine, theirs, cls_name, real) -> float:
    """Assert every output both produce is within TOL (padding rows of hidden states excluded:
    neither model defines them); return the largest difference of the model's main output."""
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a[real], b[real]) < TOL
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape
        assert max_diff(a, b) < TOL
    if cls_name == "ElectraModel":
        assert mine.pooler_output is None
        diff = max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real])
    elif cls_name == "ElectraForMaskedLM":
        assert mine.mlm_logits.shape == theirs.logits.shape
        diff = max_diff(mine.mlm_logits, theirs.logits)
    else:
        assert mine.logits.shape == theirs.logits.shape == real.shape
        diff = max_diff(mine.logits, theirs.logits)
    assert diff < TOL
    return diff


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, config_name):
    hf = hf_model(cls_name, CONFIGS[config_name], seed=CLASSES.index(cls_name))
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name
    assert ours.num_parameters() == sum(p.numel() for p in hf.parameters())
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
    layers = CONFIGS[config_name][3]
    assert len(mine.hidden_states) == layers + 1  # the projected embeddings, then each layer
    compare_outputs(mine, theirs, cls_name, batch["attention_mask"].bool())


@pytest.mark.parametrize("cls_name", CLASSES)
@pytest.mark.parametrize("config_name", ["E16-H32-heads4", "E24-H24-heads3-relu"])
def test_round_trip_state_dict_is_exact(cls_name, config_name):
    hf = hf_model(cls_name, CONFIGS[config_name])
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("cls_name", CLASSES)
def test_course_lib_model_converts_to_transformers(cls_name):
    """The other direction, from a course_lib model's own random init."""
    torch.manual_seed(3)
    config = ElectraConfig(
        vocab_size=VOCAB,
        embedding_size=12,
        hidden_size=24,
        num_attention_heads=3,
        num_hidden_layers=2,
        intermediate_size=30,
        max_position_embeddings=40,
    )
    ours = ELECTRA_CLASSES[cls_name](config).eval()
    hf = to_transformers(ours).eval()
    hf.set_attn_implementation("eager")
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
    compare_outputs(mine, theirs, cls_name, batch["attention_mask"].bool())


def test_generator_is_tied_and_uses_gelu_whatever_hidden_act():
    hf = hf_model("ElectraForMaskedLM", CONFIGS["E24-H24-heads3-relu"])
    ours = from_transformers(hf)
    assert ours.mlm_head.decoder.weight is ours.backbone.embeddings.word_embeddings.weight
    assert ours.mlm_head.decoder.weight.shape == (VOCAB, 24)
    # hidden_act is relu, but transformers' generator head is always GELU: the parity above
    # would fail with relu; here the head's activation itself is checked
    x = torch.linspace(-3, 3, 7)
    assert torch.equal(ours.mlm_head.act(x), torch.nn.functional.gelu(x))


def test_losses_equal_transformers():
    dims = CONFIGS["E16-H32-heads4"]
    batch = padded_batch(VOCAB)
    disc_hf = hf_model("ElectraForPreTraining", dims)
    disc = from_transformers(disc_hf)
    replaced = torch.zeros_like(batch["input_ids"])
    replaced[0, [2, 5]] = 1
    replaced[1, [0, 8, 11]] = 1  # 11 is padding: must not count
    with torch.no_grad():
        theirs = disc_hf(**batch, labels=replaced)
        mine = disc(**batch, labels=replaced)
        no_mask_theirs = disc_hf(batch["input_ids"], labels=replaced)
        no_mask_mine = disc(batch["input_ids"], labels=replaced)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    assert abs(no_mask_mine.loss.item() - no_mask_theirs.loss.item()) < TOL
    assert abs(mine.loss.item() - no_mask_mine.loss.item()) > 1e-4  # padding changes the mean

    gen_hf = hf_model("ElectraForMaskedLM", dims)
    gen = from_transformers(gen_hf)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 7]] = batch["input_ids"][0, [1, 4, 7]]
    labels[2, 2] = 17
    with torch.no_grad():
        theirs = gen_hf(**batch, labels=labels)
        mine = gen(**batch, labels=labels)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    assert mine.mlm_logits.shape == (4, VOCAB)  # only the masked rows reach the vocabulary


def test_discriminator_labels_shape_is_checked():
    model = ElectraForPreTraining(ElectraConfig(vocab_size=VOCAB, num_hidden_layers=1))
    batch = padded_batch(VOCAB)
    with pytest.raises(ValueError, match="one 0/1 label per token"):
        model(**batch, labels=torch.zeros(3, 12))


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="tie_word_embeddings=False"):
        from_transformers(
            hf_model("ElectraForMaskedLM", CONFIGS["E16-H32-heads4"], tie_word_embeddings=False)
        )
    pre_ln = ElectraModel(ElectraConfig(vocab_size=VOCAB, num_hidden_layers=1, pre_layer_norm=True))
    with pytest.raises(ValueError, match="post-LN"):
        to_transformers(pre_ln)
    with pytest.raises(ValueError, match="embedding_size=0"):
        ElectraConfig(embedding_size=0)
    from course_lib.config import BertConfig

    with pytest.raises(ValueError, match="needs a ElectraConfig, got BertConfig"):
        ElectraModel(BertConfig(vocab_size=VOCAB, num_hidden_layers=1))


# --- parameter counts -------------------------------------------------------------------------

SMALL = dict(
    vocab_size=101,
    hidden_size=24,
    num_attention_heads=3,
    intermediate_size=40,
    max_position_embeddings=33,
    num_hidden_layers=2,
)


@pytest.mark.parametrize("cls_name", CLASSES)
@pytest.mark.parametrize(
    "changes",
    [
        dict(embedding_size=8),
        dict(embedding_size=24),  # E == H: no projection
        dict(embedding_size=8, pre_layer_norm=True),  # one more LayerNorm at the end
        dict(embedding_size=8, type_vocab_size=0),  # no segment table
    ],
    ids=["E8", "E24=H", "E8-preLN", "E8-no-segments"],
)
def test_count_equals_built_model(cls_name, changes):
    config = ElectraConfig(**SMALL, **changes)
    model = ELECTRA_CLASSES[cls_name](config)
    counted = count_parameters(config, cls_name)
    assert counted["total"] == sum(p.numel() for p in model.parameters())
    assert counted["total"] == sum(counted[k] for k in COMPONENTS)
    assert counted["pooler"] == 0


# The released discriminators; the paper gives 14M, 110M and 335M parameters (Table 1, 8).
PUBLISHED = {
    # preset: (ElectraModel, ElectraForPreTraining, paper in millions)
    "electra-small": (13_483_008, 13_549_057, 14),
    "electra-base": (108_891_648, 109_483_009, 110),
    "electra-large": (334_092_288, 335_142_913, 335),
}


@pytest.mark.parametrize("preset", PUBLISHED)
def test_published_sizes(preset):
    model_total, discriminator_total, paper = PUBLISHED[preset]
    config = ElectraConfig.from_preset(preset)
    assert count_parameters(config, "ElectraModel")["total"] == model_total
    assert count_parameters(config, "ElectraForPreTraining")["total"] == discriminator_total
    # within half a million of the paper: base is 109.48M, cited as 110M like BERT-base
    assert abs(discriminator_total / 1e6 - paper) < 0.6
    # the same numbers from transformers' own config, built by hand from the released values
    e, h, layers, heads, inter = {
        "electra-small": (128, 256, 12, 4, 1024),
        "electra-base": (768, 768, 12, 12, 3072),
        "electra-large": (1024, 1024, 24, 16, 4096),
    }[preset]
    hf_config = transformers.ElectraConfig(
        embedding_size=e,
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
    )
    assert from_config_count(hf_config) == discriminator_total


def from_config_count(hf_config) -> int:
    """Parameters of transformers' ElectraForPreTraining, built on the meta device (no memory)."""
    with torch.device("meta"):
        model = transformers.ElectraForPreTraining(hf_config)
    return sum(p.numel() for p in model.parameters())


def test_count_refuses_a_class_electra_does_not_have():
    with pytest.raises(ValueError, match="no ForSequenceClassification class"):
        count_parameters(ElectraConfig(), "ElectraForSequenceClassification")


def test_generator_config_follows_the_paper():
    small = ElectraConfig.from_preset("electra-small")
    gen = generator_config(small)  # 1/4: one head of 64, FFN 256
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == (64, 1, 256)
    assert gen.embedding_size == small.embedding_size and gen.vocab_size == small.vocab_size
    base = generator_config(ElectraConfig.from_preset("electra-base"), 1 / 3)
    assert (base.hidden_size, base.num_attention_heads, base.intermediate_size) == (256, 4, 1024)
    with pytest.raises(ValueError, match="multiplier"):
        generator_config(small, 0)


def test_config_round_trips_through_dict():
    from course_lib.config import config_from_dict

    config = ElectraConfig.from_preset("electra-small", vocab_size=500)
    assert config_from_dict(config.to_dict()) == config


def test_generator_and_discriminator_classes():
    config = ElectraConfig(**SMALL, embedding_size=8)
    assert isinstance(ElectraForMaskedLM(config).backbone, ElectraModel)
    assert ElectraForPreTraining(config).backbone.pooler is None
