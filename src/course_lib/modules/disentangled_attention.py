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

from course_lib.config import BertConfig
from course_lib.modules.attention import MultiHeadSelfAttention
from course_lib.modules.relative_position import attention_scale, c2p_index, p2c_index


class DisentangledSelfAttention(MultiHeadSelfAttention):
    """BERT's query/key/value/output projections, scores = c2c + c2p + p2c (see module docstring).

    Reuses `split_heads` and the four linears of MultiHeadSelfAttention; adds the optional
    position projections and the gathers that turn [q, 2k] position scores into [q, k] maps.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        relative = getattr(config, "relative_attention", False)
        self.pos_att_type: tuple[str, ...] = tuple(config.pos_att_type) if relative else ()
        self.share_att_key = getattr(config, "share_att_key", True)
        self.paper_p2c = getattr(config, "paper_p2c", False)
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
        rel_embeddings: Tensor | None = None,
        relative_pos: Tensor | None = None,
        query_states: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Each score term as a [batch, heads, q, k] map, already divided by the shared scale and
        before the padding mask and softmax: their sum is what the softmax sees.

        `rel_embeddings` is the [2 * span, hidden] relative table, `relative_pos` the [q, k]
        (bucketed) distances i - j; `query_states` (default: `hidden`) supplies the queries,
        which the enhanced mask decoder sets to hidden + absolute positions.
        """
        query_states = hidden if query_states is None else query_states
        q = self.split_heads(self.query(query_states))
        k = self.split_heads(self.key(hidden))
        terms = {"c2c": q @ k.transpose(-1, -2) / self.scale}
        if not self.pos_att_type:
            return terms
        if rel_embeddings is None or relative_pos is None:
            raise ValueError(
                "position terms need rel_embeddings and relative_pos (see DebertaEncoder)."
            )
        rel = self.pos_dropout(rel_embeddings)[None]  # [1, 2 * span, hidden]
        span = rel.shape[1] // 2
        batch, heads, q_len, k_len = terms["c2c"].shape
        if "c2p" in self.pos_att_type:
            key_r = self.split_heads((self.key if self.share_att_key else self.pos_key)(rel))
            # [batch, heads, q, 2 * span]: query i against every distance; then pick, for each
            # key j, the column of distance δ(i, j).
            by_distance = q @ key_r.transpose(-1, -2)
            index = c2p_index(relative_pos, span).expand(batch, heads, q_len, k_len)
            terms["c2p"] = torch.gather(by_distance, -1, index) / self.scale
        if "p2c" in self.pos_att_type:
            query_r = self.split_heads((self.query if self.share_att_key else self.pos_query)(rel))
            # [batch, heads, k, 2 * span]: key j against every distance; gather along the
            # distance axis with the transposed index, then transpose back to [q, k].
            by_distance = k @ query_r.transpose(-1, -2)
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
        query_states: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        # The position terms must be materialised anyway, so the score matrix is built
        # explicitly (as in transformers' eager code) rather than with the fused SDPA kernel.
        scores = sum(self.score_terms(hidden, rel_embeddings, relative_pos, query_states).values())
        if mask is not None:
            # mask: boolean keep-mask broadcastable to [batch, heads, q, k]. Filled (not added)
            # with the most negative finite value, so a fully padded row is uniform, not NaN.
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)
        context = self.attn_dropout(probs) @ self.split_heads(self.value(hidden))
        b, _, s, _ = context.shape
        context = context.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim)
        return self.output(context), probs if output_attentions else None
