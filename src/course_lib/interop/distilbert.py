"""DistilBERT <-> transformers: config names and the weight-name table.

course_lib                                  transformers
backbone.embeddings.word/position/LayerNorm distilbert.embeddings.* (same names, no token types)
...encoder.layers.{i}.attention.query/key/value/output   ...transformer.layer.{i}.attention.q_lin/k_lin/v_lin/out_lin
...attention_norm / output_norm             ...sa_layer_norm / output_layer_norm
...feed_forward.up / down                   ...ffn.lin1 / ffn.lin2
mlm_head.dense / LayerNorm / decoder.bias   vocab_transform / vocab_layer_norm / vocab_projector.bias
classifier.dense / out_proj                 pre_classifier / classifier  (sequence classification)
classifier.out_proj                         classifier                   (token classification)
qa_head.qa_outputs                          qa_outputs
"""

from __future__ import annotations

from typing import Any

from course_lib.config import DistilBertConfig
from course_lib.interop.core import layer_keys, linear_keys, mlm_keys, require_post_layer_norm
from course_lib.models import distilbert as m

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.DistilBertModel
HF_PREFIX = "distilbert."

# (ours, transformers) config field names
CONFIG_FIELDS = [
    ("vocab_size", "vocab_size"),
    ("hidden_size", "dim"),
    ("num_hidden_layers", "n_layers"),
    ("num_attention_heads", "n_heads"),
    ("intermediate_size", "hidden_dim"),
    ("hidden_act", "activation"),
    ("hidden_dropout_prob", "dropout"),
    ("attention_probs_dropout_prob", "attention_dropout"),
    ("max_position_embeddings", "max_position_embeddings"),
    ("initializer_range", "initializer_range"),
    ("pad_token_id", "pad_token_id"),
    ("qa_dropout", "qa_dropout"),
    ("seq_classif_dropout", "seq_classif_dropout"),
    ("num_labels", "num_labels"),
]
HF_LAYER_NORM_EPS = 1e-12  # hard-coded in transformers' DistilBERT, not a config field


def config_from_hf(hf_config: Any) -> DistilBertConfig:
    if hf_config.sinusoidal_pos_embds:
        raise ValueError(
            "sinusoidal_pos_embds=True is not supported: course_lib's DistilBERT learns its "
            "position embeddings (as distilbert-base does)."
        )
    return DistilBertConfig(
        **{ours: getattr(hf_config, theirs) for ours, theirs in CONFIG_FIELDS},
        layer_norm_eps=HF_LAYER_NORM_EPS,
    )


def config_to_hf(config: DistilBertConfig) -> Any:
    import transformers

    require_post_layer_norm(config, "DistilBERT")
    if config.layer_norm_eps != HF_LAYER_NORM_EPS:
        raise ValueError(
            f"transformers' DistilBERT fixes layer_norm_eps={HF_LAYER_NORM_EPS}; this model has "
            f"{config.layer_norm_eps}, so it would compute something else there."
        )
    return transformers.DistilBertConfig(
        **{theirs: getattr(config, ours) for ours, theirs in CONFIG_FIELDS},
        sinusoidal_pos_embds=False,
    )


LAYER_KEYS = [
    ("attention.query", "attention.q_lin"),
    ("attention.key", "attention.k_lin"),
    ("attention.value", "attention.v_lin"),
    ("attention.output", "attention.out_lin"),
    ("attention_norm", "sa_layer_norm"),
    ("feed_forward.up", "ffn.lin1"),
    ("feed_forward.down", "ffn.lin2"),
    ("output_norm", "output_layer_norm"),
]


def backbone_table(
    config: DistilBertConfig, ours: str, theirs: str, pooler: bool
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'distilbert.' or '').
    DistilBERT has no pooler: `pooler` is False for each of its classes."""
    if pooler:
        raise ValueError("DistilBERT has no pooler.")
    table = [
        (f"{ours}embeddings.{k}", f"{theirs}embeddings.{k}")
        for k in ("word_embeddings.weight", "position_embeddings.weight")
    ]
    table += linear_keys(f"{ours}embeddings.LayerNorm", f"{theirs}embeddings.LayerNorm")
    return table + layer_keys(
        config.num_hidden_layers,
        LAYER_KEYS,
        f"{ours}encoder.layers.",
        f"{theirs}transformer.layer.",
    )


HEAD_KEYS = {
    "DistilBertForMaskedLM": mlm_keys(
        "vocab_transform", "vocab_layer_norm", "vocab_projector.bias"
    ),
    "DistilBertForSequenceClassification": linear_keys("classifier.dense", "pre_classifier")
    + linear_keys("classifier.out_proj", "classifier"),
    "DistilBertForTokenClassification": linear_keys("classifier.out_proj", "classifier"),
    "DistilBertForQuestionAnswering": linear_keys("qa_head.qa_outputs", "qa_outputs"),
}
MLM_ALIASES = {"vocab_projector.weight": "distilbert.embeddings.word_embeddings.weight"}
