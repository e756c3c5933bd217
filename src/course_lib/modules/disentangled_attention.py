"""DeBERTa's disentangled self-attention: BERT's attention plus two relative-position terms.

A token is represented twice: by its content H (the hidden state) and, for each pair (i, j), by
the embedding P of the relative distance between them. The score of query i for key j is

    A[i, j] = ( Q_i · K_j             c2c: content to content (BERT's only term)
              + Q_i · K^r[δ(i, j)]    c2p: query content to the distance between the two
              + K_j · Q^r[δ(i, j)]    p2c: the distance to key content (the paper writes δ(j, i))
              ) / sqrt(d · (1 + number of position terms))

where Q^r, K^r project the shared table of relative embeddings with the query/key weights
(`share_att_key=True`, DeBERTa v3) or with their own (`pos_query`, `pos_key`).
`score_terms` returns each term as its own [batch, heads, q, k] map, so they can be plotted.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.config import DebertaConfig
from course_lib.modules.attention import MultiHeadSelfAttention
from course_lib.modules.relative_position import attention_scale, c2p_index, p2c_index


class DisentangledSelfAttention(MultiHeadSelfAttention):
    """BERT's query/key/value/output projections, scores = c2c + c2p + p2c (see module docstring).

    Reuses `split_heads` and the four linears of MultiHeadSelfAttention; adds the optional
    position projections and the gathers that turn [q, 2k] position scores into [q, k] maps.
    Shapes below: B batch, nh heads, T query length, S key length, hs head size, 2k table rows.
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

    def score_terms(
        self,
        hidden: Tensor,
        rel_embeddings: Tensor | None,
        relative_pos: Tensor | None,
        key_value_states: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Each score term as a [batch, heads, q, k] map, already divided by the shared scale and
        before the padding mask and softmax: their sum is what the softmax sees.

        `hidden` supplies the queries; `rel_embeddings` is the [2 * span, hidden] relative table,
        `relative_pos` the [q, k] (bucketed) distances i - j; `key_value_states` (default:
        `hidden`) supplies the keys, which the enhanced mask decoder keeps from the encoder
        while its queries are hidden + absolute positions.
        """
        keys_from = hidden if key_value_states is None else key_value_states
        q = self.split_heads(self.query(hidden))  # (B, nh, T, hs)
        k = self.split_heads(self.key(keys_from))  # (B, nh, S, hs)
        terms = {"c2c": q @ k.transpose(-1, -2) / self.scale}  # (B, nh, T, S), as in BERT
        if not self.pos_att_type:
            return terms
        if rel_embeddings is None or relative_pos is None:
            raise ValueError(
                "position terms need rel_embeddings and relative_pos (see DebertaEncoder)."
            )
        # One table for the whole batch: a leading 1 lets split_heads treat it as a batch of one.
        rel = self.pos_dropout(rel_embeddings)[None]  # (1, 2k, hidden)
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
            # Rows are keys here, so gather with the transposed [S, T] index, then transpose the
            # result back to (B, nh, T, S) so it adds to c2c entry by entry.
            index = p2c_index(relative_pos, span, paper=self.paper_p2c).T
            index = index.expand(batch, heads, k_len, q_len)
            terms["p2c"] = torch.gather(by_distance, -1, index).transpose(-1, -2) / self.scale
        return terms

    def forward(
        self,
        hidden: Tensor,
        mask: Tensor | None = None,
        output_attentions: bool = False,
        rel_embeddings: Tensor | None = None,
        relative_pos: Tensor | None = None,
        key_value_states: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """hidden: (B, T, hidden) -> (B, T, hidden), and the (B, nh, T, S) probabilities when
        `output_attentions`. Keys and values come from `key_value_states` (default: hidden)."""
        values_from = hidden if key_value_states is None else key_value_states
        # The position terms must be materialised anyway, so the score matrix is built
        # explicitly (as in transformers' eager code) rather than with the fused SDPA kernel.
        terms = self.score_terms(hidden, rel_embeddings, relative_pos, key_value_states)
        scores = sum(terms.values())  # (B, nh, T, S): c2c + c2p + p2c, each already scaled
        if mask is not None:
            # mask: boolean keep-mask broadcastable to [batch, heads, q, k]. Filled (not added)
            # with the most negative finite value, so a fully padded row is uniform, not NaN.
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)  # (B, nh, T, S): each query's weights over the keys
        v = self.split_heads(self.value(values_from))  # (B, nh, S, hs)
        context = self.attn_dropout(probs) @ v  # (B, nh, T, hs)
        b, _, s, _ = context.shape
        # (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, hidden): the heads side by side again.
        context = context.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim)
        return self.output(context), probs if output_attentions else None
