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


def test_the_relations_are_fixed_permutations_that_never_agree() -> None:
    # how they were drawn (the module's comment): the first triple that disagrees everywhere
    assert lab.draw_relations(3, lab.HOP_NODES) == [lab.S1, lab.S2, lab.S3]
    for relation in (lab.S1, lab.S2, lab.S3):
        assert sorted(relation) == list(range(lab.HOP_NODES))
    for r, q in ((lab.S1, lab.S2), (lab.S1, lab.S3), (lab.S2, lab.S3)):
        assert all(a != b for a, b in zip(r, q))  # a hop along one is never one along another
    assert len(lab.HOP_RELATIONS) == len(lab.SAME_RELATIONS) == lab.HOP_LAYERS
    assert len(set(lab.SAME_RELATIONS)) == 1  # the control repeats one relation
    assert lab.HOP_RELATIONS[1] != lab.HOP_RELATIONS[2]  # hops 2 and 3 differ


def test_hop_answers_follow_the_relations_in_turn() -> None:
    ids, answers = lab.sample_hops(50, torch.Generator().manual_seed(0))
    for f, answer in zip((ids - lab.N_SPECIAL).tolist(), (answers - lab.N_SPECIAL).tolist()):
        assert sorted(f) == list(range(lab.HOP_NODES))  # a permutation, laid out by position
        for x in range(lab.HOP_NODES):
            node = f[x]  # the value at x
            for relation in lab.HOP_RELATIONS:
                node = f[relation[node]]  # one hop: read the token at position s(node)
            assert answer[x] == node


def test_sampling_is_deterministic_and_training_too() -> None:
    a = lab.sample_hops(8, torch.Generator().manual_seed(5))
    b = lab.sample_hops(8, torch.Generator().manual_seed(5))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    device = torch.device("cpu")
    first = lab._hops_accuracy(3, "all", lab.HOP_RELATIONS, 20, 16, device)
    assert first == lab._hops_accuracy(3, "all", lab.HOP_RELATIONS, 20, 16, device)


def test_no_single_hop_reads_the_answer_but_one_hop_reads_a_one_hop_answer() -> None:
    generator = torch.Generator().manual_seed(1)
    ids, answers = lab.sample_hops(3000, generator)
    # The best "read the token at a position chosen from my own value" rule (one attention
    # hop, fitted to the answers) is right about a quarter of the time (chance 1/8) ...
    assert lab.one_hop_accuracy(ids, answers) < 0.3
    # ... while on a one-hop task the same rule is exact, so the measure can see a hop.
    ids1, answers1 = lab.sample_hops(300, torch.Generator().manual_seed(1), relations=(lab.S1,))
    assert lab.one_hop_accuracy(ids1, answers1) == 1.0


def test_a_layer_that_repeats_what_it_did_at_hop_two_is_wrong_everywhere() -> None:
    # From the token its attention has just read, a shared layer that followed the SAME
    # relation at hops 2 and 3 (what it can do without telling its applications apart) answers
    # with s1 three times or with s1, s2, s2. Since f is a bijection and the relations never
    # agree, each of those rules is wrong at every position of every row.
    ids, answers = lab.sample_hops(2000, torch.Generator().manual_seed(2))
    first = lab.HOP_RELATIONS[0]
    for second in (lab.HOP_RELATIONS[1], lab.HOP_RELATIONS[2]):
        rows = lab.sample_hops(2000, torch.Generator().manual_seed(2), (first, second, second))
        assert torch.equal(rows[0], ids)  # the same rows
        assert not (rows[1] == answers).any()


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
    assert shared.num_hidden_layers == lab.HOP_LAYERS == 3  # one layer per hop
    assert shared.intermediate_size == lab.HOP_FF  # no room for a lookup by (token, step)
    assert lab.pointer_config("all", 2).hidden_size == lab.POINTER_HIDDEN
    for config in (shared, separate, lab.pointer_config("all", 1)):
        model = AlbertForMaskedLM(config)
        total = count_parameters(config, "AlbertForMaskedLM")["total"]
        assert total == sum(p.numel() for p in model.parameters())
