"""Chapter 04's disentangled-attention labs (c2p_needed, p2c_needed): the generators have the
properties the labs claim, the arms differ only in pos_att_type, and one fast seed runs."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.labels import IGNORE_INDEX
from course_lib.labs import deberta as lab
from course_lib.labs import get_lab, run_lab
from course_lib.models.deberta import DebertaForTokenClassification


def _tokens(batch: int = 4000, seed: int = 0) -> torch.Tensor:
    return lab.sample_tokens(batch, torch.Generator().manual_seed(seed))


def test_tokens_carry_symbol_and_offset() -> None:
    symbols = torch.arange(lab.N_SYMBOLS).repeat(lab.N_OFFSETS)
    offsets = torch.arange(1, lab.N_OFFSETS + 1).repeat_interleave(lab.N_SYMBOLS)
    ids = lab.make_tokens(symbols, offsets)
    assert sorted(ids.tolist()) == list(range(lab.VOCAB))  # every pair is one token
    assert torch.equal(lab.symbol_of(ids), symbols) and torch.equal(lab.offset_of(ids), offsets)


def test_look_back_label_is_the_symbol_offset_places_left() -> None:
    ids = _tokens(50)
    labels = lab.look_back_labels(ids)
    for b in range(ids.shape[0]):
        for i in range(ids.shape[1]):
            if i < lab.N_OFFSETS:
                assert labels[b, i] == IGNORE_INDEX
            else:
                o = int(lab.offset_of(ids[b, i]))
                assert labels[b, i] == lab.symbol_of(ids[b, i - o])


def test_pointed_at_label_is_the_one_token_pointing_here() -> None:
    ids = _tokens(50)
    labels = lab.pointed_at_labels(ids)
    for b in range(ids.shape[0]):
        for i in range(ids.shape[1]):
            pointers = [j for j in range(i) if j + int(lab.offset_of(ids[b, j])) == i]
            if i < lab.N_OFFSETS or len(pointers) != 1:
                assert labels[b, i] == IGNORE_INDEX
            else:
                assert labels[b, i] == lab.symbol_of(ids[b, pointers[0]])
    kept = (labels != IGNORE_INDEX).float().mean()
    assert 0.3 < kept < 0.45  # P(exactly one of 6 points here) = (5/6)^5 = 0.40 past the start


def _best_table_accuracy(keys_train, labels_train, keys_test, labels_test) -> float:
    """Fit the best lookup rule key -> most frequent label on one sample; score it on another."""
    n_keys = int(max(keys_train.max(), keys_test.max())) + 1
    counts = torch.zeros(n_keys, lab.N_SYMBOLS)
    counts.index_put_((keys_train, labels_train), torch.ones(len(keys_train)), accumulate=True)
    guesses = counts.argmax(-1)[keys_test]
    return float((guesses == labels_test).float().mean())


@pytest.mark.parametrize("labels_of", [lab.look_back_labels, lab.pointed_at_labels])
def test_content_alone_and_absolute_position_alone_are_at_chance(labels_of) -> None:
    """The label is independent of the token at i and of i itself (and of both together): the
    best lookup rule on either, fitted on one sample, is at 1/N_SYMBOLS on a fresh one."""
    samples = []
    for seed in (1, 2):
        ids = _tokens(3000, seed)
        labels = labels_of(ids)
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        kept = labels != IGNORE_INDEX
        content, where = ids[kept], positions[kept]
        samples.append((content, where, content * lab.LENGTH + where, labels[kept]))
    (c1, p1, both1, y1), (c2, p2, both2, y2) = samples
    chance = 1 / lab.N_SYMBOLS
    se = math.sqrt(chance * (1 - chance) / len(y2))
    for train, test in ((c1, c2), (p1, p2), (both1, both2)):
        accuracy = _best_table_accuracy(train, y1, test, y2)
        assert abs(accuracy - chance) < 5 * se, accuracy


@pytest.mark.parametrize("labels_of", [lab.look_back_labels, lab.pointed_at_labels])
def test_one_fixed_distance_gets_only_the_fixed_offset_baseline(labels_of) -> None:
    """Reading the symbol at one distance d for every position (what the arm without the
    decisive term can still do) scores 1/N_OFFSETS + coincidences, for every d."""
    ids = _tokens(4000, 3)
    labels = labels_of(ids)
    kept = labels != IGNORE_INDEX
    expected = lab.fixed_offset_accuracy()
    for d in range(1, lab.N_OFFSETS + 1):
        guess = torch.full_like(ids, -1)
        guess[:, d:] = lab.symbol_of(ids[:, :-d])
        accuracy = float((guess[kept] == labels[kept]).float().mean())
        assert abs(accuracy - expected) < 0.02, (d, accuracy)


def test_content_only_arm_is_blind_to_order() -> None:
    """pos_att_type [] and no absolute positions: permuting the tokens permutes the outputs, so
    that arm can only use the bag of tokens, which both tasks make uninformative by design."""
    torch.manual_seed(0)
    model = DebertaForTokenClassification(lab.lab_config([])).eval()
    ids = _tokens(3, 4)
    perm = torch.randperm(ids.shape[1])
    with torch.no_grad():
        out, out_perm = model(ids).logits, model(ids[:, perm]).logits
    assert torch.allclose(out[:, perm], out_perm, atol=1e-5)
    full = DebertaForTokenClassification(lab.lab_config(["c2p", "p2c"])).eval()
    with torch.no_grad():  # the full arm is not: it sees distances
        assert not torch.allclose(full(ids).logits[:, perm], full(ids[:, perm]).logits, atol=1e-3)


def test_arms_differ_only_in_pos_att_type() -> None:
    configs = {arm: lab.lab_config(terms).to_dict() for arm, terms in lab.POSITION_TERMS.items()}
    for config in configs.values():
        assert not config["position_biased_input"] and config["num_attention_heads"] == 1
        differing = {k for k in config if config[k] != configs["c2p_p2c"][k]}
        assert differing <= {"pos_att_type"}
    assert configs["no_c2p"]["pos_att_type"] == ["p2c"]
    assert configs["no_p2c"]["pos_att_type"] == ["c2p"]


@pytest.mark.parametrize("name", ["c2p_needed", "p2c_needed"])
def test_fast_preset_runs_every_arm(name: str) -> None:
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    spec = get_lab(name)
    assert result["lab"] == name and result["chapter"] == "04_deberta_distil"
    assert set(result["arms"]) == set(spec.arms) and result["compare"] == list(spec.compare)
    for values in result["arms"].values():
        assert len(values) == 1 and 0.0 <= values[0] <= 1.0 and math.isfinite(values[0])
