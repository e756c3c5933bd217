"""RoBERTa <-> transformers: BERT's table with the prefix `roberta.` and RoBERTa's own heads.

course_lib                                  transformers
backbone.*  (encoder body)                  roberta.*  (same table as BERT's)
mlm_head.dense / LayerNorm / decoder.bias   lm_head.dense / lm_head.layer_norm / lm_head.bias
classifier.dense / out_proj                 classifier.dense / classifier.out_proj
classifier.classifier (token tagging)       classifier
qa_head.qa_outputs                          qa_outputs
"""

from __future__ import annotations

from typing import Any

from course_lib.config import RobertaConfig
from course_lib.interop.bert import SHARED_FIELDS, backbone_table
from course_lib.interop.core import Conversion, register
from course_lib.models import roberta as m


def config_from_hf(hf_config: Any) -> RobertaConfig:
    if getattr(hf_config, "position_embedding_type", None) not in (None, "absolute"):
        raise ValueError("only absolute position embeddings are supported (RoBERTa's original).")
    return RobertaConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        num_labels=getattr(hf_config, "num_labels", 2),
        classifier_dropout=getattr(hf_config, "classifier_dropout", None),
    )


def config_to_hf(config: RobertaConfig) -> Any:
    import transformers

    if config.pre_layer_norm:
        raise ValueError(
            "transformers' RoBERTa is post-LN; a pre_layer_norm=True model has no equivalent."
        )
    return transformers.RobertaConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS},
        num_labels=config.num_labels,
        classifier_dropout=config.classifier_dropout,
    )


def _pair(ours: str, theirs: str) -> list[tuple[str, str]]:
    return [(f"{ours}.{p}", f"{theirs}.{p}") for p in ("weight", "bias")]


HEAD_KEYS = {
    "RobertaForMaskedLM": _pair("mlm_head.dense", "lm_head.dense")
    + _pair("mlm_head.LayerNorm", "lm_head.layer_norm")
    + [("mlm_head.decoder.bias", "lm_head.bias")],
    "RobertaForSequenceClassification": _pair("classifier.dense", "classifier.dense")
    + _pair("classifier.out_proj", "classifier.out_proj"),
    "RobertaForTokenClassification": _pair("classifier.classifier", "classifier"),
    "RobertaForQuestionAnswering": _pair("qa_head.qa_outputs", "qa_outputs"),
}
MLM_ALIASES = {  # transformers also stores the tied tensors under the decoder's names
    "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
    "lm_head.decoder.bias": "lm_head.bias",
}


def _register_all() -> None:
    register(
        Conversion(
            ours=m.RobertaModel,
            hf_class_name="RobertaModel",
            config_from_hf=config_from_hf,
            config_to_hf=config_to_hf,
            key_table=lambda c: backbone_table(c, "", "", pooler=True),
        )
    )
    for cls in (
        m.RobertaForMaskedLM,
        m.RobertaForSequenceClassification,
        m.RobertaForTokenClassification,
        m.RobertaForQuestionAnswering,
    ):
        name = cls.__name__
        register(
            Conversion(
                ours=cls,
                hf_class_name=name,
                config_from_hf=config_from_hf,
                config_to_hf=config_to_hf,
                key_table=lambda c, cls=cls, name=name: (
                    backbone_table(c, "backbone.", "roberta.", pooler=cls.add_pooling_layer)
                    + HEAD_KEYS[name]
                ),
                hf_aliases=(lambda c: MLM_ALIASES)
                if name == "RobertaForMaskedLM"
                else (lambda c: {}),
            )
        )


_register_all()
