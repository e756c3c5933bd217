"""Chapter 03's mechanism labs (course_lib.labs.albert): the fast preset runs, and the task
generators have the properties the labs rely on."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs import albert as lab
from course_lib.labs import get_lab, run_lab
from course_lib.models.albert import AlbertForMaskedLM

LABS = ("factorized_embedding_bottleneck", "sop_vs_nsp", "sop_transfers_to_nsp")


@pytest.mark.parametrize("name", LABS)
def test_fast_preset_returns_a_finite_value_for_every_arm(name: str) -> None:
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    spec = get_lab(name)
    assert result["chapter"] == "03_albert" and result["lab"] == name
    assert list(result["arms"]) == list(spec.arms) and result["compare"] == list(spec.compare)
    assert result["seeds"] == 1 and result["preset"] == "fast"
    for arm, values in result["arms"].items():
        assert len(values) == 1 and math.isfinite(values[0]), arm


# ----- factorized_embedding_bottleneck --------------------------------------------------------


def test_bigram_table_is_a_full_rank_distribution() -> None:
    log_table = lab.bigram_log_table(0)
    p = log_table.exp()
    assert p.shape == (lab.N_WORDS, lab.N_WORDS)
    assert torch.allclose(p.sum(-1), torch.ones(lab.N_WORDS, dtype=p.dtype))
    assert torch.linalg.matrix_rank(p) == lab.N_WORDS
    # rank of the log-probabilities with each row's normaliser removed: what logits must express
    centered = log_table - log_table.mean(-1, keepdim=True)
    assert torch.linalg.matrix_rank(centered) >= lab.N_WORDS - 1
    assert not torch.equal(log_table, lab.bigram_log_table(1))  # one language per seed


def test_conditional_entropy_matches_a_monte_carlo_estimate() -> None:
    log_table = lab.bigram_log_table(0)
    pairs = lab.sample_bigrams(log_table, 40_000, torch.Generator().manual_seed(1))
    surprise = -log_table[pairs[:, 0], pairs[:, 1]]  # -log P(next | prev) of each sample
    estimate, se = float(surprise.mean()), float(surprise.std()) / math.sqrt(len(surprise))
    exact = lab.conditional_entropy(log_table)
    assert abs(estimate - exact) < 4 * se
    assert 0 < exact < math.log(lab.N_WORDS)  # the context helps, but does not decide


def test_expected_loss_is_the_average_of_sampled_mlm_losses() -> None:
    torch.manual_seed(0)
    log_table = lab.bigram_log_table(0)
    model = AlbertForMaskedLM(lab.embedding_config(16)).eval()
    prev = torch.arange(lab.N_WORDS)
    with torch.no_grad():
        soft = float(lab.expected_mlm_loss(model, log_table, prev))
        logits = model(lab.masked_inputs(prev)).mlm_logits[:, 1]  # (V_words, V)
    g = torch.Generator().manual_seed(2)
    nxt = torch.multinomial(log_table.exp(), 200, replacement=True, generator=g)  # (512, 200)
    sampled = F.cross_entropy(
        logits.repeat_interleave(200, 0), nxt.flatten() + lab.N_SPECIAL, reduction="none"
    )
    se = float(sampled.std()) / math.sqrt(sampled.numel())
    assert abs(float(sampled.mean()) - soft) < 4 * se


@pytest.mark.parametrize("e", [8, 16])
def test_logits_over_the_vocabulary_have_rank_at_most_e_plus_one(e: int) -> None:
    torch.manual_seed(0)
    model = AlbertForMaskedLM(lab.embedding_config(e)).eval()
    with torch.no_grad():
        logits = model(lab.masked_inputs(torch.arange(lab.N_WORDS))).mlm_logits[:, 1].double()
    # float32 noise sits ~1e-8 of the largest singular value; real directions far above it
    assert torch.linalg.matrix_rank(logits, rtol=1e-5) <= e + 1  # tied V x E decoder, + bias


def test_arms_differ_in_embedding_size_only() -> None:
    a, b = lab.embedding_config(8).to_dict(), lab.embedding_config(64).to_dict()
    assert {k for k in a if a[k] != b[k]} == {"embedding_size"}
    counts = lab.embedding_arm_parameters()
    assert list(counts) == ["E8", "E16", "E32", "E64"]
    assert counts["E8"] < counts["E16"] < counts["E32"] < counts["E64"]
    built = AlbertForMaskedLM(lab.embedding_config(32))
    assert counts["E32"] == sum(p.numel() for p in built.parameters())


# ----- sop_vs_nsp, sop_transfers_to_nsp -------------------------------------------------------


def test_pairs_share_their_positives_and_differ_in_negatives() -> None:
    nsp = lab.make_pairs("nsp", 3000, torch.Generator().manual_seed(0))
    sop = lab.make_pairs("sop", 3000, torch.Generator().manual_seed(0))
    assert torch.equal(nsp[2], sop[2]) and torch.equal(nsp[1], sop[1])
    positive = nsp[2] == 0
    assert torch.equal(nsp[0][positive], sop[0][positive])
    assert nsp[0].shape == (3000, lab.PAIR_LENGTH)
    assert int(nsp[0].max()) < lab.DOC_VOCAB and int(sop[0].max()) < lab.DOC_VOCAB
    a, b = lab.segment_counters(sop[0])
    jump = torch.where(positive, b - a, a - b)  # SOP: in order, or the same pair swapped
    assert set(jump.tolist()) == set(range(1, lab.MAX_JUMP + 1))
    assert bool((a >= 0).all() and (b < lab.N_COUNTERS).all())
    a, b = lab.segment_counters(nsp[0])
    assert bool((b[positive] > a[positive]).all())
    # an NSP negative's counter is random: sometimes larger than A's, sometimes not
    assert 0.3 < float((b[~positive] > a[~positive]).float().mean()) < 0.7


def test_the_topic_cue_is_one_shown_word() -> None:
    # one word a topic: a segment repeats it, so "same topic" is "the same token in A and B"
    ids, _, labels = lab.make_pairs("nsp", 2000, torch.Generator().manual_seed(5))
    a, b = lab.segment_words(ids)
    assert bool((a == a[:, :1]).all() and (b == b[:, :1]).all())
    assert torch.equal(a[:, 0] != b[:, 0], labels.bool())  # NSP: other word <=> negative
    ids, _, _ = lab.make_pairs("sop", 2000, torch.Generator().manual_seed(5))
    a, b = lab.segment_words(ids)
    assert torch.equal(a, b)  # SOP: both segments show the same word, swapped or not


def test_overlap_classifier_solves_nsp_and_is_at_chance_on_sop() -> None:
    g = torch.Generator().manual_seed(3)
    ids, _, labels = lab.make_pairs("nsp", 4000, g)
    assert float((lab.overlap_classifier(ids) == labels).float().mean()) > 0.99
    ids, _, labels = lab.make_pairs("sop", 4000, g)
    predicted = lab.overlap_classifier(ids)
    # order-blind by construction: the swapped twin of every pair gets the same answer ...
    swapped = ids.clone()
    swapped[:, 1 : lab.START_B - 1], swapped[:, lab.START_B : -1] = (
        ids[:, lab.START_B : -1],
        ids[:, 1 : lab.START_B - 1],
    )
    assert torch.equal(lab.overlap_classifier(swapped), predicted)
    # ... so on SOP (half the pairs swapped) it is at chance
    assert abs(float((predicted == labels).float().mean()) - 0.5) < 0.04


def test_order_rule_solves_sop_and_gets_part_of_nsp() -> None:
    g = torch.Generator().manual_seed(4)
    ids, _, labels = lab.make_pairs("sop", 4000, g)
    assert torch.equal(lab.order_rule(ids), labels)  # SOP is exactly the counters' order
    ids, _, labels = lab.make_pairs("nsp", 20_000, g)
    predicted = lab.order_rule(ids)
    assert bool((predicted[labels == 0] == 0).all())  # every NSP positive is in order
    # the negatives: right only where the random counter is not larger than A's
    assert 0.68 < float((predicted == labels).float().mean()) < 0.76
    # topic-blind: giving B other words (topic 0's first word throughout) changes nothing
    changed = ids.clone()
    changed[:, lab.START_B + 1 : -1] = lab.N_SPECIAL + lab.N_COUNTERS
    assert torch.equal(lab.order_rule(changed), predicted)
