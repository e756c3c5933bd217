"""BERT assembled from the parts in course_lib.modules, with its pretraining and task heads.

Every other family in the course is a subclass that changes as little as possible of this file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import BertConfig
from course_lib.labels import IGNORE_INDEX
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
    pooler_class: type[nn.Module] = Pooler

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = self.embeddings_class(config)
        self.encoder = self.encoder_class(config)
        self.pooler = self.pooler_class(config) if add_pooling_layer else None
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
    selected = labels != IGNORE_INDEX
    logits = head(hidden[selected])
    targets = labels[selected]
    check_labels(targets, logits.shape[-1])  # CPU only: no device sync on the hot path
    if targets.numel() == 0:  # nothing masked in this batch: a zero loss that still backpropagates
        return logits.sum() * 0.0, logits, selected.nonzero()
    return F.cross_entropy(logits.float(), targets), logits, selected.nonzero()


class TaskModel(PreTrainedEncoder):
    """A task model: a backbone (BertModel, or a variant's) plus the task's head(s).

    `forward` is the same for every task: run the backbone, then `add_predictions` (which each
    task defines) adds the head's logits, and its loss when targets are given; a task that also
    needs some of the batch's inputs names them in `head_inputs`. A variant
    changes a part through class attributes (`base_model_class`, `mlm_head_class`,
    `classifier_class`, ...), never by patching a built model.
    """

    base_model_class: type[BertModel] = BertModel
    add_pooling_layer: bool = False
    mlm_head_class: type[nn.Module] = MaskedLMHead
    # What `add_predictions` receives besides the backbone's output and the targets, by name:
    # "input_ids", "attention_mask", or "hidden_states" (the backbone's, collected even when the
    # caller did not ask for them). ELECTRA's loss averages over real tokens (the mask);
    # DeBERTa's enhanced mask decoder re-runs the last layer on the states that entered it.
    head_inputs: tuple[str, ...] = ()

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.backbone = self.base_model_class(config, add_pooling_layer=self.add_pooling_layer)
        self.add_heads(config)
        self.init_weights()
        self.tie_weights()

    def add_heads(self, config: BertConfig) -> None:
        """Build this task's head modules (each task defines it); `__init__` then initialises
        every weight and ties the MLM decoder to the embeddings."""
        raise NotImplementedError(f"{type(self).__name__} defines no head")

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        **targets: Tensor | None,
    ) -> ModelOutput:
        """The backbone's output plus this task's predictions. `labels` (and a task's other
        targets, e.g. `next_sentence_label`, `start_positions`/`end_positions`) add the loss."""
        collect_states = output_hidden_states or "hidden_states" in self.head_inputs
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, collect_states
        )
        inputs = dict(
            input_ids=input_ids, attention_mask=attention_mask, hidden_states=out.hidden_states
        )
        self.add_predictions(out, labels, **{k: inputs[k] for k in self.head_inputs}, **targets)
        if not output_hidden_states:
            out.hidden_states = None
        return out

    def add_predictions(self, out: ModelOutput, labels: Tensor | None) -> None:
        """Set this task's logits (and loss, given targets) on the backbone's output."""
        raise NotImplementedError(f"{type(self).__name__} defines no head")

    def add_masked_lm_predictions(
        self, out: ModelOutput, labels: Tensor | None, hidden: Tensor | None = None
    ) -> None:
        """MLM logits (and loss, given labels) from `hidden`, by default the last hidden states."""
        # mlm_logits: [n_masked, V] with labels (gathered at the masked positions, which
        # mlm_positions lists as [n_masked, 2]); [B, S, V] without labels.
        out.mlm_loss, out.mlm_logits, out.mlm_positions = masked_lm_loss(
            self.mlm_head, out.last_hidden_state if hidden is None else hidden, labels
        )

    def tie_weights(self) -> None:
        """The MLM decoder reads out with the input embedding matrix (saves V x H parameters);
        a task without an MLM head has nothing to tie."""
        if "mlm_head" in self._modules:
            self.mlm_head.decoder.weight = self.backbone.embeddings.word_embeddings.weight


def sentence_pair_loss(logits: Tensor, labels: Tensor | None) -> Tensor | None:
    """Cross-entropy of a two-way sentence-pair head (NSP or SOP), None without labels."""
    return None if labels is None else F.cross_entropy(logits.float(), labels.view(-1))


def total_loss(*losses: Tensor | None) -> Tensor | None:
    """The sum of the losses that were computed (None when none was)."""
    losses = [x for x in losses if x is not None]
    return sum(losses) if losses else None


class BertForMaskedLM(TaskModel):
    """BERT with the masked-language-model head (no pooler, as in transformers)."""

    def add_heads(self, config: BertConfig) -> None:
        self.mlm_head = self.mlm_head_class(config)

    def add_predictions(self, out: ModelOutput, labels: Tensor | None) -> None:
        self.add_masked_lm_predictions(out, labels)
        out.loss = out.mlm_loss


class BertForPreTraining(TaskModel):
    """BERT's two pretraining objectives at once: MLM on tokens and NSP on the pooled [CLS]."""

    add_pooling_layer = True

    def add_heads(self, config: BertConfig) -> None:
        self.mlm_head = self.mlm_head_class(config)
        self.nsp_head = NextSentenceHead(config)

    def add_predictions(
        self,
        out: ModelOutput,
        labels: Tensor | None,
        next_sentence_label: Tensor | None = None,
    ) -> None:
        self.add_masked_lm_predictions(out, labels)
        out.nsp_logits = self.nsp_head(out.pooler_output)
        out.nsp_loss = sentence_pair_loss(out.nsp_logits, next_sentence_label)
        out.loss = total_loss(out.mlm_loss, out.nsp_loss)


class BertForSequenceClassification(TaskModel):
    """One label per sequence; num_labels=1 means regression (MSE). The head reads the pooled
    [CLS]; a variant without a pooler (add_pooling_layer=False) gives its head the token
    vectors, and the head picks the first one itself."""

    add_pooling_layer = True
    classifier_class: type[nn.Module] = SequenceClassificationHead

    def add_heads(self, config: BertConfig) -> None:
        self.classifier = self.classifier_class(config)

    def add_predictions(self, out: ModelOutput, labels: Tensor | None) -> None:
        pooled = out.pooler_output if self.add_pooling_layer else out.last_hidden_state
        out.logits = self.classifier(pooled)
        if labels is not None:
            if self.config.num_labels == 1:
                out.loss = F.mse_loss(out.logits.squeeze(-1).float(), labels.float())
            else:
                out.loss = F.cross_entropy(out.logits.float(), labels.view(-1))


class BertForTokenClassification(TaskModel):
    """One label per token (tagging); labels of -100 are ignored (padding, sub-word pieces)."""

    classifier_class: type[nn.Module] = TokenClassificationHead

    def add_heads(self, config: BertConfig) -> None:
        self.classifier = self.classifier_class(config)

    def add_predictions(self, out: ModelOutput, labels: Tensor | None) -> None:
        out.logits = self.classifier(out.last_hidden_state)
        if labels is not None:
            out.loss = F.cross_entropy(out.logits.flatten(0, 1).float(), labels.flatten())


class BertForQuestionAnswering(TaskModel):
    """Extractive QA: start and end logits over the tokens of [CLS] question [SEP] context [SEP].
    Targets: `start_positions` and `end_positions` (token indices), not `labels`."""

    qa_head_class: type[nn.Module] = QuestionAnsweringHead

    def add_heads(self, config: BertConfig) -> None:
        self.qa_head = self.qa_head_class(config)

    def add_predictions(
        self,
        out: ModelOutput,
        labels: Tensor | None,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
    ) -> None:
        if labels is not None:
            raise ValueError(
                "question answering takes start_positions and end_positions, not labels."
            )
        out.start_logits, out.end_logits = self.qa_head(out.last_hidden_state)
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence (answer truncated away) are ignored, as in transformers.
            seq_len = out.last_hidden_state.shape[1]
            start = start_positions.clamp(0, seq_len)
            end = end_positions.clamp(0, seq_len)
            out.loss = (
                F.cross_entropy(out.start_logits.float(), start, ignore_index=seq_len)
                + F.cross_entropy(out.end_logits.float(), end, ignore_index=seq_len)
            ) / 2
