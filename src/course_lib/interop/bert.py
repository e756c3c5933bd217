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
"""

from __future__ import annotations

from typing import Any

from course_lib.config import BertConfig
from course_lib.interop.core import Conversion, register
from course_lib.models import bert as m

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

EMBEDDING_KEYS = [
    ("word_embeddings.weight", "word_embeddings.weight"),
    ("position_embeddings.weight", "position_embeddings.weight"),
    ("token_type_embeddings.weight", "token_type_embeddings.weight"),
    ("LayerNorm.weight", "LayerNorm.weight"),
    ("LayerNorm.bias", "LayerNorm.bias"),
]

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

    if config.pre_layer_norm:
        raise ValueError(
            "transformers' BERT is post-LN; a pre_layer_norm=True model has no equivalent."
        )
    return transformers.BertConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS}, num_labels=config.num_labels
    )


def backbone_table(
    config: BertConfig, ours: str, theirs: str, pooler: bool
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'bert.' or '')."""
    table = [(f"{ours}embeddings.{a}", f"{theirs}embeddings.{b}") for a, b in EMBEDDING_KEYS]
    for i in range(config.num_hidden_layers):
        for a, b in LAYER_KEYS:
            for p in ("weight", "bias"):
                table.append(
                    (f"{ours}encoder.layers.{i}.{a}.{p}", f"{theirs}encoder.layer.{i}.{b}.{p}")
                )
    if pooler:
        table += [
            (f"{ours}pooler.dense.{p}", f"{theirs}pooler.dense.{p}") for p in ("weight", "bias")
        ]
    return table


MLM_KEYS = [
    ("mlm_head.dense.weight", "cls.predictions.transform.dense.weight"),
    ("mlm_head.dense.bias", "cls.predictions.transform.dense.bias"),
    ("mlm_head.LayerNorm.weight", "cls.predictions.transform.LayerNorm.weight"),
    ("mlm_head.LayerNorm.bias", "cls.predictions.transform.LayerNorm.bias"),
    ("mlm_head.decoder.bias", "cls.predictions.bias"),
]
MLM_ALIASES = {  # transformers stores the tied tensors under a second name too
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}
HEAD_KEYS = {
    "BertForMaskedLM": MLM_KEYS,
    "BertForPreTraining": MLM_KEYS
    + [(f"nsp_head.classifier.{p}", f"cls.seq_relationship.{p}") for p in ("weight", "bias")],
    "BertForSequenceClassification": [
        (f"classifier.classifier.{p}", f"classifier.{p}") for p in ("weight", "bias")
    ],
    "BertForTokenClassification": [
        (f"classifier.classifier.{p}", f"classifier.{p}") for p in ("weight", "bias")
    ],
    "BertForQuestionAnswering": [
        (f"qa_head.qa_outputs.{p}", f"qa_outputs.{p}") for p in ("weight", "bias")
    ],
}


def _register_all() -> None:
    register(
        Conversion(
            ours=m.BertModel,
            hf_class_name="BertModel",
            config_from_hf=config_from_hf,
            config_to_hf=config_to_hf,
            key_table=lambda c: backbone_table(c, "", "", pooler=True),
        )
    )
    for cls in (
        m.BertForMaskedLM,
        m.BertForPreTraining,
        m.BertForSequenceClassification,
        m.BertForTokenClassification,
        m.BertForQuestionAnswering,
    ):
        name = cls.__name__
        has_mlm = name in ("BertForMaskedLM", "BertForPreTraining")
        register(
            Conversion(
                ours=cls,
                hf_class_name=name,
                config_from_hf=config_from_hf,
                config_to_hf=config_to_hf,
                key_table=lambda c, cls=cls, name=name: (
                    backbone_table(c, "backbone.", "bert.", pooler=cls.add_pooling_layer)
                    + HEAD_KEYS[name]
                ),
                hf_aliases=(lambda c: MLM_ALIASES) if has_mlm else (lambda c: {}),
            )
        )


_register_all()
