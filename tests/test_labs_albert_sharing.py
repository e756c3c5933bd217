"""Chapter 03 labs, part B (cross-layer sharing): the fast presets run, and the task generators
have the properties the labs rely on."""

from __future__ import annotations

import math

import torch

from course_lib.counting import count_parameters
from course_lib.labs import albert_sharing as lab
from course_lib.labs import get_lab, run_lab
from course_lib.models.albert import AlbertForMaskedLM


def test_fast_presets_give_a_finite_value_for_every_arm() -> None:
    for name in ("sharing_hurts_two_relations", "sharing_fine_for_iteration"):
        result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
        spec = get_lab(name)
        assert result["chapter"] == "03_albert"
        assert set(result["arms"]) == set(spec.arms)
        assert result["compare"] == list(spec.compare)
        for values in result["arms"].values():
            assert len(values) == 1 and math.isfinite(values[0]) and 0 <= values[0] <= 1


def test_the_two_relations_are_fixed_permutations_that_never_agree() -> None:
    g = torch.Generator().manual_seed(1234)  # how they were drawn (the module's comment)
    assert list(lab.S1) == torch.randperm(lab.HOP_NODES, generator=g).tolist()
    assert list(lab.S2) == torch.randperm(lab.HOP_NODES, generator=g).tolist()
    assert all(a != b for a, b in zip(lab.S1, lab.S2))  # a hop along s1 is never one along s2


def test_hop_answers_follow_both_relations_in_turn() -> None:
    ids, answers = lab.sample_hops(50, torch.Generator().manual_seed(0))
    for f, answer in zip((ids - lab.N_SPECIAL).tolist(), (answers - lab.N_SPECIAL).tolist()):
        assert sorted(f) == list(range(lab.HOP_NODES))  # a permutation, laid out by position
        for x in range(lab.HOP_NODES):
            y = f[lab.S1[f[x]]]  # hop 1: from v = f(x) to the position s1(v)
            assert answer[x] == f[lab.S2[y]]  # hop 2: from y to the position s2(y)


def test_no_single_hop_reads_the_answer_but_one_hop_reads_a_one_hop_answer() -> None:
    generator = torch.Generator().manual_seed(1)
    ids, answers = lab.sample_hops(3000, generator)
    # The best "read the token at a position chosen from my own value" rule (one attention
    # hop, fitted to the answers) is near chance, 1/12 ...
    assert lab.one_hop_accuracy(ids, answers) < 0.15
    # ... while on a one-hop task the same rule is exact, so the measure can see a hop.
    ids1, answers1 = lab.sample_hops(300, torch.Generator().manual_seed(1), relations=(lab.S1,))
    assert lab.one_hop_accuracy(ids1, answers1) == 1.0


def test_repeating_one_relation_twice_never_gives_the_answer() -> None:
    # A shared layer that simply applied the same hop twice would answer with s1 twice or s2
    # twice. Since f is a bijection, f(s(v)) = f(s'(v)) only where s(v) = s'(v), and s1, s2
    # never agree: both rules are wrong at every position of every row.
    ids, answers = lab.sample_hops(2000, torch.Generator().manual_seed(2))
    for relation in (lab.S1, lab.S2):
        again, twice = lab.sample_hops(2000, torch.Generator().manual_seed(2), (relation, relation))
        assert torch.equal(again, ids)  # the same rows
        assert not (twice == answers).any()


def test_pointer_answers_follow_the_chain() -> None:
    hops = lab.hops_for(2)
    assert hops == 4
    ids, answers = lab.sample_pointers(50, torch.Generator().manual_seed(2), hops)
    perms = ids - lab.N_SPECIAL
    for perm, answer in zip(perms.tolist(), (answers - lab.N_SPECIAL).tolist()):
        assert sorted(perm) == list(range(lab.NODES))  # a permutation, laid out by position
        for x in range(lab.NODES):
            node = x
            for _ in range(hops):
                node = perm[node]
            assert answer[x] == node
    # One doubling step (every position reads the pointer stored where its pointer points)
    # turns f into f^2; L steps reach f^(2^L).
    twice = perms.gather(1, perms)
    _, answers2 = lab.sample_pointers(50, torch.Generator().manual_seed(2), 2)
    assert torch.equal(twice, answers2 - lab.N_SPECIAL)


def test_one_doubling_step_does_not_reach_f4() -> None:
    # What one application of the shared layer can compute (f^2) matches f^4 only where f^2
    # has a fixed point of f^2, so the one_layer arm cannot be exact.
    ids, answers4 = lab.sample_pointers(2000, torch.Generator().manual_seed(3), 4)
    _, answers2 = lab.sample_pointers(2000, torch.Generator().manual_seed(3), 2)
    assert float((answers2 == answers4).float().mean()) < 0.5


def test_arms_differ_only_in_sharing_and_counts_match_the_models() -> None:
    counts = lab.parameter_counts()
    iteration = counts["sharing_fine_for_iteration"]
    assert iteration["all_shared"] == iteration["one_layer"] < iteration["not_shared"]
    hops = counts["sharing_hurts_two_relations"]
    assert hops["all_shared"] == hops["all_shared_same_relation"] < hops["not_shared"]
    shared, separate = lab.hop_config("all"), lab.hop_config("none")
    assert shared.replace(sharing="none") == separate
    assert shared.num_attention_heads == 1  # one head: a layer follows one relation at a time
    for config in (shared, separate, lab.pointer_config("all", 1)):
        model = AlbertForMaskedLM(config)
        total = count_parameters(config, "AlbertForMaskedLM")["total"]
        assert total == sum(p.numel() for p in model.parameters())
