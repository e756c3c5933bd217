"""Heads that turn encoder outputs into predictions: pretraining (MLM, NSP) and fine-tuning tasks."""

from __future__ import annotations

from torch import Tensor, nn

from course_lib.config import BertConfig
from course_lib.modules.feed_forward import get_activation


class Pooler(nn.Module):
    """dense + tanh on the [CLS] vector: BERT's sentence representation for NSP and classification."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.dense(hidden[:, 0]).tanh()


class MaskedLMHead(nn.Module):
    """transform (dense, activation, LayerNorm) then a vocabulary projection whose weight is the
    token embedding matrix (tied: the same tensor reads words in and writes them out) plus a bias."""

    def __init__(
        self,
        config: BertConfig,
        embedding_size: int | None = None,
        activation: str | None = None,
    ) -> None:
        super().__init__()
        dim = embedding_size or config.hidden_size  # ALBERT predicts from its smaller E
        self.dense = nn.Linear(config.hidden_size, dim)
        self.act = get_activation(activation or config.hidden_act)  # RoBERTa: always "gelu"
        self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(dim, config.vocab_size)  # weight tied by the model

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.LayerNorm(self.act(self.dense(hidden))))


class NextSentenceHead(nn.Module):
    """Two logits from the pooled [CLS]: 0 = B follows A, 1 = B is random (transformers' order)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.classifier(pooled)


class SequenceClassificationHead(nn.Module):
    """dropout + linear on the pooled [CLS] vector: one prediction per sequence. `dropout`
    defaults to hidden_dropout_prob (ALBERT and RoBERTa pass their classifier_dropout_prob)."""

    def __init__(self, config: BertConfig, dropout: float | None = None) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.out_proj(self.dropout(pooled))


class FirstTokenClassificationHead(nn.Module):
    """For encoders without a pooler: the first token's vector -> (dropout) -> dense ->
    activation -> dropout -> out_proj. RoBERTa: tanh, dropout first too; DistilBERT: ReLU
    (transformers names its dense layer `pre_classifier`)."""

    def __init__(
        self, config: BertConfig, activation: str, dropout: float, dropout_first: bool
    ) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.act = get_activation(activation)
        self.dropout_first = dropout_first

    def forward(self, hidden: Tensor) -> Tensor:
        x = hidden[:, 0]  # (B, H): the <s> / [CLS] vector
        if self.dropout_first:
            x = self.dropout(x)
        return self.out_proj(self.dropout(self.act(self.dense(x))))  # (B, num_labels)


class TokenClassificationHead(SequenceClassificationHead):
    """The same dropout + linear, applied at every position: one prediction per token."""


class QuestionAnsweringHead(nn.Module):
    """Two logits per token: how likely the answer span starts / ends there."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.qa_outputs = nn.Linear(config.hidden_size, 2)

    def forward(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        start, end = self.qa_outputs(hidden).unbind(dim=-1)
        return start, end
