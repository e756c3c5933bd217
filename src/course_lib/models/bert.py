"""BERT assembled from the parts in course_lib.modules, with its pretraining and task heads.

Every other family in the course is a subclass that changes as little as possible of this file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import BertConfig
from course_lib.models.base import PreTrainedEncoder
from course_lib.models.inputs import check_inputs, check_labels
from course_lib.models.outputs import ModelOutput
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.encoder import Encoder
from course_lib.modules.heads import (
    MaskedLMHead,
    NextSentenceHead,
    Pooler,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
)


class BertModel(PreTrainedEncoder):
    """embeddings -> encoder stack -> (pooler). Returns last_hidden_state and pooler_output."""

    embeddings_class: type[nn.Module] = BertEmbeddings
    encoder_class: type[nn.Module] = Encoder

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = self.embeddings_class(config)
        self.encoder = self.encoder_class(config)
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        check_inputs(self.config, input_ids, attention_mask, token_type_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        # [batch, 1, 1, seq] keep-mask: broadcast over heads and query positions.
        keep = attention_mask[:, None, None, :].bool()
        x, hidden_states, attentions = self.encoder(
            x, keep, output_attentions, output_hidden_states
        )
        return ModelOutput(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=hidden_states,
            attentions=attentions,
        )


def masked_lm_loss(
    head: nn.Module, hidden: Tensor, labels: Tensor | None
) -> tuple[Tensor | None, Tensor, Tensor | None]:
    """Vocabulary logits, and the loss when labels are given.

    With labels, only the ~15% masked positions are gathered *before* the head: the
    vocabulary projection is the largest matmul in a small model, and the loss ignores every
    other position anyway. Returns (loss, logits, positions).
    """
    if labels is None:
        return None, head(hidden), None
    if labels.shape != hidden.shape[:2]:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)}, expected {tuple(hidden.shape[:2])} "
            f"(one label per token, -100 where no prediction is wanted)."
        )
    selected = labels != -100
    logits = head(hidden[selected])
    targets = labels[selected]
    check_labels(targets, logits.shape[-1])  # CPU only: no device sync on the hot path
    if targets.numel() == 0:  # nothing masked in this batch: a zero loss that still backpropagates
        return logits.sum() * 0.0, logits, selected.nonzero()
    return F.cross_entropy(logits.float(), targets), logits, selected.nonzero()


class _WithBackbone(PreTrainedEncoder):
    """A task model: a backbone (BertModel, or a variant's) plus a head. Variants override
    `base_model_class` and nothing else."""

    base_model_class: type[BertModel] = BertModel
    add_pooling_layer: bool = False
    # Pretraining heads, as class attributes so a variant swaps a head without rewriting __init__
    # (ALBERT's MLM head predicts from its smaller embedding size; its sentence head is SOP).
    mlm_head_class: type[nn.Module] = MaskedLMHead
    sentence_head_class: type[nn.Module] = NextSentenceHead

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.backbone = self.base_model_class(config, add_pooling_layer=self.add_pooling_layer)

    def run_backbone(
        self, input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
    ):
        return self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )

    def tie_weights(self) -> None:
        """The MLM decoder reads out with the input embedding matrix (saves V x H parameters)."""
        self.mlm_head.decoder.weight = self.backbone.embeddings.word_embeddings.weight


class BertForMaskedLM(_WithBackbone):
    """BERT with the masked-language-model head (no pooler, as in transformers)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.mlm_head = self.mlm_head_class(config)
        self.init_weights()
        self.tie_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        out = self.run_backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        loss, logits, positions = masked_lm_loss(self.mlm_head, out.last_hidden_state, labels)
        out.loss, out.mlm_loss, out.mlm_logits, out.mlm_positions = loss, loss, logits, positions
        return out


class BertForPreTraining(_WithBackbone):
    """BERT's two pretraining objectives at once: MLM on tokens and NSP on the pooled [CLS]."""

    add_pooling_layer = True

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.mlm_head = self.mlm_head_class(config)
        self.nsp_head = self.sentence_head_class(config)
        self.init_weights()
        self.tie_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        out = self.run_backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        mlm_loss, logits, positions = masked_lm_loss(self.mlm_head, out.last_hidden_state, labels)
        out.mlm_loss, out.mlm_logits, out.mlm_positions = mlm_loss, logits, positions
        out.nsp_logits = self.nsp_head(out.pooler_output)
        if next_sentence_label is not None:
            out.nsp_loss = F.cross_entropy(out.nsp_logits.float(), next_sentence_label.view(-1))
        losses = [x for x in (mlm_loss, out.nsp_loss) if x is not None]
        out.loss = sum(losses) if losses else None
        return out


class BertForSequenceClassification(_WithBackbone):
    """One label per sequence from the pooled [CLS]; num_labels=1 means regression (MSE)."""

    add_pooling_layer = True

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.classifier = SequenceClassificationHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        out = self.run_backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        out.logits = self.classifier(out.pooler_output)
        if labels is not None:
            if self.config.num_labels == 1:
                out.loss = F.mse_loss(out.logits.squeeze(-1).float(), labels.float())
            else:
                out.loss = F.cross_entropy(out.logits.float(), labels.view(-1))
        return out


class BertForTokenClassification(_WithBackbone):
    """One label per token (tagging); labels of -100 are ignored (padding, sub-word pieces)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.classifier = TokenClassificationHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        out = self.run_backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        out.logits = self.classifier(out.last_hidden_state)
        if labels is not None:
            out.loss = F.cross_entropy(out.logits.flatten(0, 1).float(), labels.flatten())
        return out


class BertForQuestionAnswering(_WithBackbone):
    """Extractive QA: start and end logits over the tokens of [CLS] question [SEP] context [SEP]."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.qa_head = QuestionAnsweringHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        out = self.run_backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        out.start_logits, out.end_logits = self.qa_head(out.last_hidden_state)
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence (answer truncated away) are ignored, as in transformers.
            seq_len = input_ids.shape[1]
            start = start_positions.clamp(0, seq_len)
            end = end_positions.clamp(0, seq_len)
            out.loss = (
                F.cross_entropy(out.start_logits.float(), start, ignore_index=seq_len)
                + F.cross_entropy(out.end_logits.float(), end, ignore_index=seq_len)
            ) / 2
        return out
