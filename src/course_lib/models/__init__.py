"""Model classes of every family, and registries by class name and by model_type (used by
checkpoints, the command line and interop)."""

from types import ModuleType

from course_lib.config import (
    CONFIG_CLASSES,
    AlbertConfig,
    DebertaConfig,
    DistilBertConfig,
    RobertaConfig,
    config_from_dict,
)
from course_lib.models import albert, bert, deberta, distilbert, electra, modernbert, roberta
from course_lib.models.albert import (
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
from course_lib.models.electra import ElectraForMaskedLM, ElectraForPreTraining, ElectraModel
from course_lib.models.modernbert import ModernBertForMaskedLM, ModernBertModel
from course_lib.models.outputs import ModelOutput
from course_lib.models.roberta import (
    RobertaForMaskedLM,
    RobertaForQuestionAnswering,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    RobertaModel,
)


def _family(module: ModuleType, prefix: str) -> dict[str, type]:
    """A family module's model classes by name: `{prefix}Model` and the `{prefix}For...` tasks."""
    return {
        name: cls
        for name, cls in vars(module).items()
        if name == f"{prefix}Model" or name.startswith(f"{prefix}For")
    }


BERT_CLASSES = _family(bert, "Bert")
ROBERTA_CLASSES = _family(roberta, "Roberta")
ALBERT_CLASSES = _family(albert, "Albert")
DEBERTA_CLASSES = _family(deberta, "Deberta")
DISTILBERT_CLASSES = _family(distilbert, "DistilBert")
ELECTRA_CLASSES = _family(electra, "Electra")
MODERNBERT_CLASSES = _family(modernbert, "ModernBert")

MODEL_CLASSES: dict[str, type] = {
    **BERT_CLASSES,
    **ROBERTA_CLASSES,
    **ALBERT_CLASSES,
    **DEBERTA_CLASSES,
    **DISTILBERT_CLASSES,
    **ELECTRA_CLASSES,
    **MODERNBERT_CLASSES,
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
    "ElectraForMaskedLM",
    "ElectraForPreTraining",
    "ElectraModel",
    "ModelOutput",
    "ModernBertForMaskedLM",
    "ModernBertModel",
    "RobertaConfig",
    "RobertaForMaskedLM",
    "RobertaForQuestionAnswering",
    "RobertaForSequenceClassification",
    "RobertaForTokenClassification",
    "RobertaModel",
    "config_from_dict",
]
