"""ALBERT (Lan et al. 2019) as a diff from BERT.

    BERT                                  ALBERT
    V x H token embeddings                V x E lookup (E << H), then an E -> H projection
    L distinct layers                     L layers applied, few distinct (sharing="all": one)
    NSP head: is B the next sentence?     SOP head: are A and B in order? (same shape)

Everything else (attention, feed-forward, post-LN layers, pooler, task heads, losses) is BERT's.
"""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor, nn

from course_lib.config import AlbertConfig
from course_lib.models.bert import (
    BertEmbeddings,
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    MaskedLMHead,
    NextSentenceHead,
    SequenceClassificationHead,
    TaskModel,
    masked_lm_loss,
    sentence_pair_loss,
    total_loss,
)
from course_lib.models.outputs import ModelOutput
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


# Each task model names what it changes relative to its BERT parent: the config, the backbone,
# and the head that differs.


class AlbertForMaskedLM(BertForMaskedLM):
    """ALBERT with the masked-language-model head (decoder tied to the V x E embeddings)."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    mlm_head_class = AlbertMLMHead


class AlbertForPreTraining(TaskModel):
    """MLM + SOP: `sop_head` answers "are A and B in their original order?" from the pooled
    [CLS]. Targets: `labels` (MLM) and `sentence_order_label` (0 = in order, 1 = swapped), as
    transformers' AlbertForPreTraining names them."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    add_pooling_layer = True

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.mlm_head = AlbertMLMHead(config)
        self.sop_head = SentenceOrderHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        sentence_order_label: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B, T) as BertForMaskedLM; sentence_order_label (B,): 0 = A then B as in
        the text, 1 = swapped. `loss` is the sum of the losses whose targets were given."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        mlm_loss, mlm_logits, positions = masked_lm_loss(
            self.mlm_head, out.last_hidden_state, labels
        )
        sop_logits = self.sop_head(out.pooler_output)  # (B, 2)
        sop_loss = sentence_pair_loss(sop_logits, sentence_order_label)
        return replace(
            out,
            loss=total_loss(mlm_loss, sop_loss),
            mlm_loss=mlm_loss,
            mlm_logits=mlm_logits,
            mlm_positions=positions,
            sop_loss=sop_loss,
            sop_logits=sop_logits,
        )


class AlbertForSequenceClassification(BertForSequenceClassification):
    """One label per sequence from the pooled [CLS] (dropout: classifier_dropout_prob)."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    classifier_class = AlbertClassificationHead


class AlbertForTokenClassification(BertForTokenClassification):
    """One label per token (dropout: classifier_dropout_prob)."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    classifier_class = AlbertClassificationHead


class AlbertForQuestionAnswering(BertForQuestionAnswering):
    """Extractive QA: start and end logits per token."""

    config_class = AlbertConfig
    base_model_class = AlbertModel


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
