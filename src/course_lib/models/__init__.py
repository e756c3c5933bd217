"""Model classes of every family, and registries by class name and by model_type (used by
checkpoints, the command line and interop)."""

from course_lib.config import (
    CONFIG_CLASSES,
    AlbertConfig,
    DebertaConfig,
    DistilBertConfig,
    RobertaConfig,
    config_from_dict,
)
from course_lib.models.albert import (
    ALBERT_CLASSES,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
)
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from course_lib.models.deberta import (
    DebertaForMaskedLM,
    DebertaForQuestionAnswering,
    DebertaForSequenceClassification,
    DebertaForTokenClassification,
    DebertaModel,
)
from course_lib.models.distilbert import (
    DistilBertForMaskedLM,
    DistilBertForQuestionAnswering,
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    DistilBertModel,
)
from course_lib.models.outputs import ModelOutput
from course_lib.models.roberta import (
    RobertaForMaskedLM,
    RobertaForQuestionAnswering,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    RobertaModel,
)


def _by_name(*classes: type) -> dict[str, type]:
    return {cls.__name__: cls for cls in classes}


BERT_CLASSES = _by_name(
    BertModel,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertForQuestionAnswering,
)
ROBERTA_CLASSES = _by_name(
    RobertaModel,
    RobertaForMaskedLM,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    RobertaForQuestionAnswering,
)
DEBERTA_CLASSES = _by_name(
    DebertaModel,
    DebertaForMaskedLM,
    DebertaForSequenceClassification,
    DebertaForTokenClassification,
    DebertaForQuestionAnswering,
)
DISTILBERT_CLASSES = _by_name(
    DistilBertModel,
    DistilBertForMaskedLM,
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    DistilBertForQuestionAnswering,
)

MODEL_CLASSES: dict[str, type] = {
    **BERT_CLASSES,
    **ROBERTA_CLASSES,
    **ALBERT_CLASSES,
    **DEBERTA_CLASSES,
    **DISTILBERT_CLASSES,
}

__all__ = [
    "CONFIG_CLASSES",
    "MODEL_CLASSES",
    "AlbertConfig",
    "AlbertForMaskedLM",
    "AlbertForPreTraining",
    "AlbertForQuestionAnswering",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertModel",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "DebertaConfig",
    "DebertaForMaskedLM",
    "DebertaForQuestionAnswering",
    "DebertaForSequenceClassification",
    "DebertaForTokenClassification",
    "DebertaModel",
    "DistilBertConfig",
    "DistilBertForMaskedLM",
    "DistilBertForQuestionAnswering",
    "DistilBertForSequenceClassification",
    "DistilBertForTokenClassification",
    "DistilBertModel",
    "ModelOutput",
    "RobertaConfig",
    "RobertaForMaskedLM",
    "RobertaForQuestionAnswering",
    "RobertaForSequenceClassification",
    "RobertaForTokenClassification",
    "RobertaModel",
    "config_from_dict",
]
