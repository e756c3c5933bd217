"""ModernBERT: equal to transformers' (padded batches, with and without unpadding), exact round
trips and parameter counts, and the parts proven on their own (rotary embeddings are relative,
the block-wise sliding window equals the masked full attention, unpadding changes nothing).

Random-init transformers models are built from small configs (never downloaded).
"""

import zlib

import pytest
import torch
import transformers

from course_lib import from_transformers, to_transformers
from course_lib.config import ModernBertConfig, config_from_dict
from course_lib.counting import count_parameters
from course_lib.interop.modernbert import config_to_hf
from course_lib.models import MODEL_CLASSES, ModernBertForMaskedLM, ModernBertModel
from course_lib.modules.attention import additive_mask, scaled_dot_product_attention
from course_lib.modules.local_attention import sliding_window_attention, sliding_window_mask
from course_lib.modules.rotary import RotaryEmbedding, apply_rotary
from course_lib.modules.unpadding import pack

CLASSES = ["ModernBertModel", "ModernBertForMaskedLM"]
CONFIGS = {
    # 13 tokens, window |i - j| <= 1: the block-wise local path (13 > 8 * 1), 13 blocks
    "h48-heads4-w2-every3": dict(
        hidden_size=48, num_attention_heads=4, num_hidden_layers=4, local_attention=2
    ),
    # every bias switched on, other activations, local every other layer, window |i - j| <= 5:
    # 13 <= 8 * 5 tokens, so the band is a mask on the full scores
    "h32-heads2-w10-every2-biases": dict(
        hidden_size=32,
        num_attention_heads=2,
        num_hidden_layers=3,
        local_attention=10,
        global_attn_every_n_layers=2,
        norm_bias=True,
        attention_bias=True,
        mlp_bias=True,
        classifier_bias=True,
        hidden_activation="gelu_new",
        classifier_activation="silu",
    ),
    # the released window (128) covers the whole sequence: local layers take the global path
    "h64-heads4-w128": dict(
        hidden_size=64, num_attention_heads=4, num_hidden_layers=3, local_attention=128
    ),
}
SMALL = dict(
    vocab_size=211,
    intermediate_size=40,
    max_position_embeddings=64,
    local_attention=4,
    pad_token_id=0,
    global_rope_theta=1000.0,
    local_rope_theta=100.0,
)
TOL = 2e-5


def small_config(name: str, **changes) -> ModernBertConfig:
    return ModernBertConfig(**{**SMALL, **CONFIGS[name], **changes})


def hf_model(cls_name: str, config_name: str, attn: str = "eager"):
    """A random transformers model; its norms are perturbed so that no weight is trivially 1."""
    hf_config = config_to_hf(small_config(config_name))
    hf_config._attn_implementation = attn
    torch.manual_seed(zlib.crc32(f"{cls_name}/{config_name}".encode()) % 1000)
    model = getattr(transformers, cls_name)(hf_config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def padded_batch(vocab=211, seq=13):
    """Odd length; row 1 right-padded to 9 tokens, row 2 left-padded to 8."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab, (3, seq), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, :5] = 0
    ids[mask == 0] = 0
    return dict(input_ids=ids, attention_mask=mask)


def max_diff(a, b):
    return (a - b).abs().max().item()


def final_output(cls_name, out):
    return out.last_hidden_state if cls_name == "ModernBertModel" else out.mlm_logits


def theirs_output(cls_name, out):
    return out.last_hidden_state if cls_name == "ModernBertModel" else out.logits


@pytest.mark.parametrize("unpad", [False, True], ids=["padded", "unpadded"])
@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, config_name, unpad):
    """Every hidden state and attention map (eager) and the output (sdpa) at the real tokens."""
    hf = hf_model(cls_name, config_name)
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name
    ours.config.unpad = unpad
    batch = padded_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
        fast = ours(**batch)  # no maps: SDPA and the block-wise local path
        hf_sdpa = to_transformers(ours).eval()  # the same weights, transformers' default SDPA
        assert hf_sdpa.config._attn_implementation == "sdpa"
        theirs_sdpa = hf_sdpa(**batch)
    assert len(mine.hidden_states) == len(theirs.hidden_states) == ours.config.num_hidden_layers + 1
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a[real], b[real]) < TOL
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape
        # rows of real queries (padded queries are never read); columns at padding are 0 in both
        assert max_diff(a.transpose(1, 2)[real], b.transpose(1, 2)[real]) < TOL
    for out in (mine, fast):
        assert (
            max_diff(final_output(cls_name, out)[real], theirs_output(cls_name, theirs)[real]) < TOL
        )
    assert (
        max_diff(final_output(cls_name, fast)[real], theirs_output(cls_name, theirs_sdpa)[real])
        < TOL
    )


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name, config_name):
    hf = hf_model(cls_name, config_name)
    ours = from_transformers(hf)
    assert ours.config == small_config(config_name)
    back = to_transformers(ours)
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_mlm_loss_equals_transformers_and_decoder_is_tied():
    hf = hf_model("ModernBertForMaskedLM", "h48-heads4-w2-every3")
    ours = from_transformers(hf)
    batch = padded_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 12]] = batch["input_ids"][0, [1, 4, 12]]
    labels[2, 7] = 17
    with torch.no_grad():
        theirs = hf(**batch, labels=labels)
        mine = ours(**batch, labels=labels)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    assert mine.mlm_logits.shape == (4, 211)  # gathered at the masked positions
    assert max_diff(mine.mlm_logits, theirs.logits[labels != -100]) < TOL
    assert ours.mlm_head.decoder.weight is ours.backbone.embeddings.word_embeddings.weight


@pytest.mark.parametrize("t, w", [(13, 2), (16, 4), (17, 3), (5, 1)])
def test_block_wise_sliding_window_equals_masked_full_attention(t, w):
    g = torch.Generator().manual_seed(t * 10 + w)
    q, k, v = (torch.randn(2, 3, t, 8, generator=g) for _ in range(3))
    keep = torch.ones(2, t, dtype=torch.bool)
    keep[1, t - 3 :] = False
    allowed = sliding_window_mask(t, w) & keep[:, None, None, :]
    expected, probs = scaled_dot_product_attention(q, k, v, additive_mask(allowed, q.dtype))
    got = sliding_window_attention(q, k, v, keep, w)
    assert max_diff(got[0], expected[0]) < 1e-6
    assert max_diff(got[1, :, : t - 3], expected[1, :, : t - 3]) < 1e-6  # real queries
    # and the band is what it says: token 0 never sees token w + 1
    assert probs[0, :, 0, w + 1 :].abs().max() == 0


def test_rotary_scores_depend_on_relative_position_only():
    rope = RotaryEmbedding(head_dim=16, theta=10_000.0)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)

    def score(i, j):
        cos, sin = rope(torch.tensor([i, j]))
        return apply_rotary(q, cos[0], sin[0]) @ apply_rotary(k, cos[1], sin[1])

    for i, j in [(0, 3), (5, 1), (7, 7)]:
        for shift in (1, 10, 500):
            assert abs(score(i, j) - score(i + shift, j + shift)) < 1e-4
    assert abs(score(0, 3) - score(0, 4)) > 1e-3  # but the distance itself matters


def test_unpadding_changes_no_output_and_no_gradient():
    config = ModernBertConfig(**{**SMALL, **CONFIGS["h48-heads4-w2-every3"]})
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(config)
    batch = padded_batch()
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    real = batch["attention_mask"].bool()
    results = {}
    for unpad in (False, True):
        model.config.unpad = unpad
        model.zero_grad()
        out = model(**batch, labels=labels, output_hidden_states=True)
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        results[unpad] = (out, grads)
    (a, ga), (b, gb) = results[False], results[True]
    assert abs(a.loss.item() - b.loss.item()) < 1e-6
    assert max_diff(a.mlm_logits, b.mlm_logits) < 1e-5
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert max_diff(x[real], y[real]) < 1e-5
        assert y[~real].abs().max() == 0  # unpadded: padding positions were never computed
    for name in ga:
        assert max_diff(ga[name], gb[name]) < 1e-5, name


def test_pack_puts_tokens_back_and_refuses_holes():
    x = torch.arange(2 * 5, dtype=torch.float).view(2, 5, 1)
    keep = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]]).bool()
    packed, packing = pack(x, keep)
    assert packed.flatten().tolist() == [0, 1, 2, 6, 7, 8, 9]
    assert packing.cu_seqlens == [0, 3, 7]
    assert packing.positions.tolist() == [0, 1, 2, 1, 2, 3, 4]  # columns, as unpadded
    assert torch.equal(packing.unpack(packed), x * keep[..., None])
    with pytest.raises(ValueError, match=r"contiguous block.*rows \[0\]"):
        pack(x, torch.tensor([[1, 0, 1, 0, 0], [1, 1, 1, 1, 1]]).bool())


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_count_parameters_is_exact(cls_name, config_name):
    config = small_config(config_name)
    model = MODEL_CLASSES[cls_name](config)
    assert count_parameters(config, cls_name)["total"] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "preset, cls, expected",
    [
        # Published: ModernBERT-base 149M, ModernBERT-large 395M (Warner et al. 2024)
        ("modernbert-base", ModernBertModel, 149_014_272),
        ("modernbert-base", ModernBertForMaskedLM, 149_655_232),
        ("modernbert-large", ModernBertModel, 394_781_696),
        ("modernbert-large", ModernBertForMaskedLM, 395_881_664),
    ],
)
def test_published_sizes(preset, cls, expected):
    """Built on the meta device (no memory): ours, transformers' and the formula agree."""
    config = ModernBertConfig.from_preset(preset)
    assert count_parameters(config, cls)["total"] == expected
    with torch.device("meta"):
        ours = cls(config)
        theirs = getattr(transformers, cls.__name__)(config_to_hf(config))
    assert sum(p.numel() for p in ours.parameters()) == expected
    assert sum(p.numel() for p in theirs.parameters()) == expected
    # The paper's 149M / 395M are the encoders (ModernBertModel); the MLM head adds H^2 + H + V.
    if cls is ModernBertModel:
        assert round(expected / 1e6) == {"modernbert-base": 149, "modernbert-large": 395}[preset]


def test_config_round_trip_and_errors():
    config = small_config("h32-heads2-w10-every2-biases", unpad=True)
    assert config_from_dict(config.to_dict()) == config
    assert [config.is_global(i) for i in range(4)] == [True, False, True, False]
    with pytest.raises(ValueError, match="local_attention=5"):
        small_config("h48-heads4-w2-every3", local_attention=5)
    with pytest.raises(ValueError, match="must be even"):
        ModernBertConfig(hidden_size=36, num_attention_heads=4)  # head size 9
    with pytest.raises(ValueError, match="hidden_activation"):
        ModernBertConfig(hidden_activation="swish")
    with pytest.raises(ValueError, match="no pooler"):
        ModernBertModel(config, add_pooling_layer=True)


def test_segment_ids_are_refused_and_odd_layer_patterns_do_not_convert():
    model = ModernBertModel(small_config("h48-heads4-w2-every3"))
    batch = padded_batch()
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        model(**batch, token_type_ids=torch.ones_like(batch["input_ids"]))
    hf_config = config_to_hf(small_config("h48-heads4-w2-every3"))
    hf_config.layer_types = ["sliding_attention", "full_attention"] * 2
    with pytest.raises(ValueError, match="global every n-th layer"):
        from_transformers(transformers.ModernBertModel(hf_config))
