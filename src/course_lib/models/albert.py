"""ALBERT (Lan et al. 2019) as a diff from BERT.

    BERT                                  ALBERT
    V x H token embeddings                V x E lookup (E << H), then an E -> H projection
    L distinct layers                     L layers applied, few distinct (sharing="all": one)
    NSP head: is B the next sentence?     SOP head: are A and B in order? (same shape)

Everything else (attention, feed-forward, post-LN layers, pooler, task heads, losses) is BERT's.
"""

from __future__ import annotations

from torch import Tensor, nn

from course_lib.config import AlbertConfig
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    TaskModel,
    sentence_pair_loss,
    total_loss,
)
from course_lib.models.outputs import ModelOutput
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.heads import MaskedLMHead, NextSentenceHead, SequenceClassificationHead
from course_lib.modules.sharing import SharedEncoder


class AlbertEmbeddings(BertEmbeddings):
    """BERT's embeddings computed in E dimensions, then projected to H: V*E + E*H parameters
    instead of V*H (4.0M instead of 23M for V=30000, E=128, H=768)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config, embedding_size=config.embedding_size)
        self.projection = (
            nn.Linear(config.embedding_size, config.hidden_size)
            if config.has_embedding_projection
            else nn.Identity()
        )

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        return self.projection(super().forward(input_ids, token_type_ids))


class AlbertMLMHead(MaskedLMHead):
    """BERT's MLM head, predicting in E dimensions so the decoder can be tied to the V x E table."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config, embedding_size=config.embedding_size)


class SentenceOrderHead(NextSentenceHead):
    """Sentence-order prediction: the NSP head's shape (2 logits on the pooled [CLS]) with a new
    question: label 0 = segments in their original order, 1 = swapped. Dropout first, as in the
    reference."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.classifier(self.dropout(pooled))


class AlbertClassificationHead(SequenceClassificationHead):
    """BERT's dropout + linear head with ALBERT's classifier_dropout_prob (sequences and tokens)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config, dropout=config.classifier_dropout_prob)


class AlbertModel(BertModel):
    """BERT's backbone with factorized embeddings and a shared-weight encoder.
    `self.encoder.layer_at(i)` is the layer applied at depth i; shared ones are identical
    objects."""

    config_class = AlbertConfig
    embeddings_class = AlbertEmbeddings
    encoder_class = SharedEncoder


class AlbertVariant:
    """What every ALBERT task model changes relative to its BERT parent."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    mlm_head_class = AlbertMLMHead
    classifier_class = AlbertClassificationHead


class AlbertForMaskedLM(AlbertVariant, BertForMaskedLM):
    """ALBERT with the masked-language-model head (decoder tied to the V x E embeddings)."""


class AlbertForPreTraining(AlbertVariant, TaskModel):
    """MLM + SOP: `sop_head` answers "are A and B in their original order?" from the pooled
    [CLS]. Targets: `labels` (MLM) and `sentence_order_label` (0 = in order, 1 = swapped;
    `next_sentence_label` is accepted as another name for it, as BERT's trainers pass)."""

    add_pooling_layer = True

    def add_heads(self, config: AlbertConfig) -> None:
        self.mlm_head = self.mlm_head_class(config)
        self.sop_head = SentenceOrderHead(config)

    def add_predictions(
        self,
        out: ModelOutput,
        labels: Tensor | None,
        sentence_order_label: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
    ) -> None:
        if sentence_order_label is not None and next_sentence_label is not None:
            raise ValueError(
                "got both sentence_order_label and next_sentence_label; they are two names for "
                "the same SOP labels (0 = in order, 1 = swapped), pass only one."
            )
        if sentence_order_label is None:
            sentence_order_label = next_sentence_label
        self.add_masked_lm_predictions(out, labels)
        out.sop_logits = self.sop_head(out.pooler_output)
        out.sop_loss = sentence_pair_loss(out.sop_logits, sentence_order_label)
        out.loss = total_loss(out.mlm_loss, out.sop_loss)


class AlbertForSequenceClassification(AlbertVariant, BertForSequenceClassification):
    """One label per sequence from the pooled [CLS] (dropout: classifier_dropout_prob)."""


class AlbertForTokenClassification(AlbertVariant, BertForTokenClassification):
    """One label per token (dropout: classifier_dropout_prob)."""


class AlbertForQuestionAnswering(AlbertVariant, BertForQuestionAnswering):
    """Extractive QA: start and end logits per token."""


ALBERT_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        AlbertModel,
        AlbertForMaskedLM,
        AlbertForPreTraining,
        AlbertForSequenceClassification,
        AlbertForTokenClassification,
        AlbertForQuestionAnswering,
    )
}
