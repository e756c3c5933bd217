"""benchmarks/accuracy_curve.py: `--set` sends each key to the part of the recipe that owns it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from accuracy_curve import apply_overrides  # noqa: E402

from course_lib.training.recipes import TINY  # noqa: E402


def test_no_assignment_returns_the_recipe_itself():
    assert apply_overrides(TINY, []) is TINY


def test_each_key_reaches_its_part_of_the_recipe():
    before = (TINY.vocab_size, dict(TINY.masking), dict(TINY.training), dict(TINY.model))
    changed = apply_overrides(
        TINY, ["vocab_size=4000", "lr=3e-3", "whole_word=True", "hidden_size=96", "name_x=abc"]
    )
    assert changed.vocab_size == 4000  # top level
    assert changed.training["lr"] == 3e-3  # TrainingConfig
    assert changed.masking == {**TINY.masking, "whole_word": True}  # MaskingConfig
    assert changed.model["hidden_size"] == 96  # the model config
    assert changed.model["name_x"] == "abc"  # not a literal: kept as a string
    assert changed.name == "tiny+vocab_size=4000,lr=3e-3,whole_word=True,hidden_size=96,name_x=abc"
    # the original is untouched (recipes are shared constants)
    assert (TINY.vocab_size, TINY.masking, TINY.training, TINY.model) == before
    assert "whole_word" not in TINY.masking and TINY.training["lr"] != 3e-3


def test_an_assignment_without_equals_sign_says_what_it_expects():
    with pytest.raises(SystemExit, match="--set expects KEY=VALUE, got 'lr'"):
        apply_overrides(TINY, ["lr"])
