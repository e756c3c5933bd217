"""Chapter 01's mechanism labs: each runs (fast preset, 1 seed) into the lab schema, and the task
generators and the two masking arms have the properties the labs' claims rest on."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.labels import IGNORE_INDEX
from course_lib.labs import bert, get_lab, run_lab
from course_lib.objectives.masking import mask_tokens


@pytest.mark.parametrize("name", ["bidirectional_context", "mask_8010_vs_always"])
def test_fast_preset_runs_into_the_schema(name):
    lab = get_lab(name)
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    assert result["lab"] == name and result["chapter"] == "01_bert"
    assert list(result["arms"]) == list(lab.arms) and result["compare"] == list(lab.compare)
    for arm, values in result["arms"].items():
        assert len(values) == 1 and math.isfinite(values[0]) and 0.0 <= values[0] <= 1.0, arm


def test_pairs_first_token_is_the_permutation_of_the_second():
    perm = torch.randperm(bert.N_CONTENT, generator=torch.Generator().manual_seed(1))
    ids = bert.sample_pairs(perm, 64, 4, torch.Generator().manual_seed(2)) - bert.N_SPECIAL
    first, second = ids[:, 0::2], ids[:, 1::2]
    assert torch.equal(first, perm[second])


def _mutual_information(a: torch.Tensor, b: torch.Tensor, n: int) -> float:
    """Plug-in mutual information (nats) of two id tensors with values in 0..n-1."""
    joint = torch.bincount(a * n + b, minlength=n * n).view(n, n).double()
    joint /= joint.sum()
    outer = joint.sum(1, keepdim=True) * joint.sum(0, keepdim=True)
    nonzero = joint > 0
    return float((joint[nonzero] * (joint[nonzero] / outer[nonzero]).log()).sum())


def test_pairs_first_token_is_independent_of_its_left_context():
    n = bert.N_CONTENT
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(3))
    ids = bert.sample_pairs(perm, 20_000, 2, torch.Generator().manual_seed(4)) - bert.N_SPECIAL
    # token 2 (first of the second pair) against its left neighbour and its right neighbour
    left = _mutual_information(ids[:, 1], ids[:, 2], n)
    right = _mutual_information(ids[:, 3], ids[:, 2], n)
    assert right == pytest.approx(math.log(n), rel=0.02)  # a bijection: all of log 32 nats
    # independent: only the plug-in bias, about (n - 1)^2 / (2 * samples) = 0.024 nats
    assert left < 0.05


def _masking_counts(arm: str, seed: int = 0):
    ids = torch.randint(
        bert.N_SPECIAL, bert.N_SPECIAL + bert.N_CONTENT, (2000, 64), generator=torch.Generator()
    )  # the same ids in every call (a fresh generator's default seed)
    special = torch.zeros_like(ids, dtype=torch.bool)
    content = torch.arange(bert.N_SPECIAL, bert.N_SPECIAL + bert.N_CONTENT)
    generator = torch.Generator().manual_seed(seed)
    inputs, labels = mask_tokens(
        ids,
        special,
        bert.MASK,
        bert.N_SPECIAL + bert.N_CONTENT,
        bert.ARM_MASKING[arm],
        generator,
        non_special_ids=content,
    )
    return ids, inputs, labels


def test_masking_arms_select_the_same_tokens_and_differ_only_in_what_they_become():
    ids, inputs_8010, labels_8010 = _masking_counts("mask_80_10_10")
    _, inputs_always, labels_always = _masking_counts("always_mask")
    selected = labels_8010 != IGNORE_INDEX
    assert torch.equal(labels_8010, labels_always)  # same generator: same targets
    assert torch.equal(inputs_8010[~selected], ids[~selected])  # untouched off target
    assert torch.equal(inputs_always[~selected], ids[~selected])
    n = int(selected.sum())
    assert abs(n / ids.numel() - 0.15) < 4 * math.sqrt(0.15 * 0.85 / ids.numel())

    # always-[MASK]: every target shows [MASK], so no visible real token is ever a target
    assert bool((inputs_always[selected] == bert.MASK).all())
    assert not bool((inputs_always == bert.MASK)[~selected].any())

    # 80/10/10: [MASK], a different random token, or the original (also the 1/32 random draws
    # that hit the original), each within four binomial standard errors
    shown, original = inputs_8010[selected], ids[selected]
    masked = (shown == bert.MASK).float().mean()
    kept = (shown == original).float().mean()
    replaced = ((shown != bert.MASK) & (shown != original)).float().mean()
    expected = {"mask": 0.8, "random": 0.1 * (1 - 1 / bert.N_CONTENT)}
    expected["kept"] = 1 - expected["mask"] - expected["random"]
    for name, value in (("mask", masked), ("random", replaced), ("kept", kept)):
        p = expected[name]
        assert abs(float(value) - p) < 4 * math.sqrt(p * (1 - p) / n), name


def test_tag_language_tokens_leave_two_tags_and_the_left_neighbour_fixes_the_tag():
    word_class, emission = bert.make_tag_language(0)
    assert torch.equal((emission > 0).sum(0), torch.full((bert.N_CONTENT,), 2))  # two tags each
    assert torch.equal(torch.bincount(word_class), torch.full((bert.N_TAGS,), 2))  # 2 per class
    ids, tags = bert.sample_tagged(word_class, emission, 3000, 16, torch.Generator().manual_seed(5))
    ids = ids - bert.N_SPECIAL
    odd = torch.arange(1, 16, 2)
    assert bool((tags[:, odd] >= 0).all()) and bool((tags[:, ::2] == IGNORE_INDEX).all())
    # the left neighbour fixes the tag exactly, and the token is one its tag emits
    assert torch.equal(tags[:, odd], word_class[ids[:, odd - 1]])
    assert bool((emission[tags[:, odd], ids[:, odd]] > 0).all())
    # the token alone does not: the best guess from counts is right about half of the time
    token, tag = ids[:, odd].flatten(), tags[:, odd].flatten()
    counts = torch.bincount(token * bert.N_TAGS + tag, minlength=bert.N_CONTENT * bert.N_TAGS)
    best = counts.view(bert.N_CONTENT, bert.N_TAGS).max(1).values.sum() / len(tag)
    assert 0.5 <= float(best) < 0.52


def test_probe_needs_the_neighbour_and_reads_it_linearly():
    """On one-hot features a linear probe reads the tag at about 0.5 from the token alone and
    exactly once the left neighbour is in the features: so a probe on an encoder's states
    measures whether the encoder put the neighbour there, and its cross-entropy how cleanly."""
    word_class, emission = bert.make_tag_language(1)
    ids, tags = bert.sample_tagged(word_class, emission, 800, 16, torch.Generator().manual_seed(6))
    ids = ids - bert.N_SPECIAL
    odd = torch.arange(1, 16, 2)
    y = tags[:, odd].flatten()
    half = len(y) // 2

    def one_hot(offset: int) -> torch.Tensor:
        return torch.nn.functional.one_hot(ids[:, odd + offset].flatten(), bert.N_CONTENT).float()

    alone = bert.linear_probe(one_hot(0)[:half], y[:half], one_hot(0)[half:], y[half:], 16)
    both = torch.cat([one_hot(-1), one_hot(0)], dim=1)
    with_left = bert.linear_probe(both[:half], y[:half], both[half:], y[half:], 16)
    assert 0.45 < alone[0] < 0.55 and alone[1] > 0.6  # a coin flip: about ln 2 nats
    assert with_left[0] == 1.0 and with_left[1] < 0.05
    assert bert.linear_probe_accuracy(both[:half], y[:half], both[half:], y[half:], 16) == 1.0
