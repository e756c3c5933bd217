"""DistilBERT <-> transformers: config names and the weight-name table.

course_lib                                  transformers
backbone.embeddings.word/position/LayerNorm distilbert.embeddings.* (same names, no token types)
...encoder.layers.{i}.attention.query/key/value/output   ...transformer.layer.{i}.attention.q_lin/k_lin/v_lin/out_lin
...attention_norm / output_norm             ...sa_layer_norm / output_layer_norm
...feed_forward.up / down                   ...ffn.lin1 / ffn.lin2
mlm_head.dense / LayerNorm / decoder.bias   vocab_transform / vocab_layer_norm / vocab_projector.bias
classifier.pre_classifier / classifier      pre_classifier / classifier  (sequence classification)
classifier.classifier                       classifier                   (token classification)
qa_head.qa_outputs                          qa_outputs
"""

from __future__ import annotations

from typing import Any

from course_lib.config import DistilBertConfig
from course_lib.interop.core import Conversion, register
from course_lib.models import distilbert as m

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

    if config.pre_layer_norm:
        raise ValueError(
            "transformers' DistilBERT is post-LN; a pre_layer_norm=True model has no equivalent."
        )
    if config.layer_norm_eps != HF_LAYER_NORM_EPS:
        raise ValueError(
            f"transformers' DistilBERT fixes layer_norm_eps={HF_LAYER_NORM_EPS}; this model has "
            f"{config.layer_norm_eps}, so it would compute something else there."
        )
    return transformers.DistilBertConfig(
        **{theirs: getattr(config, ours) for ours, theirs in CONFIG_FIELDS},
        sinusoidal_pos_embds=False,
    )


def _pair(ours: str, theirs: str) -> list[tuple[str, str]]:
    return [(f"{ours}.{p}", f"{theirs}.{p}") for p in ("weight", "bias")]


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


def backbone_table(config: DistilBertConfig, ours: str, theirs: str) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'distilbert.' or '')."""
    table = [("word_embeddings.weight",) * 2, ("position_embeddings.weight",) * 2]
    table = [(f"{ours}embeddings.{a}", f"{theirs}embeddings.{b}") for a, b in table]
    table += _pair(f"{ours}embeddings.LayerNorm", f"{theirs}embeddings.LayerNorm")
    for i in range(config.num_hidden_layers):
        for a, b in LAYER_KEYS:
            table += _pair(f"{ours}encoder.layers.{i}.{a}", f"{theirs}transformer.layer.{i}.{b}")
    return table


HEAD_KEYS = {
    "DistilBertModel": [],
    "DistilBertForMaskedLM": _pair("mlm_head.dense", "vocab_transform")
    + _pair("mlm_head.LayerNorm", "vocab_layer_norm")
    + [("mlm_head.decoder.bias", "vocab_projector.bias")],
    "DistilBertForSequenceClassification": _pair("classifier.pre_classifier", "pre_classifier")
    + _pair("classifier.classifier", "classifier"),
    "DistilBertForTokenClassification": _pair("classifier.classifier", "classifier"),
    "DistilBertForQuestionAnswering": _pair("qa_head.qa_outputs", "qa_outputs"),
}
MLM_ALIASES = {"vocab_projector.weight": "distilbert.embeddings.word_embeddings.weight"}


def _register_all() -> None:
    for cls in (
        m.DistilBertModel,
        m.DistilBertForMaskedLM,
        m.DistilBertForSequenceClassification,
        m.DistilBertForTokenClassification,
        m.DistilBertForQuestionAnswering,
    ):
        name = cls.__name__
        prefix = ("", "") if name == "DistilBertModel" else ("backbone.", "distilbert.")
        register(
            Conversion(
                ours=cls,
                hf_class_name=name,
                config_from_hf=config_from_hf,
                config_to_hf=config_to_hf,
                key_table=lambda c, name=name, prefix=prefix: (
                    backbone_table(c, *prefix) + HEAD_KEYS[name]
                ),
                hf_aliases=(lambda c: MLM_ALIASES)
                if name == "DistilBertForMaskedLM"
                else (lambda c: {}),
            )
        )


_register_all()
