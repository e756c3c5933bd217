"""ALBERT: parity with transformers (weight for weight), sharing by object identity, SOP, config.

Random-init transformers models are built from small configs (never downloaded), converted,
and compared on padded batches with two segments; then converted back, state dicts equal.
"""

import pytest
import torch
import transformers
from parity import max_diff, padded_batch

import course_lib.interop.albert  # noqa: F401  (registers the ALBERT conversions)
from course_lib.interop.core import from_transformers, to_transformers
from course_lib.models.albert import (
    ALBERT_CLASSES,
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertModel,
)

CLASSES = list(ALBERT_CLASSES)
CONFIGS = {
    # name: (E, hidden, heads, layers, groups, inner, intermediate, activation)
    "E16-H32-groups1-inner1": (16, 32, 4, 3, 1, 1, 37, "gelu_new"),
    "E8-H24-groups2-inner1-relu": (8, 24, 3, 4, 2, 1, 50, "relu"),
    "E12-H32-groups2-inner2-gelu": (12, 32, 2, 2, 2, 2, 48, "gelu"),
    # E == H: transformers still has the E -> H projection, so the converted model keeps it
    "E32-H32-groups1-inner2": (32, 32, 4, 3, 1, 2, 40, "gelu_new"),
}
VOCAB = 97
TOL = 1e-5


def hf_config(dims, num_labels=3, **extra):
    e, hidden, heads, layers, groups, inner, inter, act = dims
    return transformers.AlbertConfig(
        vocab_size=VOCAB,
        embedding_size=e,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        num_hidden_groups=groups,
        inner_group_num=inner,
        intermediate_size=inter,
        hidden_act=act,
        max_position_embeddings=40,
        num_labels=num_labels,
        attn_implementation="eager",  # so transformers returns attention maps
        **extra,
    )


def hf_model(cls_name, dims, seed=0):
    two = cls_name in ("AlbertForPreTraining", "AlbertForQuestionAnswering")
    torch.manual_seed(seed)
    return getattr(transformers, cls_name)(hf_config(dims, num_labels=2 if two else 3)).eval()


def small_config(**changes):
    sizes = dict(
        vocab_size=VOCAB,
        embedding_size=8,
        hidden_size=24,
        num_attention_heads=3,
        num_hidden_layers=4,
        intermediate_size=30,
        max_position_embeddings=40,
    )
    return AlbertConfig(**{**sizes, **changes})


def assert_same_outputs(mine, theirs, cls_name, real):
    """Every output course_lib and transformers both produce, within TOL (padding rows excluded
    from hidden states: what a padded position holds is not defined by either model)."""
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a[real], b[real]) < TOL
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape
        assert max_diff(a, b) < TOL
    if cls_name == "AlbertModel":
        assert max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < TOL
        assert max_diff(mine.pooler_output, theirs.pooler_output) < TOL
    elif cls_name == "AlbertForMaskedLM":
        assert mine.mlm_logits.shape == theirs.logits.shape
        assert max_diff(mine.mlm_logits, theirs.logits) < TOL
    elif cls_name == "AlbertForPreTraining":
        assert max_diff(mine.mlm_logits, theirs.prediction_logits) < TOL
        assert max_diff(mine.sop_logits, theirs.sop_logits) < TOL
    elif cls_name == "AlbertForQuestionAnswering":
        assert max_diff(mine.start_logits, theirs.start_logits) < TOL
        assert max_diff(mine.end_logits, theirs.end_logits) < TOL
    else:
        assert max_diff(mine.logits, theirs.logits) < TOL


# --- parity with transformers -------------------------------------------------------------------


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
    # layers * inner_group_num layers are applied, plus the projected embeddings
    e, hidden, heads, layers, groups, inner, *_ = CONFIGS[config_name]
    assert len(mine.hidden_states) == layers * inner + 1
    assert_same_outputs(mine, theirs, cls_name, batch["attention_mask"].bool())


@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name):
    hf = hf_model(cls_name, CONFIGS["E12-H32-groups2-inner2-gelu"])
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    assert back.config.num_hidden_groups == 2 and back.config.inner_group_num == 2
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_course_lib_model_converts_to_transformers():
    """The other direction, from a course_lib model's own random init (groups and inner layers)."""
    torch.manual_seed(3)
    ours = AlbertForPreTraining(small_config(num_hidden_groups=2, inner_group_num=2)).eval()
    hf = to_transformers(ours).eval()
    hf.set_attn_implementation("eager")  # so transformers returns attention maps
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
    assert_same_outputs(mine, theirs, "AlbertForPreTraining", batch["attention_mask"].bool())


def test_pretraining_losses_equal_transformers():
    hf = hf_model("AlbertForPreTraining", CONFIGS["E8-H24-groups2-inner1-relu"])
    ours = from_transformers(hf)
    batch = padded_batch(VOCAB)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 7]] = batch["input_ids"][0, [1, 4, 7]]
    labels[2, 2] = 17
    sop = torch.tensor([0, 1, 1])
    with torch.no_grad():
        theirs = hf(**batch, labels=labels, sentence_order_label=sop)
        mine = ours(**batch, labels=labels, sentence_order_label=sop)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    assert (
        abs(mine.sop_loss.item() - torch.nn.functional.cross_entropy(theirs.sop_logits, sop).item())
        < TOL
    )
    assert mine.nsp_logits is None and mine.nsp_loss is None  # the head is SOP, named so
    # with labels, only the 4 masked rows are projected onto the vocabulary
    assert mine.mlm_logits.shape == (4, VOCAB)
    assert max_diff(mine.mlm_logits, theirs.prediction_logits[labels != -100]) < TOL


def test_sop_labels_have_one_name_and_the_engine_routes_them():
    """ALBERT's SOP head takes `sentence_order_label` only; `model_inputs` hands a batch's pair
    labels to the name the model takes (SOP labels to BERT's `next_sentence_label`, NSP labels
    to ALBERT's `sentence_order_label`): the alias lives in one place, the engine."""
    from course_lib.config import BertConfig
    from course_lib.models import BertForPreTraining
    from course_lib.training.engine import model_inputs

    model = AlbertForPreTraining(small_config())
    sop = torch.tensor([0, 1, 1])
    with pytest.raises(TypeError, match="next_sentence_label"):
        model(**padded_batch(VOCAB), next_sentence_label=sop)
    batch = {**padded_batch(VOCAB), "sentence_order_label": sop, "word_ids": sop}
    assert set(model_inputs(batch, model)) == {*padded_batch(VOCAB), "sentence_order_label"}
    bert = BertForPreTraining(
        BertConfig(
            vocab_size=VOCAB,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    routed = model_inputs(batch, bert)
    assert "sentence_order_label" not in routed and torch.equal(routed["next_sentence_label"], sop)
    nsp = {**padded_batch(VOCAB), "next_sentence_label": sop}
    routed = model_inputs(nsp, model)  # an NSP experiment on ALBERT
    assert "next_sentence_label" not in routed and torch.equal(routed["sentence_order_label"], sop)
    assert model_inputs(nsp, bert)["next_sentence_label"] is sop


@pytest.mark.parametrize(
    "cls_name, kwargs",
    [
        ("AlbertForSequenceClassification", {"labels": torch.tensor([0, 2, 1])}),
        ("AlbertForTokenClassification", {"labels": torch.randint(0, 3, (3, 13))}),
        (
            "AlbertForQuestionAnswering",
            {
                "start_positions": torch.tensor([1, 3, 20]),
                "end_positions": torch.tensor([2, 5, 20]),
            },
        ),
    ],
)
def test_task_losses_equal_transformers(cls_name, kwargs):
    hf = hf_model(cls_name, CONFIGS["E16-H32-groups1-inner1"])
    ours = from_transformers(hf)
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        assert abs(ours(**batch, **kwargs).loss.item() - hf(**batch, **kwargs).loss.item()) < TOL


def test_config_translation_keeps_albert_fields():
    hf = hf_model("AlbertForSequenceClassification", CONFIGS["E12-H32-groups2-inner2-gelu"])
    hf.config.classifier_dropout_prob = 0.25
    ours = from_transformers(hf.train())
    assert ours.training
    c = ours.config
    assert (c.embedding_size, c.num_hidden_groups, c.inner_group_num, c.sharing) == (
        12,
        2,
        2,
        "all",
    )
    assert c.embedding_projection is True and c.num_labels == 3
    assert ours.classifier.dropout.p == 0.25
    assert to_transformers(ours).config.classifier_dropout_prob == 0.25


def test_old_checkpoint_with_nsp_head_keys_loads_into_sop_head(tmp_path):
    """Checkpoints saved before the SOP head was renamed (nsp_head.* -> sop_head.*) still load."""
    from safetensors.torch import load_file, save_file

    from course_lib.training.checkpoint import MODEL_FILE, load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    saved = AlbertForPreTraining(small_config())
    save_checkpoint(tmp_path / "ckpt", saved)
    weights = tmp_path / "ckpt" / MODEL_FILE
    tensors = load_file(str(weights))
    old = {k.replace("sop_head.", "nsp_head."): v for k, v in tensors.items()}
    assert "nsp_head.classifier.weight" in old and not any("sop_head" in k for k in old)
    save_file(old, str(weights))
    torch.manual_seed(1)
    loaded = AlbertForPreTraining(small_config())
    load_checkpoint(tmp_path / "ckpt", loaded)
    for (name, a), b in zip(saved.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    assert loaded.mlm_head.decoder.weight is loaded.backbone.embeddings.word_embeddings.weight


def test_sop_head_needs_two_labels():
    torch.manual_seed(0)
    hf = transformers.AlbertForPreTraining(
        hf_config(CONFIGS["E16-H32-groups1-inner1"], num_labels=3)
    )
    with pytest.raises(ValueError, match="exactly 2 logits"):
        from_transformers(hf)


# --- sharing: the weights are identical objects -------------------------------------------------


def test_all_shared_layers_are_one_object():
    model = AlbertModel(small_config(num_hidden_layers=6))
    enc = model.encoder
    assert all(enc.layer_at(i) is enc.layer_at(0) for i in range(6))
    assert enc.layer_at(5).attention.query.weight is enc.layer_at(0).attention.query.weight
    assert enc.shared_sublayers()["attention"] == [[0, 1, 2, 3, 4, 5]]
    with torch.no_grad():  # one tensor: a change through layer 0 is seen by layer 5
        enc.layer_at(0).feed_forward.up.weight[0, 0] = 7.0
    assert enc.layer_at(5).feed_forward.up.weight[0, 0] == 7.0
    with pytest.raises(IndexError, match="applies 6 layers"):
        enc.layer_at(6)


@pytest.mark.parametrize(
    "sharing, attention, feed_forward",
    [
        ("all", [[0, 1, 2, 3]], [[0, 1, 2, 3]]),
        ("attention", [[0, 1, 2, 3]], [[0], [1], [2], [3]]),
        ("ffn", [[0], [1], [2], [3]], [[0, 1, 2, 3]]),
        ("none", [[0], [1], [2], [3]], [[0], [1], [2], [3]]),
    ],
)
def test_sharing_strategies_share_what_they_say(sharing, attention, feed_forward):
    table = AlbertModel(small_config(sharing=sharing)).encoder.shared_sublayers()
    assert table["attention"] == table["attention_norm"] == attention
    assert table["feed_forward"] == table["output_norm"] == feed_forward


def test_groups_and_inner_layers_share_like_the_reference():
    # 4 layers in 2 groups, 2 inner layers each: 8 applied, 4 distinct; group 0 runs a0 b0 a0 b0
    config = small_config(num_hidden_groups=2, inner_group_num=2)
    enc = AlbertModel(config).encoder
    assert len(enc.layers) == config.depth == 8
    assert enc.shared_sublayers()["attention"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    # shared-attention with groups: attention shared within each group, every FFN its own
    enc = AlbertModel(small_config(num_hidden_groups=2, sharing="attention")).encoder
    assert enc.shared_sublayers()["attention"] == [[0, 1], [2, 3]]
    assert enc.shared_sublayers()["feed_forward"] == [[0], [1], [2], [3]]


def test_shared_gradient_is_the_sum_over_the_layers_that_use_it():
    """All-shared equals an unshared model whose layers are copies; the shared weight's
    gradient is the sum of the copies' gradients (one tensor receives every layer's share)."""
    shared = AlbertModel(small_config(num_hidden_layers=3, hidden_dropout_prob=0.0)).eval()
    unshared = AlbertModel(small_config(num_hidden_layers=3, sharing="none")).eval()
    state = shared.state_dict()  # lists layers.0/1/2.* -- three names for the same tensors
    unshared.load_state_dict({k: v.clone() for k, v in state.items()})
    batch = padded_batch(VOCAB)
    out_s, out_u = shared(**batch).last_hidden_state, unshared(**batch).last_hidden_state
    assert max_diff(out_s, out_u) < 1e-6
    weights = torch.randn_like(out_s)
    (out_s * weights).sum().backward()
    (out_u * weights).sum().backward()
    grad_sum = sum(unshared.encoder.layer_at(i).attention.query.weight.grad for i in range(3))
    assert max_diff(shared.encoder.layer_at(0).attention.query.weight.grad, grad_sum) < 1e-5
    # and the parameter count reflects one layer, while the state dict lists three
    assert shared.num_parameters() < unshared.num_parameters()
    assert len(list(shared.parameters())) < len(state)


def test_not_shared_equals_all_shared_with_one_group_per_layer():
    none = AlbertForMaskedLM(small_config(sharing="none")).eval()
    grouped = AlbertForMaskedLM(small_config(sharing="all", num_hidden_groups=4)).eval()
    assert none.num_parameters() == grouped.num_parameters()
    assert none.state_dict().keys() == grouped.state_dict().keys()
    grouped.load_state_dict(none.state_dict())
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        a, b = none(**batch).mlm_logits, grouped(**batch).mlm_logits
    assert torch.equal(a, b)
    # transformers expresses not-shared as one group per layer
    hf = to_transformers(none).eval()
    assert hf.config.num_hidden_groups == 4
    with torch.no_grad():
        assert max_diff(hf(**batch).logits, a) < TOL


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_partial_sharing_has_no_transformers_equivalent(sharing):
    model = AlbertModel(small_config(sharing=sharing))
    out = model(**padded_batch(VOCAB))
    assert out.last_hidden_state.shape == (3, 13, 24)
    with pytest.raises(ValueError, match=f"sharing='{sharing}' has no transformers equivalent"):
        to_transformers(model)


def test_other_inexpressible_models_fail_clearly():
    with pytest.raises(ValueError, match="post-LN"):
        to_transformers(AlbertModel(small_config(pre_layer_norm=True)))
    # E == H: the original code has no projection; transformers always has one
    no_projection = AlbertModel(small_config(embedding_size=24))
    assert isinstance(no_projection.embeddings.projection, torch.nn.Identity)
    with pytest.raises(ValueError, match="embedding_projection=True"):
        to_transformers(no_projection)
    projected = AlbertModel(small_config(embedding_size=24, embedding_projection=True))
    assert isinstance(projected.embeddings.projection, torch.nn.Linear)


# --- factorized embedding, heads, checkpoints ---------------------------------------------------


def test_factorized_embedding_and_tied_decoder():
    model = AlbertForMaskedLM(small_config())
    emb = model.backbone.embeddings
    assert emb.word_embeddings.weight.shape == (VOCAB, 8)  # V x E
    assert emb.projection.weight.shape == (24, 8)  # E -> H
    assert model.mlm_head.decoder.weight is emb.word_embeddings.weight
    out = model(**padded_batch(VOCAB), output_hidden_states=True)
    assert out.hidden_states[0].shape == (3, 13, 24)  # projected before the first layer
    assert out.mlm_logits.shape == (3, 13, VOCAB)


def test_checkpoint_round_trip_with_shared_weights(tmp_path):
    """Shared tensors appear under several state-dict names; safetensors stores them once."""
    from course_lib.training.checkpoint import load_checkpoint, save_checkpoint

    config = small_config(num_hidden_groups=2, inner_group_num=2)
    model = AlbertForPreTraining(config).eval()
    save_checkpoint(tmp_path / "ckpt", model)
    torch.manual_seed(123)
    fresh = AlbertForPreTraining(config).eval()
    load_checkpoint(tmp_path / "ckpt", fresh, restore_rng=False)
    enc = fresh.backbone.encoder
    assert enc.layer_at(2) is enc.layer_at(0)  # loading kept the sharing
    batch = padded_batch(VOCAB)
    with torch.no_grad():
        assert torch.equal(model(**batch).mlm_logits, fresh(**batch).mlm_logits)


# --- config ---------------------------------------------------------------------------------------


def test_presets():
    base = AlbertConfig.from_preset("albert-base")
    assert (base.num_hidden_layers, base.hidden_size, base.embedding_size, base.vocab_size) == (
        12,
        768,
        128,
        30000,
    )
    assert (base.num_attention_heads, base.intermediate_size) == (12, 3072)
    large = AlbertConfig.from_preset("albert-large")
    assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads) == (24, 1024, 16)
    xlarge = AlbertConfig.from_preset("albert-xlarge")
    assert (xlarge.num_hidden_layers, xlarge.hidden_size, xlarge.intermediate_size) == (
        24,
        2048,
        8192,
    )
    xx = AlbertConfig.from_preset("albert-xxlarge")
    assert (xx.num_hidden_layers, xx.hidden_size, xx.num_attention_heads, xx.intermediate_size) == (
        12,
        4096,
        64,
        16384,
    )
    assert AlbertConfig() == base  # the defaults are ALBERT-base


def test_config_round_trips_through_dict():
    config = small_config(num_hidden_groups=2, sharing="all", inner_group_num=3)
    data = config.to_dict()
    assert data["model_type"] == "albert" and data["embedding_projection"] is None
    assert AlbertConfig.from_dict(data) == config
    with pytest.raises(ValueError, match="model_type='albert'"):
        from course_lib.config import BertConfig

        BertConfig.from_dict(data)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            dict(num_hidden_groups=3),
            r"num_hidden_layers=4 is not divisible by num_hidden_groups=3.*\[1, 2, 4\]",
        ),
        (
            dict(sharing="layers"),
            r"sharing='layers' is invalid: expected one of \('all', 'attention'",
        ),
        (dict(sharing="none", num_hidden_groups=2), "leave both at 1"),
        (dict(embedding_size=0), "embedding_size=0 is invalid"),
        (dict(inner_group_num=1.5), "inner_group_num=1.5 is invalid"),
        (
            dict(embedding_projection=False),
            "embedding_projection=False needs embedding_size == hidden_size",
        ),
        (dict(classifier_dropout_prob=1.0), "classifier_dropout_prob=1.0 is invalid"),
    ],
)
def test_invalid_configs_fail_clearly(changes, message):
    with pytest.raises(ValueError, match=message):
        small_config(**changes)


def test_albert_model_needs_albert_config():
    from course_lib.config import BertConfig

    with pytest.raises(ValueError, match="AlbertModel needs a AlbertConfig"):
        AlbertModel(
            BertConfig(vocab_size=50, hidden_size=16, num_attention_heads=2, num_hidden_layers=1)
        )
