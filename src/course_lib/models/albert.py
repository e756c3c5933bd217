"""ALBERT (Lan et al. 2019) as a diff from BERT.

    BERT                                  ALBERT
    V x H token embeddings                V x E lookup (E << H), then an E -> H projection
    L distinct layers                     L layers applied, few distinct (sharing="all": one)
    NSP head: is B the next sentence?     SOP head: are A and B in order? (same shape)

Everything else (attention, feed-forward, post-LN layers, pooler, task heads, losses) is BERT's.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from course_lib.config import AlbertConfig
from course_lib.counting import _POOLED, bert_head_parameters, layer_norm, linear, register_counter
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from course_lib.models.outputs import ModelOutput
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.heads import MaskedLMHead, NextSentenceHead
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


class AlbertModel(BertModel):
    """BERT's backbone with factorized embeddings and a shared-weight encoder.
    `self.encoder.layer_at(i)` is the layer applied at depth i; shared ones are identical
    objects."""

    config_class = AlbertConfig
    embeddings_class = AlbertEmbeddings
    encoder_class = SharedEncoder


class _Albert:
    """What every ALBERT task model changes relative to its BERT parent."""

    config_class = AlbertConfig
    base_model_class = AlbertModel
    mlm_head_class = AlbertMLMHead
    sentence_head_class = SentenceOrderHead


class AlbertForMaskedLM(_Albert, BertForMaskedLM):
    """ALBERT with the masked-language-model head (decoder tied to the V x E embeddings)."""


@dataclass
class AlbertPreTrainingOutput(ModelOutput):
    """`sop_logits` / `sop_loss` name the same tensors as `nsp_logits` / `nsp_loss`, which are
    kept so the shared training engine reads BERT and ALBERT alike."""

    @property
    def sop_logits(self) -> Tensor | None:
        return self.nsp_logits

    @property
    def sop_loss(self) -> Tensor | None:
        return self.nsp_loss


class AlbertForPreTraining(_Albert, BertForPreTraining):
    """MLM + SOP. Takes `sentence_order_label` (0 = in order, 1 = swapped), or the same labels as
    `next_sentence_label`, the name the shared engine passes for either sentence task."""

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        sentence_order_label: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> AlbertPreTrainingOutput:
        if sentence_order_label is not None and next_sentence_label is not None:
            raise ValueError(
                "got both sentence_order_label and next_sentence_label; they are two names for "
                "the same SOP labels (0 = in order, 1 = swapped), pass only one."
            )
        if sentence_order_label is None:
            sentence_order_label = next_sentence_label
        out = super().forward(
            input_ids,
            attention_mask,
            token_type_ids,
            labels,
            sentence_order_label,
            output_attentions,
            output_hidden_states,
        )
        return AlbertPreTrainingOutput(**vars(out))


class AlbertForSequenceClassification(_Albert, BertForSequenceClassification):
    """One label per sequence from the pooled [CLS] (dropout: classifier_dropout_prob)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.classifier.dropout.p = config.classifier_dropout_prob


class AlbertForTokenClassification(_Albert, BertForTokenClassification):
    """One label per token (dropout: classifier_dropout_prob)."""

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.classifier.dropout.p = config.classifier_dropout_prob


class AlbertForQuestionAnswering(_Albert, BertForQuestionAnswering):
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


@register_counter("albert")
def count_albert(config: AlbertConfig, task: str) -> dict[str, int]:
    """BERT's formulas with two changes. Embeddings: (V + P + T) * E, plus E*H + H for the
    projection. Layers: only distinct sublayers count; a forward pass applies L * inner ones,
    of which G * inner are distinct, and a shared sublayer is counted once.

    The paper's Tables 1, 3 and 4 count ALBERT's shared models as `AlbertModel` (pooler
    included, as in the released checkpoints) but their BERT and not-shared rows without the
    pooler; tests/test_albert_counting.py reproduces every figure and names the two it cannot.
    """
    h, e, inter = config.hidden_size, config.embedding_size, config.intermediate_size
    applied = config.depth
    distinct = config.num_hidden_groups * config.inner_group_num
    n_attention = distinct if config.sharing in ("all", "attention") else applied
    n_ffn = distinct if config.sharing in ("all", "ffn") else applied
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * e
    return {
        "embeddings": embeddings + (linear(e, h) if config.has_embedding_projection else 0),
        "attention": n_attention * 4 * linear(h, h),
        "feed_forward": n_ffn * (linear(h, inter) + linear(inter, h)),
        # one LayerNorm after the embeddings (in E), one per distinct attention and FFN
        "layer_norm": layer_norm(e)
        + layer_norm(h) * (n_attention + n_ffn + (1 if config.pre_layer_norm else 0)),
        "pooler": linear(h, h) if task in _POOLED else 0,
        "heads": bert_head_parameters(config, task, mlm_dim=e),
    }
