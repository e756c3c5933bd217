"""DeBERTa (v2/v3) as a diff from BERT: what changes is *where position information enters*.

    BERT                                   DeBERTa
    absolute positions added to the input  none at the input (position_biased_input=False)
    scores Q·K / sqrt(d)                   c2c + c2p + p2c over sqrt(3d): one method, `scores`,
                                           of BERT's attention overridden
    -                                      one relative-position table shared by all layers
    keep_mask (B, 1, 1, T): real keys      pair_mask (B, 1, T, T): real query and real key;
                                           padded positions zeroed
    pooler: dense + tanh                   ContextPooler: dense + GELU, only in classifiers
    MLM head on the last layer             optional enhanced mask decoder (EMD): absolute
                                           positions injected just before the MLM head

Everything else (the head split and merge, feed-forward, post-LN residuals, the encoder loop,
heads, losses) is BERT's, from models/bert.py, unchanged.

Disentangled attention: a token is represented twice, by its content H (the hidden state) and,
for each pair (i, j), by the embedding P of the relative distance between them. The score of
query i for key j is

    A[i, j] = ( Q_i · K_j             c2c: content to content (BERT's only term)
              + Q_i · K^r[δ(i, j)]    c2p: query content to the distance between the two
              + K_j · Q^r[δ(i, j)]    p2c: the distance to key content (the paper writes δ(j, i))
              ) / sqrt(d · (1 + number of position terms))

where Q^r, K^r project the shared table of relative embeddings with the query/key weights
(`share_att_key=True`, DeBERTa v3) or with their own (`pos_query`, `pos_key`).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from course_lib.activations import get_activation
from course_lib.config import DebertaConfig
from course_lib.models.bert import (
    BertEmbeddings,
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    Encoder,
    EncoderLayer,
    MultiHeadSelfAttention,
    masked_lm_loss,
)
from course_lib.models.outputs import ModelOutput
from course_lib.modules.relative_position import (
    attention_scale,
    c2p_index,
    p2c_index,
    relative_position,
)


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
        """BERT's sum without the positions (DeBERTa's default): they enter the attention."""
        x = self.word_embeddings(input_ids)  # (B, T, C)
        if self.position_biased_input:
            x = x + self.position_embeddings(self.position_ids(input_ids))
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class DisentangledSelfAttention(MultiHeadSelfAttention):
    """BERT's attention (projections, head split, softmax, merge) with one method changed:
    `scores` = c2c + c2p + p2c (see the module docstring). Adds the optional position
    projections and the gathers that turn (T, 2k) position scores into (T, S) maps.
    Shapes: B batch, nh heads, T query length, S key length, hs head size, 2k table rows.
    """

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__(config)
        relative = config.relative_attention
        self.pos_att_type: tuple[str, ...] = tuple(config.pos_att_type) if relative else ()
        self.share_att_key = config.share_att_key
        self.paper_p2c = config.paper_p2c
        # sqrt(hs * (1 + number of position terms)), not BERT's sqrt(hs): each term adds a sum of
        # hs products, so this keeps the summed score at the variance BERT's c2c alone has.
        self.scale = attention_scale(self.head_dim, self.pos_att_type)
        hidden = config.hidden_size
        separate = relative and not self.share_att_key
        self.pos_key = (
            nn.Linear(hidden, hidden) if separate and "c2p" in self.pos_att_type else None
        )
        self.pos_query = (
            nn.Linear(hidden, hidden) if separate and "p2c" in self.pos_att_type else None
        )
        self.pos_dropout = nn.Dropout(config.hidden_dropout_prob)

    def scores(
        self,
        q: Tensor,
        k: Tensor,
        rel_embeddings: Tensor | None = None,
        relative_pos: Tensor | None = None,
    ) -> Tensor:
        """(B, nh, T, hs), (B, nh, S, hs) -> (B, nh, T, S): c2c + c2p + p2c, what the softmax
        sees. BERT's forward calls it with the encoder's relative inputs as `score_inputs`."""
        return sum(self.terms(q, k, rel_embeddings, relative_pos).values())

    def terms(
        self, q: Tensor, k: Tensor, rel_embeddings: Tensor | None, relative_pos: Tensor | None
    ) -> dict[str, Tensor]:
        """Each score term as its own (B, nh, T, S) map, already divided by the shared scale.

        `rel_embeddings` is the (2k, C) relative table, `relative_pos` the (T, S) (bucketed)
        distances i - j, both from DebertaEncoder.relative_inputs.
        """
        terms = {"c2c": q @ k.transpose(-1, -2) / self.scale}  # (B, nh, T, S), as in BERT
        if not self.pos_att_type:
            return terms
        if rel_embeddings is None or relative_pos is None:
            raise ValueError(
                "position terms need rel_embeddings and relative_pos (see DebertaEncoder)."
            )
        # One table for the whole batch: a leading 1 lets split_heads treat it as a batch of one.
        rel = self.pos_dropout(rel_embeddings)[None]  # (1, 2k, C)
        span = rel.shape[1] // 2
        batch, heads, q_len, k_len = terms["c2c"].shape
        if "c2p" in self.pos_att_type:
            # The distances seen as keys: Q_i · K^r[d] for every query i and every distance d.
            key_r = self.split_heads((self.key if self.share_att_key else self.pos_key)(rel))
            by_distance = q @ key_r.transpose(-1, -2)  # (B, nh, T, 2k)
            # Then, for each key j, keep the column of its distance δ(i, j): (B, nh, T, S).
            index = c2p_index(relative_pos, span).expand(batch, heads, q_len, k_len)
            terms["c2p"] = torch.gather(by_distance, -1, index) / self.scale
        if "p2c" in self.pos_att_type:
            # The distances seen as queries: K_j · Q^r[d] for every key j and every distance d.
            query_r = self.split_heads((self.query if self.share_att_key else self.pos_query)(rel))
            by_distance = k @ query_r.transpose(-1, -2)  # (B, nh, S, 2k)
            # Rows are keys here, so gather with the transposed (S, T) index, then transpose the
            # result back to (B, nh, T, S) so it adds to c2c entry by entry.
            index = p2c_index(relative_pos, span, paper=self.paper_p2c).T
            index = index.expand(batch, heads, k_len, q_len)
            terms["p2c"] = torch.gather(by_distance, -1, index).transpose(-1, -2) / self.scale
        return terms

    def score_terms(
        self,
        hidden: Tensor,
        rel_embeddings: Tensor | None,
        relative_pos: Tensor | None,
        key_value_states: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """`terms` for the input `hidden` (B, T, C), before the mask and softmax, to plot each
        term on its own; keys from `key_value_states` when given (as in forward)."""
        keys_from = hidden if key_value_states is None else key_value_states
        q = self.split_heads(self.query(hidden))  # (B, nh, T, hs)
        k = self.split_heads(self.key(keys_from))  # (B, nh, S, hs)
        return self.terms(q, k, rel_embeddings, relative_pos)


class DebertaLayer(EncoderLayer):
    """BERT's layer (same residuals, norms and pre-LN option) with disentangled attention."""

    attention_class = DisentangledSelfAttention

    def forward(
        self,
        x: Tensor,
        pair_mask: Tensor | None = None,
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
            return super().forward(x, pair_mask, output_attentions, **relative)
        keys = self.attention_norm(x) if self.pre_layer_norm else x
        return super().forward(
            query_states, pair_mask, output_attentions, **relative, key_value_states=keys
        )

    def score_terms(
        self, x: Tensor, rel_embeddings: Tensor | None, relative_pos: Tensor | None
    ) -> dict[str, Tensor]:
        """This layer's per-term score maps for input x (see DisentangledSelfAttention)."""
        inputs = self.attention_norm(x) if self.pre_layer_norm else x
        return self.attention.score_terms(inputs, rel_embeddings, relative_pos)


class DebertaEncoder(Encoder):
    """BERT's stack and loop, plus the relative-position table that every layer shares (and its
    LayerNorm), and the pair mask."""

    layer_class = DebertaLayer

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__(config)
        self.position_buckets = config.position_buckets
        self.max_relative_positions = config.max_relative_distance
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
        """(relative table after its LayerNorm (2k, C), bucketed distances i - j (T, T));
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
    def pair_mask(keep_mask: Tensor) -> Tensor:
        """keep_mask (B, 1, 1, T) -> pair_mask (B, 1, T, T): (i, j) is kept only when both
        tokens are real, as in DeBERTa (a padded query attends uniformly to everything)."""
        return keep_mask & keep_mask.transpose(-1, -2)

    def forward(
        self,
        x: Tensor,
        keep_mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        """x (B, T, C), keep_mask (B, 1, 1, T) from BertModel's forward. BERT's loop then runs
        with the pair mask (B, 1, T, T), every layer receiving the same relative inputs."""
        pair_mask = None
        if keep_mask is not None:
            # Padded positions start as zero vectors (as in transformers' DeBERTa embeddings).
            x = x * keep_mask[:, 0, 0, :, None].to(x.dtype)  # (B, T, C)
            pair_mask = self.pair_mask(keep_mask)
        rel_embeddings, relative_pos = self.relative_inputs(x.shape[1], x.device)
        return super().forward(
            x,
            pair_mask,
            output_attentions,
            output_hidden_states,
            rel_embeddings=rel_embeddings,
            relative_pos=relative_pos,
        )


class ContextPooler(nn.Module):
    """DeBERTa's sentence vector: dropout, dense and an activation (GELU, not tanh) on token 0."""

    def __init__(self, config: DebertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.pooler_dropout)
        self.act = get_activation(config.pooler_hidden_act)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.act(self.dense(self.dropout(hidden[:, 0])))  # (B, T, C) -> (B, C)


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
        """For every layer: {"c2c", "c2p", "p2c" (the terms in pos_att_type): (B, nh, T, T)
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


# Each task model names what it changes relative to its BERT parent: the config and the backbone.


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
        """As BertForMaskedLM's; with EMD, the MLM head reads the decoder's states instead of
        the last layer's (the decoder needs the states that entered the last layer)."""
        use_emd = self.config.use_emd
        out = self.backbone(
            input_ids,
            attention_mask,
            token_type_ids,
            output_attentions,
            output_hidden_states or use_emd,
        )
        hidden = out.last_hidden_state  # (B, T, C)
        if use_emd:
            hidden = self.enhanced_mask_decoder(input_ids, attention_mask, out.hidden_states)
        loss, logits, positions = masked_lm_loss(self.mlm_head, hidden, labels)
        return replace(
            out,
            hidden_states=out.hidden_states if output_hidden_states else None,
            loss=loss,
            mlm_loss=loss,
            mlm_logits=logits,
            mlm_positions=positions,
        )

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
        hidden = hidden_states[-2]  # (B, T, C)
        embeddings, encoder = self.backbone.embeddings, self.backbone.encoder
        layer = encoder.layers[-1]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        pair_mask = encoder.pair_mask(attention_mask[:, None, None, :].bool())  # (B, 1, T, T)
        relative = encoder.relative_inputs(input_ids.shape[1], input_ids.device)
        query = hidden + embeddings.position_embeddings(embeddings.position_ids(input_ids))
        for _ in range(self.config.emd_steps):
            query, _ = layer(hidden, pair_mask, False, *relative, query_states=query)
        return encoder.final_norm(query) if encoder.final_norm is not None else query


class DebertaForSequenceClassification(BertForSequenceClassification):
    """One label per sequence from the ContextPooler's vector (transformers' layout)."""

    config_class = DebertaConfig
    base_model_class = DebertaModel


class DebertaForTokenClassification(BertForTokenClassification):
    """One label per token: BERT's head."""

    config_class = DebertaConfig
    base_model_class = DebertaModel


class DebertaForQuestionAnswering(BertForQuestionAnswering):
    """Extractive QA: start and end logits per token."""

    config_class = DebertaConfig
    base_model_class = DebertaModel
