"""course_lib: the encoder-only family (BERT, RoBERTa, ALBERT, DeBERTa, DistilBERT) from parts.

>>> from course_lib import BertConfig, BertForMaskedLM, count_parameters
>>> config = BertConfig.from_preset("bert-base")
>>> count_parameters(config, "BertModel")["total"]
109482240
"""

from course_lib.config import BertConfig
from course_lib.counting import count_parameters
from course_lib.interop import from_transformers, to_transformers
from course_lib.models import (
    CONFIG_CLASSES,
    MODEL_CLASSES,
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertModel,
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    DebertaConfig,
    DebertaForMaskedLM,
    DebertaModel,
    DistilBertConfig,
    DistilBertForMaskedLM,
    DistilBertModel,
    ModelOutput,
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaModel,
)

__all__ = [
    "CONFIG_CLASSES",
    "MODEL_CLASSES",
    "AlbertConfig",
    "AlbertForMaskedLM",
    "AlbertForPreTraining",
    "AlbertModel",
    "BertConfig",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "DebertaConfig",
    "DebertaForMaskedLM",
    "DebertaModel",
    "DistilBertConfig",
    "DistilBertForMaskedLM",
    "DistilBertModel",
    "ModelOutput",
    "RobertaConfig",
    "RobertaForMaskedLM",
    "RobertaModel",
    "count_parameters",
    "from_transformers",
    "to_transformers",
]
__version__ = "0.1.0"
