"""course_lib: the encoder-only family (BERT, RoBERTa, ALBERT, DeBERTa, DistilBERT, ELECTRA,
ModernBERT) from parts; README.md next to this file maps which file holds which idea.

Each of the seven families' config, base model and pretraining model(s) is importable from
here; the fine-tuning task models (ForSequenceClassification, ...) from course_lib.models.

>>> from course_lib import BertConfig, BertForMaskedLM, count_parameters
>>> config = BertConfig.from_preset("bert-base")
>>> count_parameters(config, "BertModel")["total"]
109482240
"""

from course_lib._versions import VersionWarning, warn_if_outdated

# Before anything else: an older transformers (or torch, tokenizers, safetensors) than the suite is
# tested with is named in one line here, not found later as a parity cell failing obscurely.
warn_if_outdated()

from course_lib.config import (  # noqa: E402
    CONFIG_CLASSES,
    AlbertConfig,
    BertConfig,
    DebertaConfig,
    DistilBertConfig,
    ElectraConfig,
    ModernBertConfig,
    RobertaConfig,
)
from course_lib.counting import count_parameters  # noqa: E402
from course_lib.interop import from_transformers, to_transformers  # noqa: E402

# Each family's base model and pretraining model(s); the fine-tuning heads
# (ForSequenceClassification, ...) are in course_lib.models with every other class.
from course_lib.models import (  # noqa: E402
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
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraModel,
    ModelOutput,
    ModernBertForMaskedLM,
    ModernBertModel,
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
    "ElectraConfig",
    "ElectraForMaskedLM",
    "ElectraForPreTraining",
    "ElectraModel",
    "ModernBertConfig",
    "ModernBertForMaskedLM",
    "ModernBertModel",
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
    "VersionWarning",
]
__version__ = "0.1.0"
