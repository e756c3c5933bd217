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

import torch
from torch import Tensor, nn

from course_lib.config import DebertaConfig
from course_lib.counting import bert_head_parameters, layer_norm, linear, register_counter
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    masked_lm_loss,
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
        self.position_biased_input = config.position_biased_input
        if not (config.position_biased_input or config.use_emd):
            self.position_embeddings = None

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        if self.position_biased_input:
            return super().forward(input_ids, token_type_ids)
        x = self.word_embeddings(input_ids)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class DebertaLayer(EncoderLayer):
    """BERT's layer with disentangled attention. `query_states` (default: x) lets the enhanced
    mask decoder ask different queries of the same keys/values; the residual adds to the queries."""

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
        residual = x if query_states is None else query_states
        if self.pre_layer_norm:
            queries = None if query_states is None else self.attention_norm(query_states)
            attn, probs = self.attention(
                self.attention_norm(x),
                mask,
                output_attentions,
                rel_embeddings,
                relative_pos,
                queries,
            )
            h = residual + self.dropout(attn)
            return h + self.dropout(self.feed_forward(self.output_norm(h))), probs
        attn, probs = self.attention(
            x, mask, output_attentions, rel_embeddings, relative_pos, query_states
        )
        h = self.attention_norm(residual + self.dropout(attn))
        return self.output_norm(h + self.dropout(self.feed_forward(h))), probs

    def score_terms(
        self, x: Tensor, rel_embeddings: Tensor | None, relative_pos: Tensor | None
    ) -> dict[str, Tensor]:
        """This layer's per-term score maps for input x (see DisentangledSelfAttention)."""
        inputs = self.attention_norm(x) if self.pre_layer_norm else x
        return self.attention.score_terms(inputs, rel_embeddings, relative_pos)


class DebertaEncoder(Encoder):
    """BERT's stack plus the relative-position table that every layer shares (and its LayerNorm)."""

    layer_class = DebertaLayer

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__(config)
        self.position_buckets = config.position_buckets
        self.max_relative_positions = config.relative_max_positions
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

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        if mask is not None:
            x = x * mask[:, 0, 0, :, None].to(x.dtype)  # padded positions start as zero vectors
            mask = self.pair_mask(mask)
        rel_embeddings, relative_pos = self.relative_inputs(x.shape[1], x.device)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, mask, output_attentions, rel_embeddings, relative_pos)
            if hidden_states is not None:
                hidden_states.append(x)
            if attentions is not None:
                attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (
            x,
            tuple(hidden_states) if hidden_states is not None else None,
            tuple(attentions) if attentions is not None else None,
        )


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

    def __init__(self, config: DebertaConfig, add_pooling_layer: bool = False) -> None:
        super().__init__(config, add_pooling_layer=False)
        if add_pooling_layer:
            self.pooler = ContextPooler(config)
            self.pooler.apply(self._init_module)

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


class DebertaForMaskedLM(BertForMaskedLM):
    """BERT's MLM head on DeBERTa; with `config.use_emd`, the enhanced mask decoder runs first."""

    config_class = DebertaConfig
    base_model_class = DebertaModel

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        if not self.config.use_emd:
            return super().forward(
                input_ids,
                attention_mask,
                token_type_ids,
                labels,
                output_attentions,
                output_hidden_states,
            )
        out = self.run_backbone(input_ids, attention_mask, token_type_ids, output_attentions, True)
        decoded = self.enhanced_mask_decoder(input_ids, out.hidden_states[-2], attention_mask)
        if not output_hidden_states:
            out.hidden_states = None
        loss, logits, positions = masked_lm_loss(self.mlm_head, decoded, labels)
        out.loss, out.mlm_loss, out.mlm_logits, out.mlm_positions = loss, loss, logits, positions
        return out

    def enhanced_mask_decoder(
        self, input_ids: Tensor, hidden: Tensor, attention_mask: Tensor | None
    ) -> Tensor:
        """EMD (He et al. 2021, sec. 3.2, following Microsoft's code): re-run the last encoder layer
        `emd_steps` times with its own weights. Keys/values are `hidden`, the states that enter the
        last layer; the first queries are hidden + absolute position embeddings, later queries
        the previous step's output. Absolute positions thus reach only the MLM prediction."""
        embeddings, encoder = self.backbone.embeddings, self.backbone.encoder
        layer = encoder.layers[-1]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = encoder.pair_mask(attention_mask[:, None, None, :].bool())
        rel_embeddings, relative_pos = encoder.relative_inputs(input_ids.shape[1], input_ids.device)
        query = hidden + embeddings.position_embeddings(embeddings.position_ids(input_ids))
        for _ in range(self.config.emd_steps):
            query, _ = layer(hidden, mask, False, rel_embeddings, relative_pos, query_states=query)
        return encoder.final_norm(query) if encoder.final_norm is not None else query


class DebertaForSequenceClassification(BertForSequenceClassification):
    """One label per sequence from the ContextPooler's vector (transformers' layout)."""

    config_class = DebertaConfig
    base_model_class = DebertaModel


class DebertaForTokenClassification(BertForTokenClassification):
    config_class = DebertaConfig
    base_model_class = DebertaModel


class DebertaForQuestionAnswering(BertForQuestionAnswering):
    config_class = DebertaConfig
    base_model_class = DebertaModel


@register_counter("deberta")
def count_deberta(config: DebertaConfig, task: str) -> dict[str, int]:
    """BERT's count, minus the absolute position table (kept only for position_biased_input or
    EMD), plus the 2k x H relative table, its LayerNorm and (share_att_key=False) one H x H
    projection per position term per layer; the pooler exists only in the sequence classifier."""
    h, n_layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    if task == "ForPreTraining":
        raise ValueError("DeBERTa has no ForPreTraining model (no NSP); count DebertaForMaskedLM.")
    relative = config.relative_attention
    absolute = config.position_biased_input or config.use_emd
    n_pos_proj = 0 if (config.share_att_key or not relative) else len(config.pos_att_type)
    return {
        "embeddings": (
            config.vocab_size
            + (config.max_position_embeddings if absolute else 0)
            + config.type_vocab_size
            + (2 * config.relative_span if relative else 0)
        )
        * h,
        "attention": n_layers * (4 + n_pos_proj) * linear(h, h),
        "feed_forward": n_layers * (linear(h, inter) + linear(inter, h)),
        "layer_norm": layer_norm(h)
        * (
            1
            + 2 * n_layers
            + (1 if config.norm_rel_ebd == "layer_norm" else 0)
            + (1 if config.pre_layer_norm else 0)
        ),
        "pooler": linear(h, h) if task == "ForSequenceClassification" else 0,
        "heads": bert_head_parameters(config, task),
    }
