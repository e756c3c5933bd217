"""Chapter 02's lesson build checks: each fails on its stub with the todo, names typical wrong
answers (one right only at typical sizes) with its specific message, and accepts the master's
answer (exec'd from chapters/02_roberta/instructor/)."""

from __future__ import annotations

import pytest
import torch
from lesson_masters import master_answer

from course_lib.data.pairs import _packed
from course_lib.exercises.build import BuildCheck
from course_lib.exercises.lessons_roberta import (
    check_byte_symbols,
    check_bytes_to_unicode,
    check_pack_doc_sentences,
    check_pack_full_sentences,
    check_pair_sequences,
    check_position_ids,
    pack_sentences,
)


def stub(*args, **kwargs):
    raise NotImplementedError()


def verdict(check: BuildCheck, candidate, capsys) -> tuple[object, str]:
    returned = check(candidate)
    return returned, capsys.readouterr().out


def assert_rejected(check: BuildCheck, candidate, message: str, capsys) -> None:
    returned, out = verdict(check, candidate, capsys)
    assert returned is check.fallback, out
    assert out.startswith("✗ "), out
    assert message in out, out
    assert check.fallback_name in out


def assert_stub(check: BuildCheck, capsys) -> None:
    returned, out = verdict(check, stub, capsys)
    assert returned is check.fallback
    assert out == check.stub_output("stub")
    assert out.startswith("· Not written yet: `stub` — " + check.todo)


def assert_accepted(check: BuildCheck, candidate, capsys) -> None:
    returned, out = verdict(check, candidate, capsys)
    assert returned is candidate, out
    assert out.startswith("✓ Correct!"), out


def test_every_fallback_passes_its_own_check(capsys):
    for check in (
        check_position_ids,
        check_bytes_to_unicode,
        check_byte_symbols,
        check_pack_doc_sentences,
        check_pack_full_sentences,
        check_pair_sequences,
    ):
        assert check.probe(check.fallback), check.fallback_name
        assert_stub(check, capsys)


# ----- 02/01 position ids -------------------------------------------------------------------------


def arange_positions(input_ids, padding_idx):
    """Right only for right padding: the place in the row, padding sent to padding_idx."""
    places = torch.arange(input_ids.shape[1]).expand_as(input_ids) + padding_idx + 1
    return torch.where(input_ids != padding_idx, places, padding_idx)


def cumsum_unmasked(input_ids, padding_idx):
    return (input_ids != padding_idx).long().cumsum(1) + padding_idx


def hard_coded_one(input_ids, padding_idx):
    real = (input_ids != padding_idx).long()
    return real.cumsum(1) * real + 1


def in_place(input_ids, padding_idx):
    real = input_ids.ne(padding_idx).long()
    input_ids.copy_(real.cumsum(1) * real + padding_idx)
    return input_ids


@pytest.mark.parametrize(
    "wrong, message",
    [
        (arange_positions, "the padding before this token was counted"),
        (cumsum_unmasked, "padding must land on padding_idx = 1"),
        (hard_coded_one, "the offset is hard-coded: add padding_idx"),
        (in_place, "`input_ids` was modified"),
        (lambda ids, pad: ids.shape, "return a tensor"),
    ],
)
def test_position_ids_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_position_ids, wrong, message, capsys)


def test_position_ids_accepts_the_master(capsys):
    answer = master_answer("02_roberta", "01_what_changed.ipynb", "my_position_ids")
    assert_accepted(check_position_ids, answer, capsys)


# ----- 02/02 byte alphabet and byte symbols -------------------------------------------------------


def alphabet(ranges=(("!", "~"), ("¡", "¬"), ("®", "ÿ")), first=256, order=sorted):
    def my_bytes_to_unicode():
        printable = [b for lo, hi in ranges for b in range(ord(lo), ord(hi) + 1)]
        table = {b: chr(b) for b in printable}
        others = order(b for b in range(256) if b not in table)
        table.update({b: chr(first + n) for n, b in enumerate(others)})
        return table

    return my_bytes_to_unicode


@pytest.mark.parametrize(
    "wrong, message",
    [
        (alphabet(ranges=(("!", "~"), ("®", "ÿ"))), "byte 0xa1 ('¡') is printable in Latin-1"),
        (alphabet(ranges=(("!", "~"), ("¡", "ÿ"))), "(the soft hyphen, invisible in most fonts)"),
        (alphabet(first=255), "the 68 moved bytes take 256, 257, ... in byte order"),
        (alphabet(order=lambda bs: sorted(bs, reverse=True)), "in byte order"),
        (lambda: {b: chr(b + 256) for b in range(255)}, "the keys must be the 256 bytes"),
        (lambda: {b: "Ġ" for b in range(256)}, "two bytes share a symbol"),
    ],
)
def test_bytes_to_unicode_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_bytes_to_unicode, wrong, message, capsys)


def test_bytes_to_unicode_accepts_the_master(capsys):
    answer = master_answer("02_roberta", "02_tokenizers.ipynb", "my_bytes_to_unicode")
    assert_accepted(check_bytes_to_unicode, answer, capsys)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda text, table: "".join(table[ord(c)] for c in text), "you looked up each CHARACTER"),
        (
            lambda text, table: "".join(table[b] for b in text.encode("latin-1", "ignore")),
            "you looked up each CHARACTER",
        ),
        (
            lambda text, table: "".join(table[b] if b >= 128 else chr(b) for b in text.encode()),
            "one symbol per UTF-8 byte",
        ),
    ],
)
def test_byte_symbols_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_byte_symbols, wrong, message, capsys)


def test_byte_symbols_names_a_lookup_by_character_that_crashes(capsys):
    def by_character_crashing(text, table):  # right for ASCII, KeyError for 你 (checked first: é)
        return "".join(table[ord(c)] for c in text) if "é" not in text else text

    assert_rejected(check_byte_symbols, by_character_crashing, "one symbol per UTF-8 byte", capsys)


def test_byte_symbols_accepts_the_master(capsys):
    answer = master_answer("02_roberta", "02_tokenizers.ipynb", "my_byte_symbols")
    assert_accepted(check_byte_symbols, answer, capsys)


# ----- 02/04 the packers --------------------------------------------------------------------------


def test_the_reference_packers_equal_the_library():
    """pack_sentences (the fallback and the probes' reference) is the library's _packed on ids."""
    from course_lib.exercises.lessons_roberta import _PACK_CASES
    from course_lib.labs.roberta import symbol_tokenizer

    tokenizer = symbol_tokenizer()
    sep = tokenizer.sep_token_id
    for _, documents, budget in _PACK_CASES:
        for full in (False, True):
            docs = [[(s, [0] * len(s)) for s in doc] for doc in documents]
            library = _packed(docs, tokenizer, budget, full, 0)
            ids = [e["input_ids"][1:-1] for e in library]
            assert ids == pack_sentences(documents, budget, sep if full else None)


def doc_packer(
    cut_long=True, close_at_doc_end=True, fits=lambda used, n, budget: used + n <= budget
):
    def my_pack_doc_sentences(documents, budget):
        blocks, block = [], []
        for doc in documents:
            for sentence in doc:
                pieces = (
                    [sentence[i : i + budget] for i in range(0, len(sentence), budget)]
                    if cut_long
                    else ([sentence] if len(sentence) <= budget else [])
                )
                for piece in pieces:
                    if not fits(len(block), len(piece), budget) and block:
                        blocks.append(block)
                        block = []
                    block = block + piece
            if close_at_doc_end and block:
                blocks.append(block)
                block = []
        if block:
            blocks.append(block)
        return blocks

    return my_pack_doc_sentences


@pytest.mark.parametrize(
    "wrong, message",
    [
        (doc_packer(cut_long=False), "must be CUT into block-sized pieces, not dropped"),
        (doc_packer(fits=lambda used, n, budget: used + n < budget), "block 0 closed too early"),
        (doc_packer(fits=lambda used, n, budget: used + n <= budget + 1), "exceeds the budget"),
        (doc_packer(close_at_doc_end=False), "keep sentences whole"),
    ],
)
def test_doc_sentences_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_pack_doc_sentences, wrong, message, capsys)


def test_doc_sentences_names_a_modified_input(capsys):
    def popping(documents, budget):
        blocks = doc_packer()(documents, budget)
        documents.pop()
        return blocks

    assert_rejected(check_pack_doc_sentences, popping, "the documents were modified", capsys)


def full_packer(separator=True, corner=lambda used, budget: used + 1 >= budget):
    def my_pack_full_sentences(documents, budget, sep_id):
        blocks, block = [], []
        for doc in documents:
            if block:
                if corner(len(block), budget):
                    blocks.append(block)
                    block = []
                elif separator:
                    block = block + [sep_id]
            for sentence in doc:
                for start in range(0, len(sentence), budget):
                    piece = sentence[start : start + budget]
                    if len(block) + len(piece) > budget:
                        blocks.append(block)
                        block = []
                    block = block + piece
        if block:
            blocks.append(block)
        return blocks

    return my_pack_full_sentences


@pytest.mark.parametrize(
    "wrong, message",
    [
        (full_packer(separator=False), "put </s> (sep_id) between the two documents"),
        # right in every case but the one where only the separator still fits:
        (full_packer(corner=lambda used, budget: used + 1 > budget), "ends in a bare separator"),
        (
            lambda documents, budget, sep_id: doc_packer()(documents, budget),
            "separators in your blocks",
        ),
        (
            lambda documents, budget, sep_id: [
                b + [sep_id] for b in doc_packer()(documents, budget - 1)
            ],
            "a block ends in a bare separator",
        ),
    ],
)
def test_full_sentences_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_pack_full_sentences, wrong, message, capsys)


def test_packers_accept_the_master(capsys):
    for name, check in (
        ("my_pack_doc_sentences", check_pack_doc_sentences),
        ("my_pack_full_sentences", check_pack_full_sentences),
    ):
        answer = master_answer("02_roberta", "04_input_formats.ipynb", name)
        assert_accepted(check, answer, capsys)


# ----- 02/07 the pair language --------------------------------------------------------------------


def pair_generator(order="ab", offset=5, draw="generator", inverse=False):
    def my_pair_sequences(perm, count, pairs, generator):
        if draw == "generator":
            b = torch.randint(0, len(perm), (count, pairs), generator=generator)
        else:  # torch's global random state: the same distribution, other numbers
            b = torch.randint(0, len(perm), (count, pairs))
        a = perm.argsort()[b] if inverse else perm[b]
        first, second = (a, b) if order == "ab" else (b, a)
        content = torch.stack([first, second], dim=-1).reshape(count, 2 * pairs) + offset
        return [{"input_ids": [0, *row.tolist(), 2]} for row in content]

    return my_pair_sequences


@pytest.mark.parametrize(
    "wrong, message",
    [
        (pair_generator(order="ba"), "the permuted symbol FIRST"),
        (pair_generator(offset=4), "content ids start after the 5 specials"),
        (pair_generator(draw="global"), "draw b as ONE torch.randint"),
        (pair_generator(inverse=True), "you used the inverse permutation"),
    ],
)
def test_pair_sequences_names_the_mistake(wrong, message, capsys):
    assert_rejected(check_pair_sequences, wrong, message, capsys)


def test_pair_sequences_accepts_the_master(capsys):
    answer = master_answer("02_roberta", "07_mechanism_labs.ipynb", "my_pair_sequences")
    assert_accepted(check_pair_sequences, answer, capsys)


def test_a_check_leaves_the_global_random_state_as_it_was(capsys):
    for check in (check_position_ids, check_pack_full_sentences, check_pair_sequences):
        torch.manual_seed(7)
        expected = torch.rand(3)
        torch.manual_seed(7)
        check(check.fallback)
        assert torch.equal(torch.rand(3), expected)
