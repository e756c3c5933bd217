"""Multi-head self-attention, written out once by hand and once with PyTorch's fused SDPA."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import BertConfig


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d) + mask) V, returning the output and the attention probabilities.

    `mask` is additive ([.., 1 or q, k], 0 for keep and a very negative number for padding), so
    padded keys get probability exactly 0 after the softmax.
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores + mask
    probs = scores.softmax(dim=-1)
    out = (dropout(probs) if dropout is not None else probs) @ value
    return out, probs


class MultiHeadSelfAttention(nn.Module):
    """Project to heads, attend, merge heads, project back: the sublayer of every encoder layer.

    Two paths compute the same thing: the fused `F.scaled_dot_product_attention` (fast, never
    materialises the probabilities) and the explicit one above (used when the caller asks for
    attention maps, for teaching and visualization).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, C) -> (B, nh, T, hs): each head attends over the whole sequence on its own."""
        b, s, _ = x.shape
        return x.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self, hidden: Tensor, mask: Tensor | None = None, output_attentions: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, C) -> (B, T, C), and the attention probabilities (B, nh, T, T) when asked for.

        B batch, T sequence length, C hidden size, nh heads, hs = C / nh the head size. `mask`
        is a boolean keep-mask (B, 1, 1, T) or an additive one broadcastable to (B, nh, T, T).
        """
        q = self.split_heads(self.query(hidden))  # (B, nh, T, hs)
        k = self.split_heads(self.key(hidden))  # (B, nh, T, hs)
        v = self.split_heads(self.value(hidden))  # (B, nh, T, hs)
        if mask is not None and mask.dtype == torch.bool:
            mask = additive_mask(mask, q.dtype)  # (B, 1, 1, T): 0 keep, most negative = padding
        if output_attentions:  # explicit path: (B, nh, T, T) scores -> softmax -> @ v
            context, probs = scaled_dot_product_attention(q, k, v, mask, self.attn_dropout)
        else:  # fused path: the (B, nh, T, T) probabilities are never stored
            drop = self.dropout_p if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
            probs = None
        # context (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C): the heads side by side again
        b, _, s, _ = context.shape
        context = context.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim)
        return self.output(context), probs  # (B, T, C), (B, nh, T, T) or None


def additive_mask(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean keep-mask (True = attend) -> additive mask of 0 / the most negative finite value in
    `dtype`. Built in the dtype the scores are computed in (bf16/fp16 under autocast), and finite
    rather than -inf so that a fully padded row gives uniform weights instead of NaN."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(
        ~keep, torch.finfo(dtype).min
    )
