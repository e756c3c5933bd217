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
    for name in ("sharing_hurts_induction", "sharing_fine_for_iteration"):
        result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
        spec = get_lab(name)
        assert result["chapter"] == "03_albert"
        assert set(result["arms"]) == set(spec.arms)
        assert result["compare"] == list(spec.compare)
        for values in result["arms"].values():
            assert len(values) == 1 and math.isfinite(values[0]) and 0 <= values[0] <= 1


def test_induction_needs_the_earlier_occurrence_not_a_fixed_offset() -> None:
    ids, targets, offset = lab.sample_induction(4000, torch.Generator().manual_seed(0))
    answers = ids[targets]
    # The two-step rule (find the earlier copy of the left neighbour, read the next token) is
    # always right ...
    assert torch.equal(lab.induction_rule(ids, targets), answers)
    # ... while every fixed offset, the rule one positional head could apply, is near chance.
    best = max(lab.fixed_offset_accuracy(ids, targets, d) for d in range(1, lab.INDUCTION_LENGTH))
    assert best < 0.2, best
    assert offset.unique().numel() >= 5  # the offset really varies


def test_induction_rows_are_one_repeat_of_distinct_tokens() -> None:
    ids, targets, offset = lab.sample_induction(200, torch.Generator().manual_seed(1))
    for row, rows_targets, d in zip(ids, targets, offset):
        counts = torch.bincount(row)
        repeated = (counts == 2).sum().item()
        assert counts.max() <= 2 and lab.SEGMENT[0] <= repeated <= lab.SEGMENT[1]
        for q in rows_targets.nonzero().flatten().tolist():
            assert row[q] == row[q - d]  # the answer sits one offset earlier
            assert not rows_targets[q - 1]  # the left neighbour stays visible
            assert counts[row[q - 1]] == 2  # and is itself part of the copy


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


def test_arms_differ_only_in_sharing_and_counts_match_the_models() -> None:
    counts = lab.parameter_counts()
    iteration = counts["sharing_fine_for_iteration"]
    assert iteration["all_shared"] == iteration["one_layer"] < iteration["not_shared"]
    induction = counts["sharing_hurts_induction"]
    assert induction["all_shared"] < induction["not_shared"]
    shared, separate = lab.induction_config("all"), lab.induction_config("none")
    assert shared.replace(sharing="none") == separate
    for config in (shared, separate):
        model = AlbertForMaskedLM(config)
        total = count_parameters(config, "AlbertForMaskedLM")["total"]
        assert total == sum(p.numel() for p in model.parameters())
