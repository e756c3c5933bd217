"""Sliding-window (local) attention: token i attends only to tokens j with |i - j| <= w.

As a mask on the full T x T scores it gives the right answer but saves nothing: every score is
still computed. Computed block by block, it costs O(T * 3w) instead of O(T^2): the queries are
cut into blocks of w positions, and block n only needs the keys from n*w - w to n*w + 2w.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def sliding_window_mask(
    seq_len: int, half_window: int, device: torch.device | None = None
) -> Tensor:
    """(T, T) boolean: True where |i - j| <= half_window (the band a local layer may attend)."""
    i = torch.arange(seq_len, device=device)
    return (i[:, None] - i[None, :]).abs() <= half_window


def sliding_window_attention(
    q: Tensor, k: Tensor, v: Tensor, keep: Tensor | None, half_window: int, dropout_p: float = 0.0
) -> Tensor:
    """softmax(q k^T / sqrt(hs)) v restricted to |i - j| <= w, computed in blocks of w queries.

    q, k, v (B, nh, T, hs); keep (B, T) boolean (False = padding) or None. Returns (B, nh, T, hs),
    equal to full attention under `sliding_window_mask` (tests/test_modernbert.py checks it).
    """
    b, nh, t, hs = q.shape
    w = half_window
    n = -(-t // w)  # query blocks of w positions (the last one zero-padded)
    right = n * w - t
    # Pad keys/values by w on the left and w + right on the right: block n's window is then
    # padded positions [n*w, n*w + 3w), i.e. original positions [n*w - w, n*w + 2w).
    kw = F.pad(k, (0, 0, w, w + right)).unfold(2, 3 * w, w)  # (B, nh, n, hs, 3w)
    vw = F.pad(v, (0, 0, w, w + right)).unfold(2, 3 * w, w)  # (B, nh, n, hs, 3w)
    qb = F.pad(q, (0, 0, 0, right)).unflatten(2, (n, w))  # (B, nh, n, w, hs)
    scores = torch.einsum("bhnqd,bhndk->bhnqk", qb, kw) / math.sqrt(hs)  # (B, nh, n, w, 3w)
    # Query r of block n sits at n*w + r, key c of its window at n*w - w + c: distance c - w - r.
    r = torch.arange(w, device=q.device)[:, None]
    c = torch.arange(3 * w, device=q.device)[None, :]
    band = (c - w - r).abs() <= w  # (w, 3w)
    real = torch.ones(b, t, dtype=torch.bool, device=q.device) if keep is None else keep
    real = F.pad(real, (w, w + right), value=False).unfold(1, 3 * w, w)  # (B, n, 3w)
    allowed = band & real[:, None, :, None, :]  # (B, 1, n, w, 3w)
    # The most negative finite number, not -inf: a padded query with no real key in its window
    # gets finite (ignored) weights instead of NaN, which would leak through 0 * NaN.
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        probs = F.dropout(probs, dropout_p)
    context = torch.einsum("bhnqk,bhndk->bhnqd", probs, vw)  # (B, nh, n, w, hs)
    return context.flatten(2, 3)[:, :, :t]  # (B, nh, T, hs)
