"""benchmarks/accuracy_curve.py: `--set` sends each key to the part of the recipe that owns it;
the curriculum and re-segmentation levers keep the text and change only where it is cut."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from accuracy_curve import ShortFirst, apply_overrides, cut_example, resegmented  # noqa: E402

from course_lib.data import PretrainingCollator  # noqa: E402
from course_lib.data.pairs import make_mlm_examples  # noqa: E402
from course_lib.tokenization import train_tokenizer  # noqa: E402
from course_lib.training.recipes import TINY  # noqa: E402

DOCS = [
    [f"sentence {d} {i} says alpha beta gamma delta epsilon zeta eta theta." for i in range(6)]
    for d in range(4)
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer("bert", [s for doc in DOCS for s in doc], vocab_size=200)


def text_of(examples) -> list[int]:
    """The tokens between the specials, example after example."""
    return [t for e in examples for t in e["input_ids"][1:-1]]


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


def test_cut_example_keeps_the_text_in_windows_with_their_own_specials(tokenizer):
    example = make_mlm_examples(DOCS, tokenizer, max_length=32)[0]
    pieces = cut_example(example, 17, tokenizer)
    assert text_of(pieces) == text_of([example])
    assert [len(p["input_ids"]) for p in pieces] == [17, 17]  # 30 text tokens: two halves
    assert [len(p["input_ids"]) for p in cut_example(example, 16, tokenizer)] == [12, 12, 12]
    for p in pieces:
        assert p["input_ids"][0] == tokenizer.cls_token_id
        assert p["input_ids"][-1] == tokenizer.sep_token_id
        assert len(p["word_ids"]) == len(p["input_ids"]) == len(p["token_type_ids"])


def test_short_first_cuts_only_before_its_fraction_of_the_run(tokenizer):
    examples = make_mlm_examples(DOCS, tokenizer, max_length=32)[:4]
    curriculum = ShortFirst(PretrainingCollator(tokenizer), tokenizer, 17, 0.5)
    progress = [0.0]
    curriculum.progress = lambda: progress[0]
    early = curriculum(examples)
    assert early["input_ids"].shape == (8, 17)
    progress[0] = 0.5
    late = curriculum(examples)
    assert late["input_ids"].shape == (4, 32)
    assert curriculum.short_batches == 1


def test_resegmented_cuts_the_same_text_at_shifted_offsets(tokenizer):
    plain = make_mlm_examples(DOCS, tokenizer, max_length=32)
    assert resegmented(DOCS, tokenizer, 32, 1) == list(plain)
    four = resegmented(DOCS, tokenizer, 32, 4)
    stream = text_of(plain)
    # ways 0..3 start 0, 7, 15, 22 tokens in; each way covers the stream from its offset
    n = len(plain)
    for offset in (7, 15, 22):
        way = four[n : n + len(range(offset, len(stream), 30))]
        assert text_of(way) == stream[offset:]
        assert all(len(e["input_ids"]) <= 32 for e in way)
        n += len(way)
    assert n == len(four)
