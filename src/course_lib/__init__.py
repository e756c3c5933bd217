"""course_lib: the encoder-only family (BERT, RoBERTa, ALBERT, DeBERTa, DistilBERT) from parts.

>>> from course_lib import BertConfig, BertForMaskedLM, count_parameters
>>> config = BertConfig.from_preset("bert-base")
>>> count_parameters(config, "BertModel")["total"]
109482240
"""

from course_lib.config import (
    CONFIG_CLASSES,
    AlbertConfig,
    BertConfig,
    DebertaConfig,
    DistilBertConfig,
    RobertaConfig,
)
from course_lib.counting import count_parameters
from course_lib.interop import from_transformers, to_transformers

# Each family's base model and pretraining model(s); the fine-tuning heads
# (ForSequenceClassification, ...) are in course_lib.models with every other class.
from course_lib.models import (
    MODEL_CLASSES,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertModel,
    BertForMaskedLM,
    BertForPreTraining,
    BertModel,
    DebertaForMaskedLM,
    DebertaModel,
    DistilBertForMaskedLM,
    DistilBertModel,
    ModelOutput,
    RobertaForMaskedLM,
    RobertaModel,
)

__all__ = [
    # the families: config, base model, pretraining model(s)
    "AlbertConfig",
    "AlbertForMaskedLM",
    "AlbertForPreTraining",
    "AlbertModel",
    "BertConfig",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertModel",
    "DebertaConfig",
    "DebertaForMaskedLM",
    "DebertaModel",
    "DistilBertConfig",
    "DistilBertForMaskedLM",
    "DistilBertModel",
    "RobertaConfig",
    "RobertaForMaskedLM",
    "RobertaModel",
    # registries by name, outputs, counting and conversion
    "CONFIG_CLASSES",
    "MODEL_CLASSES",
    "ModelOutput",
    "count_parameters",
    "from_transformers",
    "to_transformers",
]
__version__ = "0.1.0"
