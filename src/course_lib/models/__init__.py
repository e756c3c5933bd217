"""Model classes of every family, and a registry by class name (used by checkpoints and interop)."""

from course_lib.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from course_lib.models.outputs import ModelOutput

MODEL_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        BertModel,
        BertForMaskedLM,
        BertForPreTraining,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
    )
}

__all__ = [
    "MODEL_CLASSES",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "ModelOutput",
]
