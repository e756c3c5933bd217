"""DeBERTa: config checks, parity with transformers' DeBERTa-v2, exact counts, the per-term
attention maps, the paper's p2c variant and the enhanced mask decoder.

transformers models are random-init from small configs (never downloaded), then their weights
are spread out (unit-scale projections, unit-variance relative table) so attention is far from
uniform and a wrong relative index would show up far above the 1e-5 tolerance.
"""

import math

import pytest
import torch
import transformers

import course_lib.interop.deberta  # noqa: F401  (registers the DeBERTa conversions)
from course_lib.counting import COMPONENTS, count_parameters
from course_lib.interop.core import from_transformers, to_transformers
from course_lib.models.deberta import (
    DebertaConfig,
    DebertaForMaskedLM,
    DebertaForQuestionAnswering,
    DebertaForSequenceClassification,
    DebertaForTokenClassification,
    DebertaModel,
)
from course_lib.modules.relative_position import delta


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny ops on a shared 2-core machine: a second OpenMP thread only adds spin-waiting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TOL = 1e-5
CLASSES = {
    "DebertaModel": "DebertaV2Model",
    "DebertaForMaskedLM": "DebertaV2ForMaskedLM",
    "DebertaForSequenceClassification": "DebertaV2ForSequenceClassification",
    "DebertaForTokenClassification": "DebertaV2ForTokenClassification",
    "DebertaForQuestionAnswering": "DebertaV2ForQuestionAnswering",
}
OURS = {
    c.__name__: c
    for c in (
        DebertaModel,
        DebertaForMaskedLM,
        DebertaForSequenceClassification,
        DebertaForTokenClassification,
        DebertaForQuestionAnswering,
    )
}
VARIANTS = {
    # the deberta-v3 recipe at small size: log buckets, shared projections, both terms
    "v3-buckets8": dict(position_buckets=8, max_relative_positions=16),
    "buckets16-separate-keys": dict(
        position_buckets=16, max_relative_positions=64, share_att_key=False
    ),
    # plain clipping at k=4 (DeBERTa v1 style), c2p only, no relative LayerNorm
    "clip4-c2p": dict(
        position_buckets=0, max_relative_positions=4, pos_att_type=["c2p"], norm_rel_ebd="none"
    ),
    # clipping at k = max_position_embeddings, p2c only, separate key, absolute positions
    # at the input and two segments, gelu_new
    "clip-p2c-absolute": dict(
        position_buckets=-1,
        pos_att_type=["p2c"],
        share_att_key=False,
        position_biased_input=True,
        type_vocab_size=2,
        hidden_act="gelu_new",
        num_hidden_layers=1,
    ),
    # no position terms at all: BERT-like scores over sqrt(d), absolute positions
    "no-relative": dict(
        relative_attention=False, pos_att_type=[], norm_rel_ebd="none", position_biased_input=True
    ),
}
VOCAB = 101


def spread(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("rel_embeddings.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            elif p.dim() == 2 and "embeddings" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif name.endswith("LayerNorm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return model


def hf_config(**overrides):
    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        share_att_key=True,
        position_biased_input=False,
        norm_rel_ebd="layer_norm",
        type_vocab_size=0,
        num_labels=3,
        attn_implementation="eager",
    )
    kwargs.update(overrides)
    return transformers.DebertaV2Config(**kwargs)


def hf_model(cls_name: str, variant: str = "v3-buckets8", **overrides):
    num_labels = 2 if cls_name.endswith("QuestionAnswering") else 3
    config = hf_config(**{**VARIANTS[variant], "num_labels": num_labels, **overrides})
    torch.manual_seed(0)
    return spread(getattr(transformers, CLASSES[cls_name])(config).eval())


def padded_batch(seq=13, segments=False):
    """Odd length, three rows of different real lengths (13, 9, 4)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, VOCAB, (3, seq), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    batch = dict(input_ids=ids, attention_mask=mask)
    if segments:
        types = torch.zeros_like(ids)
        types[0, 6:] = 1
        types[1, 5:9] = 1
        batch["token_type_ids"] = types
    return batch


def max_diff(a, b):
    return (a - b).abs().max().item()


# ---------------------------------------------------------------- config


def test_v3_base_preset_and_defaults():
    c = DebertaConfig.from_preset("deberta-v3-base")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) == (
        768,
        12,
        12,
        3072,
    )
    assert (c.vocab_size, c.type_vocab_size, c.layer_norm_eps) == (128100, 0, 1e-7)
    assert c.pos_att_type == ["p2c", "c2p"] and c.share_att_key and not c.position_biased_input
    assert (c.relative_span, c.max_relative_positions) == (256, -1)
    assert c.model_type == "deberta" and not c.use_emd
    assert DebertaConfig.from_dict(c.to_dict()) == c
    assert DebertaConfig.from_preset("deberta-v3-large").num_attention_heads == 16


def test_max_relative_positions_minus_one_means_max_position_embeddings():
    """-1 (the default, as in transformers) buckets distances up to max_position_embeddings."""
    from course_lib.modules.relative_position import relative_position

    config = DebertaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        max_position_embeddings=40,
        position_buckets=8,
    )
    encoder = DebertaModel(config).encoder
    assert config.max_relative_positions == -1 and encoder.max_relative_positions == 40
    _, distances = encoder.relative_inputs(30, torch.device("cpu"))
    assert torch.equal(distances, relative_position(30, 30, 8, 40))
    assert not torch.equal(distances, relative_position(30, 30, 8, 16))


def test_pos_att_type_accepts_transformers_string_form():
    assert DebertaConfig(pos_att_type="p2c|C2P").pos_att_type == ["p2c", "c2p"]
    clip = DebertaConfig(position_buckets=0, max_relative_positions=128)
    assert clip.relative_span == 128


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(pos_att_type=["c2p", "p2p"]), "pos_att_type"),
        (dict(pos_att_type=["c2p", "c2p"]), "pos_att_type"),
        (dict(norm_rel_ebd="rms"), "norm_rel_ebd"),
        (dict(relative_attention=False), "relative_attention"),
        (dict(use_emd=True, position_biased_input=True), "use_emd"),
        (dict(position_buckets=256, max_relative_positions=100), "position_buckets"),
        (dict(max_relative_positions=0), "max_relative_positions"),
        (dict(emd_steps=0), "emd_steps"),
    ],
)
def test_invalid_configs_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DebertaConfig(**kwargs)


def test_model_needs_a_deberta_config():
    from course_lib.config import BertConfig

    with pytest.raises(ValueError, match="needs a DebertaConfig"):
        DebertaModel(BertConfig.from_preset("bert-tiny"))


# ---------------------------------------------------------------- parity


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, variant):
    hf = hf_model(cls_name, variant)
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name
    batch = padded_batch(segments=VARIANTS[variant].get("type_vocab_size", 0) > 0)
    with torch.no_grad():
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
        plain = ours(**batch)  # the path without attention maps gives the same numbers
    # every position, padding included: DeBERTa zeroes padded inputs and masks (query, key) pairs
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a, b) < TOL
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape == (3, 4, 13, 13)
        assert max_diff(a, b) < TOL
    if cls_name == "DebertaModel":
        assert max_diff(mine.last_hidden_state, theirs.last_hidden_state) < TOL
        assert mine.pooler_output is None
    elif cls_name == "DebertaForMaskedLM":
        assert mine.mlm_logits.shape == theirs.logits.shape == (3, 13, VOCAB)
        assert max_diff(mine.mlm_logits, theirs.logits) < TOL
        assert torch.equal(plain.mlm_logits, mine.mlm_logits)
    elif cls_name == "DebertaForQuestionAnswering":
        assert max_diff(mine.start_logits, theirs.start_logits) < TOL
        assert max_diff(mine.end_logits, theirs.end_logits) < TOL
    else:
        assert max_diff(mine.logits, theirs.logits) < TOL
        assert torch.equal(plain.logits, mine.logits)


@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name):
    hf = hf_model(cls_name, "buckets16-separate-keys")
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_non_legacy_mlm_head_layout():
    """legacy=False is the lm_predictions.lm_head.* layout of Microsoft's own checkpoints."""
    hf = hf_model("DebertaForMaskedLM", legacy=False)
    assert any(k.startswith("lm_predictions.lm_head.") for k in hf.state_dict())
    ours = from_transformers(hf)
    assert ours.config.legacy is False
    batch = padded_batch()
    with torch.no_grad():
        assert max_diff(ours(**batch).mlm_logits, hf(**batch).logits) < TOL
    back = to_transformers(ours)
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in hf.state_dict().items())


def test_losses_equal_transformers():
    batch = padded_batch()
    hf = hf_model("DebertaForMaskedLM")
    ours = from_transformers(hf)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 12]] = batch["input_ids"][0, [1, 4, 12]]
    labels[2, 2] = 17
    with torch.no_grad():
        theirs, mine = hf(**batch, labels=labels), ours(**batch, labels=labels)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    assert mine.mlm_logits.shape == (4, VOCAB)  # only the masked rows are projected
    assert max_diff(mine.mlm_logits, theirs.logits[labels != -100]) < TOL

    for num_labels, labels in ((3, torch.tensor([0, 2, 1])), (1, torch.tensor([0.5, -1.0, 2.0]))):
        hf = hf_model("DebertaForSequenceClassification", num_labels=num_labels)
        ours = from_transformers(hf)
        with torch.no_grad():
            assert (
                abs(
                    ours(**batch, labels=labels).loss.item()
                    - hf(**batch, labels=labels).loss.item()
                )
                < TOL
            )


def test_unsupported_transformers_features_are_refused():
    conv = transformers.DebertaV2Model(hf_config(conv_kernel_size=3))
    with pytest.raises(ValueError, match="conv_kernel_size=3.*not implemented"):
        from_transformers(conv)
    with pytest.raises(ValueError, match="embedding_size=32"):
        from_transformers(transformers.DebertaV2Model(hf_config(embedding_size=32)))
    ours = DebertaForMaskedLM(
        DebertaConfig.from_preset("deberta-v3-xsmall", vocab_size=VOCAB, num_hidden_layers=1)
    )
    for flag in ("use_emd", "paper_p2c", "pre_layer_norm"):
        model = DebertaForMaskedLM(ours.config.replace(**{flag: True}))
        with pytest.raises(ValueError, match=f"{flag}=True has no transformers equivalent"):
            to_transformers(model)


# ---------------------------------------------------------------- counts


def small_config(**overrides):
    kwargs = dict(
        vocab_size=333,
        hidden_size=60,
        num_attention_heads=5,
        num_hidden_layers=2,
        intermediate_size=70,
        max_position_embeddings=77,
        position_buckets=16,
        num_labels=4,
    )
    return DebertaConfig(**{**kwargs, **overrides})


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(share_att_key=False),
        dict(share_att_key=False, pos_att_type=["c2p"], position_buckets=-1, norm_rel_ebd="none"),
        dict(position_biased_input=True, type_vocab_size=3, pre_layer_norm=True),
        dict(use_emd=True),
        dict(
            relative_attention=False,
            pos_att_type=[],
            norm_rel_ebd="none",
            position_biased_input=True,
        ),
    ],
)
def test_counts_equal_built_models(overrides):
    config = small_config(**overrides)
    for cls_name, cls in OURS.items():
        counted = count_parameters(config, cls_name)
        assert counted["total"] == sum(p.numel() for p in cls(config).parameters()), cls_name
        assert counted["total"] == sum(counted[c] for c in COMPONENTS)


@pytest.mark.parametrize("variant", ["v3-buckets8", "buckets16-separate-keys", "clip-p2c-absolute"])
def test_counts_equal_transformers_models(variant):
    for cls_name in CLASSES:
        hf = hf_model(cls_name, variant)
        config = from_transformers(hf).config
        assert count_parameters(config, cls_name)["total"] == sum(
            p.numel() for p in hf.parameters()
        ), cls_name


def test_published_deberta_v3_base_count():
    config = DebertaConfig.from_preset("deberta-v3-base")
    counted = count_parameters(config, "DebertaModel")
    assert counted["total"] == 183_831_552
    # 98.4M of it is the 128k-token embedding matrix; the relative table is 512 x 768
    assert counted["embeddings"] == (128_100 + 512) * 768
    with torch.device("meta"):  # build transformers' model without allocating memory
        from course_lib.interop.deberta import config_to_hf

        hf = transformers.DebertaV2Model(config_to_hf(config))
    assert sum(p.numel() for p in hf.parameters()) == 183_831_552
    with pytest.raises(ValueError, match="no ForPreTraining"):
        count_parameters(config, "DebertaForPreTraining")


# ---------------------------------------------------------------- attention terms


def test_attention_terms_sum_to_the_softmax_input():
    hf = hf_model("DebertaModel", "buckets16-separate-keys")
    model = from_transformers(hf)
    batch = padded_batch()
    with torch.no_grad():
        layers = model.attention_terms(**batch)
    assert len(layers) == 2
    keep = batch["attention_mask"].bool()
    pair = keep[:, None, :, None] & keep[:, None, None, :]
    for terms in layers:
        assert set(terms) == {"c2c", "c2p", "p2c", "probs"}
        for name in ("c2c", "c2p", "p2c"):
            assert terms[name].shape == (3, 4, 13, 13)
            assert terms[name].abs().mean() > 0.05  # each term carries real signal
        scores = terms["c2c"] + terms["c2p"] + terms["p2c"]
        expected = scores.masked_fill(~pair, torch.finfo(scores.dtype).min).softmax(-1)
        assert max_diff(expected, terms["probs"]) < 1e-6

    # pre-LN: the terms are computed from the normalised layer input, as the forward pass does
    pre_ln = spread(DebertaModel(small_config(pre_layer_norm=True))).eval()
    with torch.no_grad():
        terms = pre_ln.attention_terms(batch["input_ids"] % 333)[1]
    scores = terms["c2c"] + terms["c2p"] + terms["p2c"]
    assert max_diff(scores.softmax(-1), terms["probs"]) < 1e-6

    only_c2p = DebertaModel(small_config(pos_att_type=["c2p"])).eval()
    with torch.no_grad():
        assert set(only_c2p.attention_terms(batch["input_ids"])[0]) == {"c2c", "c2p", "probs"}


def test_term_entries_by_hand_and_paper_variant():
    """c2p(i, j) = Q_i · K^r[δ(i, j)]; p2c(i, j) = K_j · Q^r[δ(i, j)], paper: [δ(j, i)]."""
    k = 3
    config = small_config(position_buckets=0, max_relative_positions=k, num_hidden_layers=1)
    model = spread(DebertaModel(config)).eval()
    paper = DebertaModel(config.replace(paper_p2c=True)).eval()
    paper.load_state_dict(model.state_dict())
    ids = torch.randint(0, 333, (1, 9))
    with torch.no_grad():
        code_terms, paper_terms = model.attention_terms(ids)[0], paper.attention_terms(ids)[0]
        attn = model.encoder.layers[0].attention
        x = model.embeddings(ids)
        table = model.encoder.rel_norm(model.encoder.rel_embeddings.weight)
        q, key = attn.split_heads(attn.query(x)), attn.split_heads(attn.key(x))
        q_r, k_r = (
            attn.split_heads(attn.query(table[None])),
            attn.split_heads(attn.key(table[None])),
        )
    scale = math.sqrt(config.head_dim * 3)
    for i, j in [(0, 0), (1, 7), (8, 2), (4, 5), (6, 1)]:
        assert (
            abs(code_terms["c2p"][0, 2, i, j] - q[0, 2, i] @ k_r[0, 2, delta(i, j, k)] / scale)
            < 1e-5
        )
        assert (
            abs(code_terms["p2c"][0, 2, i, j] - key[0, 2, j] @ q_r[0, 2, delta(i, j, k)] / scale)
            < 1e-5
        )
        assert (
            abs(paper_terms["p2c"][0, 2, i, j] - key[0, 2, j] @ q_r[0, 2, delta(j, i, k)] / scale)
            < 1e-5
        )
    # the two variants share c2c and c2p and differ only in the p2c term
    assert torch.equal(code_terms["c2c"], paper_terms["c2c"])
    assert torch.equal(code_terms["c2p"], paper_terms["c2p"])
    assert max_diff(code_terms["p2c"], paper_terms["p2c"]) > 0.1


# ---------------------------------------------------------------- enhanced mask decoder


def emd_pair(steps: int = 2):
    """The same weights with and without the enhanced mask decoder."""
    config = small_config(use_emd=True, emd_steps=steps)
    emd = spread(DebertaForMaskedLM(config)).eval()
    plain = DebertaForMaskedLM(config.replace(use_emd=False)).eval()
    state = {k: v for k, v in emd.state_dict().items() if "position_embeddings" not in k}
    plain.load_state_dict(state)
    return emd, plain


def test_emd_with_zero_positions_and_one_step_is_the_last_layer():
    """One EMD step with query = H + 0 recomputes the last layer exactly: a consistency check."""
    emd, plain = emd_pair(steps=1)
    batch = padded_batch()
    batch["input_ids"] = batch["input_ids"] % 333
    with torch.no_grad():
        emd.backbone.embeddings.position_embeddings.weight.zero_()
        a, b = emd(**batch), plain(**batch)
    assert max_diff(a.mlm_logits, b.mlm_logits) < 1e-5
    assert a.hidden_states is None


def test_emd_reapplies_the_last_layer_to_fixed_keys():
    """Step 1: queries H + P; step 2: queries = step 1's output; keys/values always H, the
    states entering the last layer (Microsoft's EnhancedMaskDecoder)."""
    emd, _ = emd_pair(steps=2)
    ids = torch.randint(1, 333, (2, 11))
    encoder = emd.backbone.encoder
    layer = encoder.layers[-1]
    with torch.no_grad():
        out = emd(ids, output_hidden_states=True)
        h = out.hidden_states[-2]
        rel, pos = encoder.relative_inputs(11, ids.device)
        query = h + emd.backbone.embeddings.position_embeddings.weight[:11]
        one_step, _ = layer(h, None, False, rel, pos, query_states=query)
        two_steps, _ = layer(h, None, False, rel, pos, query_states=one_step)
    assert max_diff(emd.mlm_head(two_steps), out.mlm_logits) < 1e-5
    assert max_diff(emd.mlm_head(one_step), out.mlm_logits) > 1e-2


def test_emd_injects_absolute_positions_only_at_the_head():
    emd, plain = emd_pair(steps=2)
    assert plain.backbone.embeddings.position_embeddings is None  # relative positions only
    ids = torch.randint(1, 333, (2, 11))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 8] = 5, 9
    with torch.no_grad():
        before = emd(ids, labels=labels, output_hidden_states=True)
        emd.backbone.embeddings.position_embeddings.weight.mul_(2.0)
        after = emd(ids, labels=labels, output_hidden_states=True)
        without = plain(ids, labels=labels)
    assert torch.equal(before.last_hidden_state, after.last_hidden_state)  # encoder unaffected
    assert max_diff(before.mlm_logits, after.mlm_logits) > 1e-2  # the prediction sees positions
    assert max_diff(before.mlm_logits, without.mlm_logits) > 1e-2
    assert before.mlm_logits.shape == (2, 333) and len(before.hidden_states) == 3
    emd.train()
    emd(ids, labels=labels).loss.backward()
    assert emd.backbone.embeddings.position_embeddings.weight.grad.abs().sum() > 0


def test_small_deberta_trains():
    """Backprop through the gathers works: 20 Adam steps fit one masked batch (pre-LN + EMD)."""
    config = small_config(
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        use_emd=True,
        pre_layer_norm=True,
    )
    model = DebertaForMaskedLM(config)
    ids = torch.randint(1, 333, (4, 12))
    labels = torch.where(torch.rand(ids.shape) < 0.3, ids, torch.full_like(ids, -100))
    labels[:, 0] = ids[:, 0]
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        loss = model(ids, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
    for name in ("rel_embeddings", "position_embeddings"):
        grads = [p.grad for n, p in model.named_parameters() if name in n]
        assert grads and all(g is not None and g.abs().sum() > 0 for g in grads), name


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_layer_with_query_states_follows_the_formula(pre_layer_norm):
    """EMD's call DebertaLayer(x, query_states=q): queries and the residual come from q, keys and
    values from x, each through the attention LayerNorm under pre-LN. Checked by hand without
    position terms (softmax(QK^T / sqrt(d)) V), and with them: q = x gives the plain layer."""
    from course_lib.models.deberta import DebertaLayer

    torch.manual_seed(0)
    plain_config = small_config(
        relative_attention=False,
        pos_att_type=[],
        norm_rel_ebd="none",
        position_biased_input=True,
        pre_layer_norm=pre_layer_norm,
    )
    layer = spread(DebertaLayer(plain_config)).eval()
    att = layer.attention
    x, q = torch.randn(2, 7, 60), torch.randn(2, 7, 60)
    with torch.no_grad():
        got, _ = layer(x, None, False, None, None, query_states=q)
        norm = layer.attention_norm if pre_layer_norm else torch.nn.Identity()
        split = att.split_heads
        scores = split(att.query(norm(q))) @ split(att.key(norm(x))).transpose(-1, -2)
        context = (scores / math.sqrt(12)).softmax(-1) @ split(att.value(norm(x)))
        attn = att.output(context.transpose(1, 2).reshape(2, 7, 60))
        if pre_layer_norm:
            h = q + attn
            want = h + layer.feed_forward(layer.output_norm(h))
        else:
            h = layer.attention_norm(q + attn)
            want = layer.output_norm(h + layer.feed_forward(h))
    assert max_diff(got, want) < 1e-5

    model = spread(DebertaModel(small_config(pre_layer_norm=pre_layer_norm))).eval()
    relative = model.encoder.relative_inputs(7, x.device)
    layer = model.encoder.layers[0]
    with torch.no_grad():
        same, _ = layer(x, None, False, *relative, query_states=x)
        plain, _ = layer(x, None, False, *relative)
        other, _ = layer(x, None, False, *relative, query_states=q)
    assert max_diff(same, plain) < 1e-6 and max_diff(other, plain) > 1e-2
