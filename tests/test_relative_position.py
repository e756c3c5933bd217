"""The relative-distance functions: hand-computed values, the paper's δ, and transformers' code."""

import math

import pytest
import torch
from transformers.models.deberta_v2 import modeling_deberta_v2 as ref

from course_lib.modules.relative_position import (
    attention_scale,
    c2p_index,
    delta,
    log_bucket_position,
    p2c_index,
    relative_position,
)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny ops on a shared 2-core machine: a second OpenMP thread only adds spin-waiting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_relative_position_is_query_minus_key():
    rel = relative_position(3, 5)
    assert rel.dtype == torch.long
    assert rel.tolist() == [[0, -1, -2, -3, -4], [1, 0, -1, -2, -3], [2, 1, 0, -1, -2]]


def test_log_buckets_by_hand():
    # bucket_size 8 -> mid 4: |d| <= 4 exact; beyond, ceil(log(|d|/4) / log(15/4) * 3) + 4
    d = torch.tensor([-20, -16, -15, -5, -4, -3, 0, 3, 4, 5, 8, 10, 15, 16, 20])
    expected = [-8, -8, -7, -5, -4, -3, 0, 3, 4, 5, 6, 7, 7, 8, 8]
    assert log_bucket_position(d, 8, 16).long().tolist() == expected


@pytest.mark.parametrize("bucket_size, max_position", [(8, 16), (16, 64), (256, 512), (6, 40)])
def test_log_buckets_shape(bucket_size, max_position):
    d = torch.arange(-3 * max_position, 3 * max_position + 1)
    b = log_bucket_position(d, bucket_size, max_position).long()
    mid = bucket_size // 2
    near = d.abs() <= mid
    assert torch.equal(b[near], d[near])  # near distances stay exact
    assert torch.equal(b, -b.flip(0))  # odd: the sign says which side
    assert bool((b.diff() >= 0).all())  # monotone: farther never maps nearer
    assert b[d == max_position - 1].item() == bucket_size - 1  # the far end of the range
    # every bucket between mid and bucket_size - 1 is used: no wasted rows of the table
    assert set(b[(d > mid) & (d < max_position)].tolist()) == set(range(mid + 1, bucket_size))


@pytest.mark.parametrize("q_len, k_len", [(13, 13), (5, 9), (9, 5)])
@pytest.mark.parametrize("bucket_size, max_position", [(-1, -1), (8, 16), (16, 64), (4, 512)])
def test_relative_position_equals_transformers(q_len, k_len, bucket_size, max_position):
    theirs = ref.build_relative_position(
        torch.empty(q_len, 1),
        torch.empty(k_len, 1),
        bucket_size=bucket_size,
        max_position=max_position,
    )[0]
    assert torch.equal(relative_position(q_len, k_len, bucket_size, max_position), theirs)


def test_log_bucket_equals_transformers_on_every_distance():
    d = torch.arange(-1100, 1101)
    for bucket_size, max_position in [(256, 512), (8, 16), (32, 128)]:
        assert torch.equal(
            log_bucket_position(d, bucket_size, max_position),
            ref.make_log_bucket_position(d, bucket_size, max_position),
        )


def test_log_bucket_rejects_degenerate_settings():
    with pytest.raises(ValueError, match="bucket_size >= 2"):
        log_bucket_position(torch.arange(5), 1, 16)
    with pytest.raises(ValueError, match="max_position - 1 > bucket_size // 2"):
        log_bucket_position(torch.arange(5), 8, 5)


def test_paper_delta_clips_at_k():
    k = 2
    assert [delta(d, 0, k) for d in range(-4, 5)] == [0, 0, 0, 1, 2, 3, 3, 3, 3]
    assert delta(7, 3, 10) == 14
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    table = delta(i, j, k)
    assert table.min().item() == 0 and table.max().item() == 2 * k - 1
    assert table[5, 0].item() == 3 and table[0, 5].item() == 0 and table[2, 2].item() == k
    with pytest.raises(ValueError, match="k must be >= 1"):
        delta(1, 0, 0)


def test_table_indices_match_the_paper():
    k, n = 4, 11
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    rel = relative_position(n, n)
    assert torch.equal(c2p_index(rel, k), delta(i, j, k))
    # released code: p2c reads the same row as c2p; the paper's eq. 4 reads δ(j, i)
    assert torch.equal(p2c_index(rel, k), delta(i, j, k))
    assert torch.equal(p2c_index(rel, k, paper=True), delta(j, i, k))
    assert torch.equal(p2c_index(rel, k, paper=True), c2p_index(rel, k).T)


def test_scale_counts_the_position_terms():
    assert attention_scale(64, []) == 8.0
    assert attention_scale(64, ["p2c"]) == math.sqrt(128)
    assert attention_scale(64, ["c2p", "p2c"]) == math.sqrt(192)
