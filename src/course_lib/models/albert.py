"""ALBERT (Lan et al. 2019) as a diff from BERT.

    BERT                                  ALBERT
    V x H token embeddings                V x E lookup (E << H), then an E -> H projection
    L distinct layers                     L layers applied, few distinct (sharing="all": one)
    NSP head: is B the next sentence?     SOP head: are A and B in order? (same shape)

Everything else (attention, feed-forward, post-LN layers, pooler, task heads, losses) is BERT's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn

from course_lib.config import BertConfig, _require
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
from course_lib.modules.sharing import SHARING, SharedEncoder


@dataclass
class AlbertConfig(BertConfig):
    """BERT's fields plus embedding size E, sharing strategy and layer groups.

    Defaults are ALBERT-base as released (v2): vocabulary 30000, `gelu_new`, no dropout inside
    the encoder (the paper found removing it helps, section 4.9), all-shared, one group.
    `embedding_projection=None` projects E -> H only when E != H, as the original code does;
    transformers always keeps the projection, so `from_transformers` sets it to True.
    """

    vocab_size: int = 30000
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    embedding_size: int = 128
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    sharing: str = "all"
    embedding_projection: bool | None = None
    classifier_dropout_prob: float = 0.1
    model_type: ClassVar[str] = "albert"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        # Table 1 of the paper; heads follow the released configs (xlarge 16, xxlarge 64).
        "albert-base": dict(num_hidden_layers=12, hidden_size=768),
        "albert-large": dict(num_hidden_layers=24, hidden_size=1024),
        "albert-xlarge": dict(num_hidden_layers=24, hidden_size=2048, num_attention_heads=16),
        "albert-xxlarge": dict(num_hidden_layers=12, hidden_size=4096, num_attention_heads=64),
    }

    def validate(self) -> None:
        """BERT's checks, then ALBERT's fields and how they combine."""
        super().validate()
        for name in ("embedding_size", "num_hidden_groups", "inner_group_num"):
            value = getattr(self, name)
            _require(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                value,
                "expected a positive integer",
            )
        _require(self.sharing in SHARING, "sharing", self.sharing, f"expected one of {SHARING}")
        if self.num_hidden_layers % self.num_hidden_groups:
            valid = [
                g for g in range(1, self.num_hidden_layers + 1) if self.num_hidden_layers % g == 0
            ]
            raise ValueError(
                f"num_hidden_layers={self.num_hidden_layers} is not divisible by "
                f"num_hidden_groups={self.num_hidden_groups}: each group shares its weights over "
                f"num_hidden_layers / num_hidden_groups consecutive layers; valid group counts "
                f"for {self.num_hidden_layers} layers are {valid}."
            )
        if self.sharing == "none" and (self.num_hidden_groups, self.inner_group_num) != (1, 1):
            raise ValueError(
                f"sharing='none' gives every layer its own weights, so num_hidden_groups="
                f"{self.num_hidden_groups} and inner_group_num={self.inner_group_num} would have "
                f"no effect; leave both at 1 and set the depth with num_hidden_layers."
            )
        _require(
            self.embedding_projection in (None, True, False),
            "embedding_projection",
            self.embedding_projection,
            "expected True, False or None (None: project only when embedding_size != hidden_size)",
        )
        if self.embedding_projection is False and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"embedding_projection=False needs embedding_size == hidden_size, got "
                f"{self.embedding_size} != {self.hidden_size}: the E -> H projection is what "
                f"lets the embeddings be smaller than the hidden states."
            )
        _require(
            isinstance(self.classifier_dropout_prob, (int, float))
            and 0.0 <= self.classifier_dropout_prob < 1.0,
            "classifier_dropout_prob",
            self.classifier_dropout_prob,
            "expected a probability in [0, 1)",
        )

    @property
    def has_embedding_projection(self) -> bool:
        """Whether the embeddings are projected E -> H (always when E != H)."""
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def depth(self) -> int:
        """Layers applied in one forward pass: each of the num_hidden_layers runs its group's
        inner_group_num distinct layers in turn."""
        return self.num_hidden_layers * self.inner_group_num


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
