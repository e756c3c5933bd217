"""Relative distances for DeBERTa: i - j, clipped (the paper's δ) or log-bucketed (v2/v3).

DeBERTa never adds "I am token 7" to the input. Instead each attention score (i, j) looks up an
embedding of the *distance* i - j. Three small functions build the lookup indices:

    relative_position(q_len, k_len, bucket_size, max_position)    i - j, optionally log-bucketed
    log_bucket_position(relative_pos, bucket_size, max_position)  exact near 0, log far away
    delta(i, j, k)                                                the paper's δ(i, j), clipped at k

and two turn distances into rows of the shared embedding table of 2k rows:
`c2p_index` (content-to-position) and `p2c_index` (position-to-content).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def log_bucket_position(relative_pos: Tensor, bucket_size: int, max_position: int) -> Tensor:
    """Keep distances with |d| <= bucket_size // 2 exact; compress larger ones logarithmically so
    that |d| = max_position - 1 lands on bucket_size - 1 (v2/v3's `make_log_bucket_position`).

    Near tokens need exact offsets ("the next word"); far ones only need "far, and which side",
    so 256 buckets cover 512 positions. The sign of the distance is kept.
    """
    if bucket_size < 2 or max_position - 1 <= bucket_size // 2:
        raise ValueError(
            f"log buckets need bucket_size >= 2 and max_position - 1 > bucket_size // 2, got "
            f"bucket_size={bucket_size}, max_position={max_position}."
        )
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    # Replace the small distances by a dummy (mid - 1) so the log below never sees 0; they are
    # taken from `relative_pos` unchanged in the last line anyway.
    abs_pos = torch.where(
        (relative_pos < mid) & (relative_pos > -mid),
        torch.tensor(mid - 1).type_as(relative_pos),
        torch.abs(relative_pos),
    )
    # Written exactly as transformers does (same float32 operations), so every bucket matches.
    log_pos = (
        torch.ceil(
            torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)
        )
        + mid
    )
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)


def relative_position(
    q_len: int,
    k_len: int,
    bucket_size: int = -1,
    max_position: int = -1,
    device: torch.device | str | None = None,
) -> Tensor:
    """[q_len, k_len] long tensor of query position minus key position, i - j; log-bucketed when
    both bucket_size and max_position are > 0 (transformers' `build_relative_position`)."""
    q_ids = torch.arange(q_len, dtype=torch.long, device=device)
    k_ids = torch.arange(k_len, dtype=torch.long, device=device)
    rel = q_ids[:, None] - k_ids[None, :]
    if bucket_size > 0 and max_position > 0:
        rel = log_bucket_position(rel, bucket_size, max_position)
    return rel.to(torch.long)


def delta(i: int | Tensor, j: int | Tensor, k: int) -> int | Tensor:
    """The paper's δ(i, j) (He et al. 2021, eq. 3): i - j shifted by k and clipped to [0, 2k),
    i.e. 0 for i - j <= -k, 2k - 1 for i - j >= k, else i - j + k. A row of the 2k-row table."""
    if k < 1:
        raise ValueError(f"the clipping distance k must be >= 1, got {k}.")
    d = i - j + k
    if isinstance(d, Tensor):
        return d.clamp(0, 2 * k - 1)
    return min(max(d, 0), 2 * k - 1)


def c2p_index(relative_pos: Tensor, span: int) -> Tensor:
    """Row of the relative table read by query i for key j in the content-to-position term:
    δ(i, j) = clip(bucket(i - j) + span). `relative_pos` is [q, k] from `relative_position`."""
    return torch.clamp(relative_pos + span, 0, 2 * span - 1)


def p2c_index(relative_pos: Tensor, span: int, paper: bool = False) -> Tensor:
    """Row read for (query i, key j) in the position-to-content term K_j · Q^r[row].

    transformers and Microsoft's code use δ(i, j), the same row as c2p (`paper=False`, needed for
    parity with released checkpoints). Equation 4 of the paper writes δ(j, i), the mirror-image
    row (`paper=True`). Both give every (i, j) pair its own distance embedding; they differ in
    which direction is called "before".
    """
    if paper:
        return torch.clamp(-relative_pos + span, 0, 2 * span - 1)
    return c2p_index(relative_pos, span)


def attention_scale(head_dim: int, pos_att_type: list[str] | tuple[str, ...]) -> float:
    """sqrt(d · (1 + number of position terms)): each term adds a sum of d products of the same
    size, so dividing by this keeps the summed score at unit variance, as 1/sqrt(d) does in BERT."""
    n_terms = sum(term in pos_att_type for term in ("c2p", "p2c"))
    return math.sqrt(head_dim * (1 + n_terms))
