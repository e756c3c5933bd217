"""Unpadding: pack the real tokens of a padded batch into one row, and put them back.

A batch of sentences of different lengths is padded to the longest; every padded position
still costs a full pass through every linear layer. Packed, the linear layers see only the N
real tokens, and attention runs per sequence (`cu_seqlens` offsets, as flash-attention's
variable-length kernel takes them). The outputs at the real positions do not change.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Packing:
    """Where the N packed tokens came from. Sequence b is rows cu_seqlens[b]:cu_seqlens[b+1]."""

    indices: Tensor  # (N,) flat index b * T + t of every real token in the padded batch
    positions: Tensor  # (N,) its column t: the position id rotary embeddings see, as unpadded
    cu_seqlens: list[int]  # (B + 1,) offsets of each sequence in the packed rows
    first: list[int]  # column of each row's first real token (0 with right padding)
    batch: int
    seq_len: int

    def unpack(self, packed: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zeros at the padded positions."""
        out = packed.new_zeros(self.batch * self.seq_len, *packed.shape[1:])
        out[self.indices] = packed
        return out.unflatten(0, (self.batch, self.seq_len))

    def unpack_attention(self, probs: list[Tensor | None]) -> Tensor:
        """Per-sequence maps [(1, nh, n_b, n_b)] -> (B, nh, T, T), zero rows and columns at padding."""
        nh = next(p.shape[1] for p in probs if p is not None)
        ref = next(p for p in probs if p is not None)
        out = ref.new_zeros(self.batch, nh, self.seq_len, self.seq_len)
        for b, p in enumerate(probs):
            if p is not None:
                s, n = self.first[b], p.shape[-1]
                out[b, :, s : s + n, s : s + n] = p[0]
        return out


def pack(x: Tensor, keep: Tensor) -> tuple[Tensor, Packing]:
    """x (B, T, C), keep (B, T) boolean -> (N, C) real tokens in order, and how to put them back.

    Each row's real tokens must be one contiguous block (right or left padding): packed, they
    become neighbours, which would change local attention windows if the mask had holes.
    """
    b, t = keep.shape
    keep = keep.bool()
    lengths = keep.sum(dim=1)
    first = keep.int().argmax(dim=1)
    last = t - 1 - keep.flip(1).int().argmax(dim=1)
    holes = (lengths > 0) & (last - first + 1 != lengths)
    if bool(holes.any()):
        raise ValueError(
            f"unpad=True needs each row's real tokens to be one contiguous block (right or "
            f"left padding); rows {holes.nonzero().flatten().tolist()} of attention_mask have "
            f"holes. Use unpad=False for such masks."
        )
    indices = keep.flatten().nonzero().flatten()  # (N,)
    cu_seqlens = [0, *torch.cumsum(lengths, 0).tolist()]
    packing = Packing(indices, indices % t, cu_seqlens, first.tolist(), b, t)
    return x.flatten(0, 1)[indices], packing
