"""BERT <-> transformers: the weight-name table and config translation.

course_lib                              transformers
backbone.embeddings.*                   bert.embeddings.*                 (same names)
backbone.encoder.layers.{i}.attention.query   bert.encoder.layer.{i}.attention.self.query
...attention.output                     ...attention.output.dense
...attention_norm                       ...attention.output.LayerNorm
...feed_forward.up / .down              ...intermediate.dense / ...output.dense
...output_norm                          ...output.LayerNorm
mlm_head.dense / LayerNorm / decoder.bias    cls.predictions.transform.dense / .LayerNorm / .bias
nsp_head.classifier                     cls.seq_relationship
classifier.out_proj                     classifier              (sequence and token tasks)
"""

from __future__ import annotations

from typing import Any

from course_lib.config import BertConfig
from course_lib.interop.core import layer_keys, linear_keys, mlm_keys, require_post_layer_norm
from course_lib.models import bert as m

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.BertModel
HF_PREFIX = "bert."

SHARED_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "pad_token_id",
)

EMBEDDING_KEYS = (  # the same names on both sides
    "word_embeddings.weight",
    "position_embeddings.weight",
    "token_type_embeddings.weight",
    "LayerNorm.weight",
    "LayerNorm.bias",
)

LAYER_KEYS = [
    ("attention.query", "attention.self.query"),
    ("attention.key", "attention.self.key"),
    ("attention.value", "attention.self.value"),
    ("attention.output", "attention.output.dense"),
    ("attention_norm", "attention.output.LayerNorm"),
    ("feed_forward.up", "intermediate.dense"),
    ("feed_forward.down", "output.dense"),
    ("output_norm", "output.LayerNorm"),
]


def config_from_hf(hf_config: Any) -> BertConfig:
    if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute position embeddings are supported (BERT's original).")
    return BertConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        num_labels=getattr(hf_config, "num_labels", 2),
    )


def config_to_hf(config: BertConfig) -> Any:
    import transformers

    require_post_layer_norm(config, "BERT")
    return transformers.BertConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS}, num_labels=config.num_labels
    )


def backbone_table(
    config: BertConfig, ours: str, theirs: str, pooler: bool
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'bert.' or '')."""
    table = [(f"{ours}embeddings.{k}", f"{theirs}embeddings.{k}") for k in EMBEDDING_KEYS]
    table += layer_keys(
        config.num_hidden_layers, LAYER_KEYS, f"{ours}encoder.layers.", f"{theirs}encoder.layer."
    )
    if pooler:
        table += linear_keys(f"{ours}pooler.dense", f"{theirs}pooler.dense")
    return table


MLM_ALIASES = {  # transformers stores the tied tensors under a second name too
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}
MLM_KEYS = mlm_keys(
    "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias"
)
HEAD_KEYS = {
    "BertForMaskedLM": MLM_KEYS,
    "BertForPreTraining": MLM_KEYS + linear_keys("nsp_head.classifier", "cls.seq_relationship"),
    "BertForSequenceClassification": linear_keys("classifier.out_proj", "classifier"),
    "BertForTokenClassification": linear_keys("classifier.out_proj", "classifier"),
    "BertForQuestionAnswering": linear_keys("qa_head.qa_outputs", "qa_outputs"),
}
