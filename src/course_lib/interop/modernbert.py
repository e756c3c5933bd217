"""ModernBERT <-> transformers: the weight-name table and config translation.

    course_lib                                    transformers
    backbone.embeddings.word_embeddings / norm    model.embeddings.tok_embeddings / norm
    backbone.encoder.layers.{i}.attention_norm    model.layers.{i}.attn_norm   (none in layer 0)
      attention.qkv / attention.output              attn.Wqkv / attn.Wo
      output_norm                                   mlp_norm
      feed_forward.up / feed_forward.down           mlp.Wi / mlp.Wo
    backbone.encoder.final_norm                   model.final_norm
    mlm_head.dense / norm / decoder.bias          head.dense / head.norm / decoder.bias

Biases appear only where the config switches them on (ModernBERT as released has none but the
decoder's). transformers lists the layer kinds (`layer_types`) and a rotary base per kind
(`rope_parameters`); course_lib keeps the released pattern `global_attn_every_n_layers` and
the two thetas, so only those patterns convert.
"""

from __future__ import annotations

from typing import Any

from course_lib.config.modernbert import ModernBertConfig
from course_lib.models import modernbert as m

BASE = m.ModernBertModel
HF_PREFIX = "model."

SHARED_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "hidden_activation",
    "max_position_embeddings",
    "initializer_range",
    "initializer_cutoff_factor",
    "norm_eps",
    "norm_bias",
    "pad_token_id",
    "local_attention",
    "attention_bias",
    "attention_dropout",
    "embedding_dropout",
    "mlp_bias",
    "mlp_dropout",
    "decoder_bias",
    "classifier_bias",
    "classifier_activation",
)
# transformers' special-token ids (ModernBERT's tokenizer); None where the vocabulary is smaller.
SPECIAL_TOKENS = {
    "bos_token_id": 50281,
    "cls_token_id": 50281,
    "eos_token_id": 50282,
    "sep_token_id": 50282,
}


def layer_types(config: ModernBertConfig) -> list[str]:
    """transformers' per-layer kinds for our `global_attn_every_n_layers`."""
    return [
        "full_attention" if config.is_global(i) else "sliding_attention"
        for i in range(config.num_hidden_layers)
    ]


def config_from_hf(hf_config: Any) -> ModernBertConfig:
    kinds = list(hf_config.layer_types)
    every = next(
        (
            n
            for n in range(1, len(kinds) + 1)
            if all((i % n == 0) == (k == "full_attention") for i, k in enumerate(kinds))
        ),
        None,
    )
    if every is None:
        raise ValueError(
            f"layer_types={kinds} is not 'global every n-th layer from layer 0'; course_lib's "
            f"ModernBERT has only that pattern (global_attn_every_n_layers)."
        )
    rope = hf_config.rope_parameters
    thetas = {}
    for kind, name in (
        ("full_attention", "global_rope_theta"),
        ("sliding_attention", "local_rope_theta"),
    ):
        params = rope.get(kind) or {
            "rope_type": "default",
            "rope_theta": getattr(ModernBertConfig, name),
        }
        if params.get("rope_type", "default") != "default":
            raise ValueError(
                f"rope_type={params['rope_type']!r} for {kind}: only the default rotary "
                f"embedding (ModernBERT as released) is supported."
            )
        thetas[name] = float(params["rope_theta"])
    if not getattr(hf_config, "tie_word_embeddings", True):
        raise ValueError("course_lib's ModernBERT ties the decoder to the token embeddings.")
    return ModernBertConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        global_attn_every_n_layers=every,
        **thetas,
    )


def config_to_hf(config: ModernBertConfig) -> Any:
    import transformers

    return transformers.ModernBertConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS},
        layer_types=layer_types(config),
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": config.global_rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": config.local_rope_theta},
        },
        **{k: (v if v < config.vocab_size else None) for k, v in SPECIAL_TOKENS.items()},
    )


def _module(ours: str, theirs: str, bias: bool) -> list[tuple[str, str]]:
    """The weight (and the bias, when there is one) of a Linear or LayerNorm."""
    return [(f"{ours}.{p}", f"{theirs}.{p}") for p in (("weight", "bias") if bias else ("weight",))]


def backbone_table(
    config: ModernBertConfig, ours: str, theirs: str, pooler: bool = False
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'model.' or '').
    ModernBERT has no pooler (`pooler` is always False)."""
    nb, ab, mb = config.norm_bias, config.attention_bias, config.mlp_bias
    table = [
        (f"{ours}embeddings.word_embeddings.weight", f"{theirs}embeddings.tok_embeddings.weight")
    ]
    table += _module(f"{ours}embeddings.norm", f"{theirs}embeddings.norm", nb)
    for i in range(config.num_hidden_layers):
        a, b = f"{ours}encoder.layers.{i}.", f"{theirs}layers.{i}."
        if i > 0:
            table += _module(f"{a}attention_norm", f"{b}attn_norm", nb)
        table += _module(f"{a}attention.qkv", f"{b}attn.Wqkv", ab)
        table += _module(f"{a}attention.output", f"{b}attn.Wo", ab)
        table += _module(f"{a}output_norm", f"{b}mlp_norm", nb)
        table += _module(f"{a}feed_forward.up", f"{b}mlp.Wi", mb)
        table += _module(f"{a}feed_forward.down", f"{b}mlp.Wo", mb)
    table += _module(f"{ours}encoder.final_norm", f"{theirs}final_norm", nb)
    return table


def mlm_table(config: ModernBertConfig) -> list[tuple[str, str]]:
    table = _module("mlm_head.dense", "head.dense", config.classifier_bias)
    table += _module("mlm_head.norm", "head.norm", config.norm_bias)
    if config.decoder_bias:
        table.append(("mlm_head.decoder.bias", "decoder.bias"))
    return table


# transformers stores the tied decoder weight under a second name too
MLM_ALIASES = {"decoder.weight": "model.embeddings.tok_embeddings.weight"}
HEAD_KEYS = {"ModernBertForMaskedLM": mlm_table}
