"""ELECTRA (Clark et al. 2020) as a diff from BERT: the encoder is BERT's; what changes is the
pretraining task and the heads that serve it.

    BERT                                ELECTRA
    V x H token embeddings              V x E lookup, projected E -> H when E != H (ALBERT's)
    pooler (dense + tanh on [CLS])      none
    MLM head: H -> H, act, LN, H -> V   generator (ElectraForMaskedLM): H -> E, GELU, LN, E -> V
                                        (tied to the V x E table), usually a smaller encoder
    NSP head on the pooled [CLS]        discriminator (ElectraForPreTraining): per token,
                                        H -> H, act, H -> 1: "was this token replaced?"
    one model, loss on ~15% of tokens   both models, sharing embeddings: the generator's MLM
                                        loss + 50 x the discriminator's loss on every token
                                        (course_lib.objectives.rtd)

Attention, feed-forward, post-LN layers, initialisation and the masked-LM loss are BERT's.
"""

from __future__ import annotations

from dataclasses import replace

import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.activations import get_activation
from course_lib.config.electra import ElectraConfig
from course_lib.models.albert import AlbertEmbeddings
from course_lib.models.bert import BertForMaskedLM, BertModel, MaskedLMHead, TaskModel
from course_lib.models.outputs import ModelOutput


class ElectraModel(BertModel):
    """BERT's backbone with ALBERT's factorized embeddings (E -> H only when E != H) and, as in
    transformers, no pooler."""

    config_class = ElectraConfig
    embeddings_class = AlbertEmbeddings

    def __init__(self, config: ElectraConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer=add_pooling_layer)


class GeneratorHead(MaskedLMHead):
    """BERT's MLM head predicting in E dimensions (so the decoder is the V x E embedding table),
    with GELU whatever `hidden_act` says (transformers' ElectraGeneratorPredictions)."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config, embedding_size=config.embedding_size, activation="gelu")


class DiscriminatorHead(nn.Module):
    """One logit per token: is this token the original (< 0) or a replacement (> 0)?
    dense H -> H, activation, dense H -> 1 (transformers' ElectraDiscriminatorPredictions)."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = get_activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)


def replaced_token_loss(logits: Tensor, labels: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Binary cross-entropy of the per-token logits against labels (1 = replaced, 0 = original),
    averaged over the real tokens (attention_mask == 1), or over all tokens without a mask."""
    if labels.shape != logits.shape:
        raise ValueError(
            f"labels has shape {tuple(labels.shape)}, expected {tuple(logits.shape)} "
            "(one 0/1 label per token: 1 = replaced by the generator, 0 = original)."
        )
    if attention_mask is not None:
        real = attention_mask.bool()
        logits, labels = logits[real], labels[real]
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


class ElectraForMaskedLM(BertForMaskedLM):
    """The generator: an ELECTRA encoder with the MLM head in E dimensions, tied to the
    embeddings. Outputs as BertForMaskedLM (`mlm_logits`, `mlm_loss`, `loss`)."""

    config_class = ElectraConfig
    base_model_class = ElectraModel
    mlm_head_class = GeneratorHead


class ElectraForPreTraining(TaskModel):
    """The discriminator: an ELECTRA encoder with a per-token "replaced?" head. `logits` is
    [batch, seq] as in transformers; with `labels` (0/1 per token), `loss` is their binary
    cross-entropy over the real tokens."""

    config_class = ElectraConfig
    base_model_class = ElectraModel

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.discriminator_head = DiscriminatorHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """labels (B, T): 1 where the generator replaced the token, 0 where it is the original;
        the loss averages over the real tokens (attention_mask)."""
        out = self.backbone(
            input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states
        )
        logits = self.discriminator_head(out.last_hidden_state)  # (B, T)
        loss = None
        if labels is not None:
            loss = replaced_token_loss(logits, labels, attention_mask)
        return replace(out, loss=loss, logits=logits)
