"""Chapter 04 position labs: relative_length_generalization and emd_absolute_position.

Each lab's fast preset for one seed, the results schema, and the properties the task generators
claim: the shift rule is the same at every length, and in the slot task the real tokens (all a
relative-only DeBERTa sees) do not reveal the absolute slot.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.labels import IGNORE_INDEX
from course_lib.labs import deberta_positions as dp
from course_lib.labs import get_lab, run_lab
from course_lib.models.deberta import DebertaForMaskedLM

LABS = ("relative_length_generalization", "emd_absolute_position")


@pytest.mark.parametrize("name", LABS)
def test_fast_preset_one_seed_gives_the_schema_and_finite_values(name: str) -> None:
    lab = get_lab(name)
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    assert result["chapter"] == "04_deberta_distil"
    assert set(result["arms"]) == set(lab.arms) and result["seeds"] == 1
    assert result["compare"] == list(lab.compare) and result["expected_sign"] == "+"
    for arm, values in result["arms"].items():
        assert len(values) == 1 and math.isfinite(values[0]) and 0.0 <= values[0] <= 1.0, arm


def test_shift_task_labels_are_the_token_shift_places_to_the_left_at_every_length() -> None:
    for length in (dp.TRAIN_LENGTH, dp.TEST_LENGTH):
        ids, labels = dp.sample_shift_task(8, length, torch.Generator().manual_seed(length))
        assert ids.shape == labels.shape == (8, length)
        assert (labels[:, : dp.SHIFT] == IGNORE_INDEX).all()
        assert torch.equal(labels[:, dp.SHIFT :], ids[:, : -dp.SHIFT])
        assert ids.min() >= dp.N_SPECIAL and ids.max() < dp.N_SPECIAL + dp.N_CONTENT


def test_position_arms_differ_only_in_where_positions_enter() -> None:
    relative, absolute = dp.position_config("relative"), dp.position_config("absolute")
    differ = {k for k, v in relative.to_dict().items() if absolute.to_dict()[k] != v}
    expected = {"relative_attention", "pos_att_type", "norm_rel_ebd", "position_biased_input"}
    assert differ <= expected | {"max_relative_positions"}
    assert relative.relative_span == dp.CLIP and not relative.position_biased_input
    assert absolute.max_position_embeddings >= dp.TEST_LENGTH and absolute.position_biased_input
    with pytest.raises(ValueError, match="relative"):
        dp.position_config("rope")


def test_clipped_relative_model_meets_no_new_table_rows_at_length_64() -> None:
    """Every relative-table row used at length 64 is already used at length 32."""
    model = DebertaForMaskedLM(dp.position_config("relative"))
    rows = {}
    for length in (dp.TRAIN_LENGTH, dp.TEST_LENGTH):
        _, distances = model.backbone.encoder.relative_inputs(length, torch.device("cpu"))
        rows[length] = set((distances.clamp(-dp.CLIP, dp.CLIP - 1) + dp.CLIP).unique().tolist())
    assert rows[dp.TEST_LENGTH] == rows[dp.TRAIN_LENGTH]


def test_slot_task_layout() -> None:
    inputs, mask, labels = dp.sample_slot_task(256, torch.Generator().manual_seed(0))
    assert inputs.shape == mask.shape == labels.shape == (256, dp.EMD_LENGTH)
    rows, p = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
    assert ((labels != IGNORE_INDEX).sum(1) == dp.SLOTS).all()  # SLOTS labels per row ...
    assert (inputs[rows, p] == dp.MASK).all() and ((inputs == dp.MASK).sum(1) == dp.SLOTS).all()
    assert torch.equal(labels[rows, p], dp.position_word(p))  # ... each the word of its slot
    assert ((p >= dp.MIDDLE[0]) & (p < dp.MIDDLE[1])).all()
    assert torch.equal(inputs == dp.PAD, mask == 0)  # pads exactly where the mask is 0
    assert ((inputs == dp.CLS).sum(1) == 1).all() and ((inputs == dp.SEP).sum(1) == 1).all()
    left, length = mask.argmax(1), mask.sum(1)
    assert torch.equal(inputs[torch.arange(256), left], torch.full((256,), dp.CLS))
    assert left.unique().numel() == dp.MAX_PAD  # [CLS] is not at a fixed slot
    assert length.min() == dp.REAL_LENGTHS[0] and length.max() == dp.REAL_LENGTHS[1]


def test_slot_is_uniform_given_what_relative_attention_sees() -> None:
    """Given the index r among real tokens, p mod N_CLASSES is uniform: p = L + r with L
    uniform over MAX_PAD values, a multiple of N_CLASSES. The best guess from r is chance."""
    assert dp.MAX_PAD % dp.N_CLASSES == 0
    _, mask, labels = dp.sample_slot_task(20_000, torch.Generator().manual_seed(1))
    rows, p = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
    r = p - mask.argmax(1)[rows]  # index of the masked slot among the real tokens
    classes = p % dp.N_CLASSES
    best = sum(
        int(torch.bincount(classes[r == v], minlength=dp.N_CLASSES).max()) for v in r.unique()
    )
    assert best / len(p) < 1 / dp.N_CLASSES + 0.015
    # ... whereas the absolute slot determines the label exactly.
    assert torch.equal(labels[rows, p], dp.position_word(p))


def test_relative_only_deberta_is_blind_to_the_slot_but_emd_is_not() -> None:
    """Shift the same real tokens two slots to the right (one more pad on the left, one fewer on
    the right): the relative-only model's prediction is unchanged, while the label changes.
    With EMD, the prediction does change: the decoder adds the embedding of the absolute slot."""
    torch.manual_seed(0)
    # Build a row with room to shift: left pad 2, right pad 10 -> left pad 4, right pad 8.
    real = torch.tensor([dp.CLS] + [dp.N_SPECIAL + i % dp.N_CONTENT for i in range(48)] + [dp.SEP])
    real[20] = dp.MASK
    first = torch.cat([torch.zeros(2, dtype=torch.long), real, torch.zeros(12, dtype=torch.long)])
    second = torch.cat([torch.zeros(4, dtype=torch.long), real, torch.zeros(10, dtype=torch.long)])
    ids = torch.stack([first, second])  # (2, 64)
    attention = (ids != dp.PAD).long()
    for use_emd, should_move in ((False, False), (True, True)):
        model = DebertaForMaskedLM(dp.emd_config(use_emd)).eval()
        with torch.no_grad():
            logits = model(ids, attention).mlm_logits  # (2, 64, V)
        a, b = logits[0, 2 + 20], logits[1, 4 + 20]
        assert torch.allclose(a, b, atol=1e-5) is not should_move, use_emd
    assert dp.position_word(torch.tensor(22)) != dp.position_word(torch.tensor(24))
