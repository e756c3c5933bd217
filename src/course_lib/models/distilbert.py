"""DistilBERT as a diff from BERT (Sanh et al. 2019): the same layers, half as many (6 for a
12-layer teacher), no segment embeddings, no pooler; it is trained by distillation from a BERT
teacher (course_lib.objectives.distillation, which also builds the student from one teacher
layer out of two: `init_student_from_teacher`).

Config field names stay BERT's (interop maps them to transformers' dim / n_layers / ...).
Differences in training mode only: transformers' DistilBERT has no dropout after the attention
output projection (BERT's layer, reused here, has one), and dropout before its QA head (kept).
"""

from __future__ import annotations

from torch import Tensor, nn

from course_lib.config import DistilBertConfig
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    QuestionAnsweringHead,
)
from course_lib.models.roberta import FirstTokenClassificationHead


class DistilBertModel(BertModel):
    """BERT without token-type embeddings (type_vocab_size=0) and without a pooler."""

    config_class = DistilBertConfig

    def __init__(self, config: DistilBertConfig, add_pooling_layer: bool = False) -> None:
        if add_pooling_layer:
            raise ValueError("DistilBERT has no pooler; build it with add_pooling_layer=False.")
        super().__init__(config, add_pooling_layer=False)


class DistilBertClassificationHead(FirstTokenClassificationHead):
    """dense (transformers' `pre_classifier`), ReLU, dropout, out_proj (its `classifier`) on the
    [CLS] vector, which the head reads itself, as DistilBERT has no pooler."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config, "relu", config.seq_classif_dropout, dropout_first=False)


class DistilBertQuestionAnsweringHead(QuestionAnsweringHead):
    """BERT's span head with dropout (qa_dropout) on the hidden states first."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config)
        self.dropout = nn.Dropout(config.qa_dropout)

    def forward(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        return super().forward(self.dropout(hidden))


# Each task model names what it changes relative to its BERT parent: the config, the backbone,
# and the head that differs.


class DistilBertForMaskedLM(BertForMaskedLM):
    """BERT's MLM head exactly (transformers: vocab_transform, activation, vocab_layer_norm,
    vocab_projector tied to the word embeddings)."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel


class DistilBertForSequenceClassification(BertForSequenceClassification):
    """One label per sequence, from the [CLS] vector through DistilBERT's head (no pooler)."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel
    add_pooling_layer = False
    classifier_class = DistilBertClassificationHead


class DistilBertForTokenClassification(BertForTokenClassification):
    """One label per token: BERT's head."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel


class DistilBertForQuestionAnswering(BertForQuestionAnswering):
    """Extractive QA, with dropout (qa_dropout) before the span head."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel
    qa_head_class = DistilBertQuestionAnsweringHead
