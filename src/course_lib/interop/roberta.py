"""RoBERTa <-> transformers: BERT's table with the prefix `roberta.` and RoBERTa's own heads.

course_lib                                  transformers
backbone.*  (encoder body)                  roberta.*  (same table as BERT's)
mlm_head.dense / LayerNorm / decoder.bias   lm_head.dense / lm_head.layer_norm / lm_head.bias
classifier.dense / out_proj                 classifier.dense / classifier.out_proj
classifier.out_proj (token tagging)         classifier
qa_head.qa_outputs                          qa_outputs
"""

from __future__ import annotations

from typing import Any

from course_lib.config import RobertaConfig
from course_lib.interop import bert
from course_lib.interop.bert import SHARED_FIELDS
from course_lib.interop.core import linear_keys, mlm_keys, require_post_layer_norm
from course_lib.models import roberta as m

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.RobertaModel
HF_PREFIX = "roberta."
backbone_table = bert.backbone_table  # RoBERTa's encoder body is BERT's


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

    require_post_layer_norm(config, "RoBERTa")
    return transformers.RobertaConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS},
        num_labels=config.num_labels,
        classifier_dropout=config.classifier_dropout,
    )


HEAD_KEYS = {
    "RobertaForMaskedLM": mlm_keys("lm_head.dense", "lm_head.layer_norm", "lm_head.bias"),
    "RobertaForSequenceClassification": linear_keys("classifier.dense", "classifier.dense")
    + linear_keys("classifier.out_proj", "classifier.out_proj"),
    "RobertaForTokenClassification": linear_keys("classifier.out_proj", "classifier"),
    "RobertaForQuestionAnswering": linear_keys("qa_head.qa_outputs", "qa_outputs"),
}
MLM_ALIASES = {  # transformers also stores the tied tensors under the decoder's names
    "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
    "lm_head.decoder.bias": "lm_head.bias",
}
