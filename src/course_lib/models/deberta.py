"""DeBERTa (v2/v3) as a diff from BERT: what changes is *where position information enters*.

    BERT                                   DeBERTa
    absolute positions added to the input  none at the input (position_biased_input=False)
    scores Q·K / sqrt(d)                   c2c + c2p + p2c over sqrt(3d) (disentangled attention)
    -                                      one relative-position table shared by all layers
    key-only padding mask                  query-and-key mask; padded positions zeroed
    pooler: dense + tanh                   ContextPooler: dense + GELU, only in classifiers
    MLM head on the last layer             optional enhanced mask decoder (EMD): absolute
                                           positions injected just before the MLM head

Everything else (feed-forward, post-LN residuals, heads, losses) is BERT's, inherited unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from course_lib.config import DebertaConfig
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from course_lib.models.outputs import ModelOutput
from course_lib.modules.disentangled_attention import DisentangledSelfAttention
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.encoder import Encoder, EncoderLayer
from course_lib.modules.feed_forward import get_activation
from course_lib.modules.relative_position import relative_position


class DebertaEmbeddings(BertEmbeddings):
    """token (+ segment) embeddings; absolute positions only if `position_biased_input`.

    The position table is still built when `use_emd` is on: the enhanced mask decoder adds it
    at the very end instead of the beginning.
    """

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__(config)
        self.position_biased_input = config.position_biased_input  # BERT's forward reads it
        if not (config.position_biased_input or config.use_emd):
            self.position_embeddings = None


class DebertaLayer(EncoderLayer):
    """BERT's layer (same residuals, norms and pre-LN option) with disentangled attention."""

    attention_class = DisentangledSelfAttention

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        output_attentions: bool = False,
        rel_embeddings: Tensor | None = None,
        relative_pos: Tensor | None = None,
        query_states: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """With `query_states` (the enhanced mask decoder), those states ask the queries and carry
        the residual, while keys and values still come from x: BERT's layer runs on query_states
        and the attention reads x (normalised first under pre-LN, as the layer's input would be)."""
        relative = dict(rel_embeddings=rel_embeddings, relative_pos=relative_pos)
        if query_states is None:
            return super().forward(x, mask, output_attentions, **relative)
        keys = self.attention_norm(x) if self.pre_layer_norm else x
        return super().forward(
            query_states, mask, output_attentions, **relative, key_value_states=keys
        )

    def score_terms(
        self, x: Tensor, rel_embeddings: Tensor | None, relative_pos: Tensor | None
    ) -> dict[str, Tensor]:
        """This layer's per-term score maps for input x (see DisentangledSelfAttention)."""
        inputs = self.attention_norm(x) if self.pre_layer_norm else x
        return self.attention.score_terms(inputs, rel_embeddings, relative_pos)


class DebertaEncoder(Encoder):
    """BERT's stack (and its loop) plus the relative-position table that every layer shares (and
    its LayerNorm), and the query-and-key padding mask."""

    layer_class = DebertaLayer

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__(config)
        self.position_buckets = config.position_buckets
        # -1 means max_position_embeddings (transformers' DebertaV2Encoder resolves it the same way).
        self.max_relative_positions = (
            config.max_relative_positions
            if config.max_relative_positions >= 1
            else config.max_position_embeddings
        )
        self.rel_embeddings = (
            nn.Embedding(2 * config.relative_span, config.hidden_size)
            if config.relative_attention
            else None
        )
        self.rel_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            if config.norm_rel_ebd == "layer_norm"
            else None
        )

    def relative_inputs(
        self, seq_len: int, device: torch.device
    ) -> tuple[Tensor | None, Tensor | None]:
        """(relative table after its LayerNorm [2k, hidden], bucketed distances i - j [seq, seq]);
        computed once per forward pass and shared by every layer."""
        if self.rel_embeddings is None:
            return None, None
        table = self.rel_embeddings.weight
        if self.rel_norm is not None:
            table = self.rel_norm(table)
        distances = relative_position(
            seq_len, seq_len, self.position_buckets, self.max_relative_positions, device
        )
        return table, distances

    @staticmethod
    def pair_mask(mask: Tensor) -> Tensor:
        """[batch, 1, 1, seq] keep-mask -> [batch, 1, seq, seq]: (i, j) is kept only when both
        tokens are real, as in DeBERTa (a padded query attends uniformly to everything)."""
        return mask & mask.transpose(-1, -2)

    def layer_inputs(
        self, x: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor | None, dict[str, Tensor | None]]:
        """BERT's loop then runs unchanged, every layer receiving the same relative inputs."""
        if mask is not None:
            x = x * mask[:, 0, 0, :, None].to(x.dtype)  # padded positions start as zero vectors
            mask = self.pair_mask(mask)
        rel_embeddings, relative_pos = self.relative_inputs(x.shape[1], x.device)
        return x, mask, dict(rel_embeddings=rel_embeddings, relative_pos=relative_pos)


class ContextPooler(nn.Module):
    """DeBERTa's sentence vector: dropout, dense and an activation (GELU, not tanh) on token 0."""

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.pooler_dropout)
        self.act = get_activation(config.pooler_hidden_act)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.act(self.dense(self.dropout(hidden[:, 0])))


class DebertaModel(BertModel):
    """embeddings -> disentangled-attention encoder. No pooler unless asked (as in transformers);
    with `add_pooling_layer=True` it is the ContextPooler that classifiers use."""

    config_class = DebertaConfig
    embeddings_class = DebertaEmbeddings
    encoder_class = DebertaEncoder
    pooler_class = ContextPooler

    def __init__(self, config: DebertaConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer)

    def attention_terms(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> list[dict[str, Tensor]]:
        """For every layer: {"c2c", "c2p", "p2c" (the terms in pos_att_type): [batch, heads, q, k]
        scaled scores before mask and softmax, "probs": the attention probabilities}."""
        out = self(
            input_ids,
            attention_mask,
            token_type_ids,
            output_attentions=True,
            output_hidden_states=True,
        )
        rel_embeddings, relative_pos = self.encoder.relative_inputs(
            input_ids.shape[1], input_ids.device
        )
        return [
            {**layer.score_terms(x, rel_embeddings, relative_pos), "probs": probs}
            for layer, x, probs in zip(self.encoder.layers, out.hidden_states, out.attentions)
        ]


class DebertaVariant:
    """What every DeBERTa task model changes relative to its BERT parent."""

    config_class = DebertaConfig
    base_model_class = DebertaModel


class DebertaForMaskedLM(DebertaVariant, BertForMaskedLM):
    """BERT's MLM head on DeBERTa; with `config.use_emd`, the enhanced mask decoder runs first."""

    @property
    def head_inputs(self) -> tuple[str, ...]:
        """EMD reads the ids (for positions), the mask and the states entering the last layer."""
        return ("input_ids", "attention_mask", "hidden_states") if self.config.use_emd else ()

    def add_predictions(self, out: ModelOutput, labels: Tensor | None, **emd_inputs: Any) -> None:
        """With EMD, the MLM head reads the decoder's states instead of the last layer's."""
        decoded = self.enhanced_mask_decoder(**emd_inputs) if self.config.use_emd else None
        self.add_masked_lm_predictions(out, labels, decoded)
        out.loss = out.mlm_loss

    def enhanced_mask_decoder(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        hidden_states: tuple[Tensor, ...],
    ) -> Tensor:
        """EMD (He et al. 2021, sec. 3.2, following Microsoft's code): re-run the last encoder layer
        `emd_steps` times with its own weights. Keys/values are the states that enter the last
        layer (`hidden_states[-2]`); the first queries are those + absolute position embeddings,
        later queries the previous step's output. Absolute positions thus reach only the MLM
        prediction."""
        hidden = hidden_states[-2]
        embeddings, encoder = self.backbone.embeddings, self.backbone.encoder
        layer = encoder.layers[-1]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = encoder.pair_mask(attention_mask[:, None, None, :].bool())
        relative = encoder.relative_inputs(input_ids.shape[1], input_ids.device)
        query = hidden + embeddings.position_embeddings(embeddings.position_ids(input_ids))
        for _ in range(self.config.emd_steps):
            query, _ = layer(hidden, mask, False, *relative, query_states=query)
        return encoder.final_norm(query) if encoder.final_norm is not None else query


class DebertaForSequenceClassification(DebertaVariant, BertForSequenceClassification):
    """One label per sequence from the ContextPooler's vector (transformers' layout)."""


class DebertaForTokenClassification(DebertaVariant, BertForTokenClassification):
    """One label per token: BERT's head."""


class DebertaForQuestionAnswering(DebertaVariant, BertForQuestionAnswering):
    """Extractive QA: start and end logits per token."""
