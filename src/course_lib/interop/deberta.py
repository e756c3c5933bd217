"""DeBERTa <-> transformers' DeBERTa-v2 (which also serves v3): weight-name table and config.

    course_lib                              transformers
    backbone.embeddings.*                   deberta.embeddings.*                (same names)
    backbone.encoder.layers.{i}.            deberta.encoder.layer.{i}.
      attention.query / key / value           attention.self.query_proj / key_proj / value_proj
      attention.pos_key / pos_query           attention.self.pos_key_proj / pos_query_proj
      attention.output / attention_norm       attention.output.dense / attention.output.LayerNorm
      feed_forward.up / down                  intermediate.dense / output.dense
      output_norm                             output.LayerNorm
    backbone.encoder.rel_embeddings         deberta.encoder.rel_embeddings
    backbone.encoder.rel_norm               deberta.encoder.LayerNorm
    backbone.pooler.dense                   pooler.dense                        (classifier only)
    mlm_head.*                              cls.predictions.* (legacy) / lm_predictions.lm_head.*

What transformers' DeBERTa-v2 can do that course_lib's cannot (the ConvLayer of deberta-v2-xlarge,
a factorised embedding_size) is refused with a clear error, and so is the converse (EMD,
pre-LN, the paper's p2c indexing), rather than converting to a different model.
"""

from __future__ import annotations

from typing import Any

from course_lib.config import DebertaConfig
from course_lib.interop import bert
from course_lib.interop.core import layer_keys, linear_keys, mlm_keys
from course_lib.models import deberta as m

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.DebertaModel
HF_PREFIX = "deberta."
SHARED_FIELDS = (
    *bert.SHARED_FIELDS,
    "relative_attention",
    "max_relative_positions",
    "position_biased_input",
    "pooler_dropout",
    "pooler_hidden_act",
    "legacy",
)

LAYER_KEYS = [
    ("attention.query", "attention.self.query_proj"),
    ("attention.key", "attention.self.key_proj"),
    ("attention.value", "attention.self.value_proj"),
    ("attention.output", "attention.output.dense"),
    ("attention_norm", "attention.output.LayerNorm"),
    ("feed_forward.up", "intermediate.dense"),
    ("feed_forward.down", "output.dense"),
    ("output_norm", "output.LayerNorm"),
]
POSITION_PROJECTION_KEYS = {  # only with share_att_key=False, one per position term
    "c2p": ("attention.pos_key", "attention.self.pos_key_proj"),
    "p2c": ("attention.pos_query", "attention.self.pos_query_proj"),
}


def config_from_hf(hf_config: Any) -> DebertaConfig:
    """A DebertaConfig computing exactly what `hf_config` computes, or a ValueError why not."""
    hidden = hf_config.hidden_size
    if getattr(hf_config, "conv_kernel_size", 0) > 0:
        raise ValueError(
            f"conv_kernel_size={hf_config.conv_kernel_size}: the convolution layer of "
            f"deberta-v2-xlarge/xxlarge is not implemented in course_lib; use a DeBERTa-v3 "
            f"checkpoint (conv_kernel_size=0)."
        )
    for name in ("embedding_size", "pooler_hidden_size"):
        value = getattr(hf_config, name, hidden)
        if value != hidden:
            raise ValueError(f"{name}={value} differs from hidden_size={hidden}; not supported.")
    if (
        getattr(hf_config, "attention_head_size", hidden // hf_config.num_attention_heads)
        * (hf_config.num_attention_heads)
        != hidden
    ):
        raise ValueError("attention_head_size * num_attention_heads must equal hidden_size.")
    norms = [x.strip() for x in getattr(hf_config, "norm_rel_ebd", "none").lower().split("|")]
    if not set(norms) <= {"none", "layer_norm"}:
        raise ValueError(f"norm_rel_ebd={hf_config.norm_rel_ebd!r}: only 'layer_norm' or 'none'.")
    pos_att_type = list(hf_config.pos_att_type or [])
    # DeBERTa v1's "p2p" term is ignored by transformers' v2 code: dropping it changes nothing.
    pos_att_type = [t for t in pos_att_type if t != "p2p"]
    if not hf_config.relative_attention and pos_att_type:
        raise ValueError(
            f"relative_attention=False with pos_att_type={pos_att_type}: transformers then "
            f"computes no position terms but still divides by sqrt(d * {1 + len(pos_att_type)}); "
            f"course_lib does not reproduce that combination."
        )
    return DebertaConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        position_buckets=getattr(hf_config, "position_buckets", -1),
        pos_att_type=pos_att_type,
        share_att_key=getattr(hf_config, "share_att_key", False),
        norm_rel_ebd="layer_norm" if "layer_norm" in norms else "none",
        num_labels=getattr(hf_config, "num_labels", 2),
    )


def config_to_hf(config: DebertaConfig) -> Any:
    import transformers

    for flag, why in (
        ("use_emd", "transformers' DebertaV2ForMaskedLM has no enhanced mask decoder"),
        ("paper_p2c", "transformers indexes p2c by δ(i, j), not the paper's δ(j, i)"),
        ("pre_layer_norm", "transformers' DeBERTa is post-LN"),
    ):
        if getattr(config, flag):
            raise ValueError(
                f"{flag}=True has no transformers equivalent ({why}); set it to False."
            )
    return transformers.DebertaV2Config(
        **{f: getattr(config, f) for f in SHARED_FIELDS},
        position_buckets=config.position_buckets,
        pos_att_type=list(config.pos_att_type),
        share_att_key=config.share_att_key,
        norm_rel_ebd=config.norm_rel_ebd,
        conv_kernel_size=0,
        num_labels=config.num_labels,
    )


def backbone_table(
    config: DebertaConfig, ours: str, theirs: str, pooler: bool
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'deberta.' or '')."""
    embeddings = ["word_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias"]
    if config.position_biased_input:
        embeddings.append("position_embeddings.weight")
    if config.type_vocab_size > 0:
        embeddings.append("token_type_embeddings.weight")
    table = [(f"{ours}embeddings.{k}", f"{theirs}embeddings.{k}") for k in embeddings]
    keys = list(LAYER_KEYS)
    if config.relative_attention and not config.share_att_key:
        keys += [POSITION_PROJECTION_KEYS[t] for t in config.pos_att_type]
    table += layer_keys(
        config.num_hidden_layers, keys, f"{ours}encoder.layers.", f"{theirs}encoder.layer."
    )
    if config.relative_attention:
        table.append(
            (f"{ours}encoder.rel_embeddings.weight", f"{theirs}encoder.rel_embeddings.weight")
        )
    if config.norm_rel_ebd == "layer_norm":
        table += linear_keys(f"{ours}encoder.rel_norm", f"{theirs}encoder.LayerNorm")
    if pooler:  # the ContextPooler of classifiers: transformers keeps it beside the backbone
        table += linear_keys(f"{ours}pooler.dense", "pooler.dense")
    return table


def mlm_table(config: DebertaConfig) -> list[tuple[str, str]]:
    """The MLM head: same computation under two transformers layouts (see DebertaConfig.legacy)."""
    if config.legacy:
        return mlm_keys(
            "cls.predictions.transform.dense",
            "cls.predictions.transform.LayerNorm",
            "cls.predictions.bias",
        )
    return mlm_keys(
        "lm_predictions.lm_head.dense",
        "lm_predictions.lm_head.LayerNorm",
        "lm_predictions.lm_head.bias",
    )


def mlm_aliases(config: DebertaConfig) -> dict[str, str]:
    """The legacy layout stores the tied decoder weight and bias under a second name too."""
    if not config.legacy:
        return {}
    return {
        "cls.predictions.decoder.weight": "deberta.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }


MLM_ALIASES = mlm_aliases
HEAD_KEYS = {
    "DebertaForMaskedLM": mlm_table,
    "DebertaForSequenceClassification": linear_keys("classifier.out_proj", "classifier"),
    "DebertaForTokenClassification": linear_keys("classifier.out_proj", "classifier"),
    "DebertaForQuestionAnswering": linear_keys("qa_head.qa_outputs", "qa_outputs"),
}
# transformers' DeBERTa-v2 classes (which also serve v3), by our names.
HF_NAMES = {name: name.replace("Deberta", "DebertaV2", 1) for name in ("DebertaModel", *HEAD_KEYS)}
