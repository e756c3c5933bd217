"""Rotary position embeddings (RoPE; Su et al. 2021, RoFormer): positions as rotations of q and k.

BERT adds a learned vector per position to its input, so it knows positions up to the table's
length and no further. RoPE adds nothing: in every layer it turns each query and key by an
angle proportional to its position. Features p and p + d/2 form a pair (a 2-d plane) that
turns by `position * theta ** (-2p / d)`: fast for the first pairs, slow for the last.
Because turning q by angle a and k by angle b changes q . k exactly as turning q by a - b
would, the score of query i and key j depends on the positions only through i - j.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rotary_frequencies(head_dim: int, theta: float) -> Tensor:
    """(d/2,) angles per position, theta ** (-2p / d) for pair p, as transformers computes them."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))


def rotate_half(x: Tensor) -> Tensor:
    """(..., d) -> (..., d): each pair (x_p, x_{p+d/2}) becomes (-x_{p+d/2}, x_p), a quarter turn."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Turn every pair of features of x by its angle: x cos + rotate_half(x) sin (in float32).

    x (..., T, nh, hs) or (N, nh, hs); cos and sin (T, 1, hs) or (N, 1, hs), one row per position.
    """
    turned = x.float() * cos + rotate_half(x.float()) * sin
    return turned.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """cos and sin of every position's angles, for one rotary base theta (no parameters)."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.theta = theta
        # Recomputed from theta, never trained: not part of the state dict (as in transformers).
        self.register_buffer("inv_freq", rotary_frequencies(head_dim, theta), persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """positions (...,) integers -> cos, sin (..., hs); pair p uses features p and p + d/2."""
        angles = positions[..., None].float() * self.inv_freq  # (..., hs/2)
        angles = torch.cat((angles, angles), dim=-1)  # (..., hs)
        return angles.cos(), angles.sin()
