"""GPT-2's byte-level alphabet and one BPE merge step: equal to the `tokenizers` library's
byte-level pre-tokenizer, lossless on any text, and Sennrich et al.'s worked example."""

from __future__ import annotations

import random

import pytest
from tokenizers import pre_tokenizers

from course_lib.tokenization.byte_level import (
    bpe_merge_step,
    bytes_to_unicode,
    from_byte_symbols,
    merge_word,
    pair_counts,
    to_byte_symbols,
)


def test_the_alphabet_is_256_printable_symbols_equal_to_tokenizers():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert all(c.isprintable() and not c.isspace() for c in table.values())


@pytest.mark.parametrize("text", ["héllo wörld", "漢字 🙂👨‍👩‍👧", "tab\tnew\nline", "e\u0301"])
def test_symbols_equal_the_byte_level_pre_tokenizer_and_round_trip(text):
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    assert to_byte_symbols(text) == byte_level.pre_tokenize_str(text)[0][0]
    assert len(to_byte_symbols(text)) == len(text.encode("utf-8"))
    assert from_byte_symbols(to_byte_symbols(text)) == text


def test_random_unicode_round_trips():
    rng = random.Random(0)
    for _ in range(200):
        text = "".join(chr(rng.choice([rng.randrange(32, 0xD7FF), rng.randrange(0x1F300, 0x1FAFF)]))
                       for _ in range(rng.randrange(1, 20)))  # fmt: skip
        assert from_byte_symbols(to_byte_symbols(text)) == text


def test_sennrich_worked_example_first_merges():
    words = {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3}
    assert pair_counts(words)[("e", "s")] == 9 and pair_counts(words)[("l", "o")] == 7
    pair, words = bpe_merge_step(words)
    assert pair == ("e", "s")
    pair, words = bpe_merge_step(words)
    assert pair == ("es", "t") and ("n", "e", "w", "est") in words


def test_merges_are_left_to_right_without_overlap_and_ties_are_sorted():
    assert merge_word(("a", "a", "a"), ("a", "a")) == ("aa", "a")
    assert merge_word(("a", "a", "a", "a"), ("a", "a")) == ("aa", "aa")
    assert merge_word(("b", "a", "b", "a"), ("b", "a")) == ("ba", "ba")
    assert bpe_merge_step({("c", "d"): 2, ("a", "b"): 2})[0] == ("a", "b")
    with pytest.raises(ValueError, match="nothing to merge"):
        bpe_merge_step({("a",): 3})
