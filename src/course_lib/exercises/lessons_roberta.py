"""Chapter 02's lesson build checks (RoBERTa): position ids after the padding id, GPT-2's byte
alphabet, text as byte symbols, the DOC-/FULL-SENTENCES packers, the pair language of the labs.

Each `check_*` is a `BuildCheck` (course_lib.exercises.build): it runs the learner's function on
fresh inputs, compares it with the library, names the first mistake with the numbers (the edges
included: left padding, all-padding rows, another padding id, multi-byte characters, a
sentence longer than a block, a block with no room for the separator) and returns what the rest
of the notebook uses (tests/test_lesson_checks_roberta.py plants the typical mistakes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import ExerciseError, expect, run_learner_code
from course_lib.labs.roberta import N_SPECIAL as PAIR_SPECIALS
from course_lib.labs.roberta import sample_pair_sequences
from course_lib.models.roberta import create_position_ids_from_input_ids
from course_lib.tokenization.byte_level import bytes_to_unicode, to_byte_symbols


def first_mismatch(got: Tensor, expected: Tensor) -> tuple[tuple[int, ...], Any, Any] | None:
    """(index, got, expected) of the first entry where two same-shaped tensors differ, or None."""
    differ = (got != expected).nonzero()
    if len(differ) == 0:
        return None
    where = tuple(int(i) for i in differ[0])
    return where, got[where].item(), expected[where].item()


# ----- 02/01: position ids after the padding id ---------------------------------------------------


def _position_cases() -> list[tuple[str, Tensor, int]]:
    right = torch.tensor([[0, 713, 16, 10, 1296, 2], [0, 31414, 2, 1, 1, 1]])
    left = torch.tensor([[1, 1, 0, 713, 16, 2], [0, 31414, 16, 10, 1296, 2]])
    zero_pad = torch.tensor([[101, 7, 8, 102, 0, 0], [0, 0, 101, 9, 9, 102]])
    return [
        ("a right-padded batch (padding_idx=1)", right, 1),
        ("a LEFT-padded batch, row 0 starts with two <pad>", left, 1),
        ("another padding id (padding_idx=0, BERT's), padding on both sides", zero_pad, 0),
        ("a row of padding only", torch.tensor([[5, 6, 7], [3, 3, 3]]), 3),
        ("a batch of one sequence of one token", torch.tensor([[42]]), 1),
    ]


def _probe_position_ids(my_position_ids: Callable) -> str:
    for edge, ids, pad in _position_cases():
        before = ids.clone()
        got = run_learner_code(my_position_ids, ids, pad)
        expect(isinstance(got, Tensor), f"return a tensor, got {type(got).__name__}.")
        expect(
            torch.equal(ids, before),
            "`input_ids` was modified: compute the positions in a new tensor.",
        )
        expected = create_position_ids_from_input_ids(before, pad)
        expect(
            tuple(got.shape) == tuple(ids.shape),
            f"{edge}: expected shape (B, T) = {tuple(ids.shape)}, got {tuple(got.shape)}.",
        )
        miss = first_mismatch(got.long(), expected)
        if miss is None:
            continue
        (row, col), g, e = miss
        padding = bool(before[row, col] == pad)
        if padding and g != e:
            hint = (
                f"padding must land on padding_idx = {pad}"
                + (" (you used 1: write padding_idx, the argument)" if pad != 1 and g == 1 else "")
                + " — multiply the count by the real-token mark so padding gets offset 0"
            )
        elif pad != 1 and g - e == 1 - pad:
            hint = "the offset is hard-coded: add padding_idx (the argument), not 1"
        elif bool((before[row, :col] == pad).any()) and g > e:
            hint = (
                "the padding before this token was counted: number only the real tokens "
                "(a cumulative sum of the real-token mark), not the place in the row"
            )
        else:
            hint = f"real tokens are numbered padding_idx + 1, + 2, ... = {pad + 1}, {pad + 2}, ..."
        raise ExerciseError(
            f"{edge}: row {row}, position {col} (token {int(before[row, col])}) got {g}, "
            f"expected {e} — {hint}."
        )
    return "right and left padding, padding ids 1, 0 and 3, an all-padding row, a single token."


check_position_ids = BuildCheck(
    _probe_position_ids,
    fallback=create_position_ids_from_input_ids,
    fallback_name="create_position_ids_from_input_ids",
    todo="number each row's real tokens padding_idx + 1, + 2, ... and give padding padding_idx, "
    "(B, T) -> (B, T), without a loop.",
)


# ----- 02/02: GPT-2's byte alphabet and text as byte symbols --------------------------------------

_PRINTABLE = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)}
_PRINTABLE |= set(range(ord("®"), ord("ÿ") + 1))


def _probe_bytes_to_unicode(my_bytes_to_unicode: Callable) -> str:
    got = run_learner_code(my_bytes_to_unicode)
    expect(isinstance(got, dict), f"return a dict {{byte: character}}, got {type(got).__name__}.")
    expected = bytes_to_unicode()
    expect(
        sorted(got) == list(range(256)),
        f"the keys must be the 256 bytes 0..255; got {len(got)} keys"
        + (
            f", e.g. {sorted(set(got) - set(range(256)))[:3]} outside 0..255"
            if set(got) - set(range(256))
            else ""
        )
        + ".",
    )
    expect(
        all(isinstance(c, str) and len(c) == 1 for c in got.values()),
        "every value must be ONE character (a str of length 1), e.g. chr(256 + n).",
    )
    shifts = {ord(got[b]) - ord(expected[b]) for b in range(256) if b not in _PRINTABLE}
    if len(shifts) == 1 and (shift := shifts.pop()) != 0:
        raise ExerciseError(
            f"every moved byte is {shift:+d} code point(s) off: byte 0x00 -> U+{ord(got[0]):04X}, "
            "expected U+0100 — the 68 moved bytes take 256, 257, ... in byte order (the first "
            "free code points after Latin-1)."
        )
    expect(
        len(set(got.values())) == 256,
        f"only {len(set(got.values()))} distinct characters for 256 bytes: two bytes share a "
        "symbol, so the text could not be decoded back — give every moved byte its own code point.",
    )
    for byte in range(256):
        g, e = got[byte], expected[byte]
        if g == e:
            continue
        if byte in _PRINTABLE:
            raise ExerciseError(
                f"byte 0x{byte:02x} ({chr(byte)!r}) is printable in Latin-1 and stays itself, got "
                f"{g!r} (U+{ord(g):04X}); the printable ranges are ! to ~, ¡ to ¬ and ® to ÿ."
            )
        if g == chr(byte):
            raise ExerciseError(
                f"byte 0x{byte:02x} {chr(byte)!r} is not printable"
                + (" (the soft hyphen, invisible in most fonts)" if byte == 0xAD else "")
                + f" and must move to {e!r} (U+{ord(e):04X}): 256 + its rank among the moved bytes."
            )
        raise ExerciseError(
            f"byte 0x{byte:02x} is moved to {g!r} (U+{ord(g):04X}), expected {e!r} "
            f"(U+{ord(e):04X}): the 68 moved bytes take 256, 257, ... in byte order "
            f"(0x00 -> U+0100, the space 0x20 -> U+0120 'Ġ')."
        )
    return "188 bytes as themselves, 68 moved to U+0100 and up in byte order; the space is 'Ġ'."


check_bytes_to_unicode = BuildCheck(
    _probe_bytes_to_unicode,
    fallback=bytes_to_unicode,
    fallback_name="course_lib.tokenization.byte_level.bytes_to_unicode",
    todo="return {byte: character} for all 256 bytes: printable Latin-1 bytes as themselves, "
    "the other 68 at chr(256), chr(257), ... in byte order.",
)


def _library_byte_symbols(text: str, table: dict[int, str]) -> str:
    """The text's UTF-8 bytes, each written with `table` (to_byte_symbols with a given table)."""
    return "".join(table[b] for b in text.encode("utf-8"))


_SYMBOL_CASES = (
    ("a word after a space", " return"),
    ("an accented letter, 2 UTF-8 bytes", " café"),
    ("a newline and a tab", "a\n\tb"),
    ("a Chinese character, 3 UTF-8 bytes", "你"),
    ("an emoji, 4 UTF-8 bytes", "🤗!"),
    ("the empty string", ""),
)


def _probe_byte_symbols(my_byte_symbols: Callable) -> str:
    table = bytes_to_unicode()
    for edge, text in _SYMBOL_CASES:
        try:
            got = run_learner_code(my_byte_symbols, text, dict(table))
        except ExerciseError as err:
            if "KeyError" in str(err) and any(ord(c) > 255 for c in text):
                raise ExerciseError(
                    f"{edge} ({text!r}): {err} — the table has the 256 BYTES as keys, not "
                    "characters: encode the text to UTF-8 first (text.encode('utf-8'))."
                ) from None
            raise
        expected = to_byte_symbols(text)
        expect(isinstance(got, str), f"return a str, got {type(got).__name__}.")
        if got == expected:
            continue
        per_char = "".join(table[ord(c)] if ord(c) < 256 else "?" for c in text)
        if got == per_char:
            raise ExerciseError(
                f"{edge}: {text!r} -> {got!r}, expected {expected!r} — you looked up each "
                f"CHARACTER; é is the two bytes 0xc3 0xa9: write text.encode('utf-8') byte by byte."
            )
        raise ExerciseError(
            f"{edge}: {text!r} -> {got!r}, expected {expected!r} (one symbol per UTF-8 byte, "
            f"{len(text.encode('utf-8'))} here)."
        )
    return "one symbol per UTF-8 byte: 2 for é, 3 for 你, 4 for 🤗; space 'Ġ', newline 'Ċ'."


check_byte_symbols = BuildCheck(
    _probe_byte_symbols,
    fallback=_library_byte_symbols,
    fallback_name="course_lib.tokenization.byte_level.to_byte_symbols",
    todo="write the text's UTF-8 bytes, each as its symbol from `table`, as one string.",
)


# ----- 02/04: the DOC-SENTENCES and FULL-SENTENCES packers -----------------------------------------


def pack_sentences(
    documents: list[list[list[int]]], budget: int, sep_id: int | None = None
) -> list[list[int]]:
    """The library's packing (course_lib.data.pairs._packed) on plain ids: whole sentences into
    blocks of <= budget ids; sep_id=None never crosses a document (DOC-SENTENCES), else one
    separator between documents inside a block (FULL-SENTENCES)."""
    blocks: list[list[int]] = []
    block: list[int] = []
    for doc in documents:
        if block and sep_id is not None:
            if len(block) + 1 >= budget:  # no room for the separator plus text
                blocks.append(block)
                block = []
            else:
                block = [*block, sep_id]
        for sentence in doc:
            for start in range(0, len(sentence), budget):  # too long: cut, never dropped
                piece = sentence[start : start + budget]
                if len(block) + len(piece) > budget:
                    blocks.append(block)
                    block = []
                block = [*block, *piece]
        if sep_id is None and block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    return blocks


def pack_doc_sentences(documents: list[list[list[int]]], budget: int) -> list[list[int]]:
    """DOC-SENTENCES: whole sentences into blocks of <= budget ids, never crossing a document."""
    return pack_sentences(documents, budget)


def pack_full_sentences(
    documents: list[list[list[int]]], budget: int, sep_id: int
) -> list[list[int]]:
    """FULL-SENTENCES: the same blocks running on across documents after a separator."""
    return pack_sentences(documents, budget, sep_id)


def _doc(start: int, *lengths: int) -> list[list[int]]:
    """A document of sentences with the given lengths, ids counting up from `start`."""
    out, i = [], start
    for n in lengths:
        out.append(list(range(i, i + n)))
        i += n
    return out


_SEP = 2
_PACK_CASES: tuple[tuple[str, list[list[list[int]]], int], ...] = (
    ("three short documents", [_doc(10, 3, 4, 2), _doc(100, 5), _doc(200, 2, 2, 3)], 8),
    ("a sentence that exactly fills a block", [_doc(10, 3, 8, 2)], 8),
    ("two sentences that exactly fill a block", [_doc(10, 3, 5, 2)], 8),
    ("a sentence longer than a block (20 ids, budget 8)", [_doc(10, 2, 20, 1), _doc(100, 3)], 8),
    ("a block with room for the separator but no text after it", [_doc(10, 7), _doc(100, 3)], 8),
    ("a block already full at a document's end", [_doc(10, 8), _doc(100, 2)], 8),
    ("a single document of one sentence", [_doc(10, 4)], 8),
)


def _describe_blocks(blocks: list[list[int]], limit: int = 4) -> str:
    shown = ", ".join(str(b) for b in blocks[:limit])
    return f"[{shown}{', ...' if len(blocks) > limit else ''}] ({len(blocks)} blocks)"


def _probe_packer(candidate: Callable, full: bool) -> str:
    for edge, documents, budget in _PACK_CASES:
        before = [[list(s) for s in doc] for doc in documents]
        args = (documents, budget, _SEP) if full else (documents, budget)
        got = run_learner_code(candidate, *args)
        expect(
            documents == before,
            "the documents were modified: build new blocks, leave the input as it is.",
        )
        expect(
            isinstance(got, list) and all(isinstance(b, list) for b in got),
            f"return a list of blocks (lists of ids), got {type(got).__name__}.",
        )
        expected = pack_sentences(documents, budget, _SEP if full else None)
        if got == expected:
            continue
        where = f"{edge} (budget {budget}, documents {documents}):"
        got_ids = [t for b in got for t in b if t != _SEP]
        all_ids = [t for doc in documents for s in doc for t in s]
        too_long = [b for b in got if len(b) > budget]
        if too_long:
            raise ExerciseError(
                f"{where} a block of {len(too_long[0])} ids exceeds the budget of {budget}: close "
                "the block when the next piece does not fit (len(block) + len(piece) > budget)."
            )
        if len(got_ids) < len(all_ids):
            raise ExerciseError(
                f"{where} {len(all_ids) - len(got_ids)} ids are missing from your blocks — "
                + (
                    "a sentence longer than a block must be CUT into block-sized pieces, not dropped."
                    if "longer" in edge
                    else "the last block (of a document, or of the corpus) must be closed too."
                )
            )
        if any(len(b) == 0 for b in got):
            raise ExerciseError(
                f"{where} your blocks include an empty one: {_describe_blocks(got)} — close a "
                "block only when it holds something."
            )
        if not full and _SEP in [t for b in got for t in b]:
            raise ExerciseError(
                f"{where} DOC-SENTENCES adds no separator: each document's blocks end at its end."
            )
        if full:
            seps = sum(b.count(_SEP) for b in got)
            want = sum(b.count(_SEP) for b in expected)
            if seps < want:
                raise ExerciseError(
                    f"{where} {seps} separators in your blocks, expected {want}: when a document "
                    f"starts inside an open block, put </s> (sep_id) between the two documents."
                )
            if any(b and b[-1] == _SEP for b in got):
                raise ExerciseError(
                    f"{where} a block ends in a bare separator: {_describe_blocks(got)} — when "
                    "len(block) + 1 >= budget there is no room for </s> plus text: close the block "
                    "instead."
                )
            if len(got) > len(expected):
                raise ExerciseError(
                    f"{where} {len(got)} blocks, expected {len(expected)}: FULL-SENTENCES keeps "
                    "the block open at a document's end and runs on into the next document."
                )
        cut = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
        i = cut[0] if cut else min(len(got), len(expected))
        if i < min(len(got), len(expected)) and expected[i][: len(got[i])] == got[i]:
            raise ExerciseError(
                f"{where} block {i} closed too early: {got[i]}, expected {expected[i]} — a piece "
                "that fills the block exactly (len(block) + len(piece) == budget) still goes in; "
                "close only when it would exceed the budget."
            )
        raise ExerciseError(
            f"{where} block {i} is {got[i] if i < len(got) else 'missing'}, expected "
            f"{expected[i] if i < len(expected) else 'no block'} — keep sentences whole: close "
            "the block when the next sentence (or piece) does not fit, and start the next block "
            "with it."
        )
    return (
        "whole sentences, long ones cut, exact fits, "
        + ("the separator's corner case, " if full else "every document's last block, ")
        + "on 6 small corpora."
    )


check_pack_doc_sentences = BuildCheck(
    lambda fn: _probe_packer(fn, full=False),
    fallback=pack_doc_sentences,
    fallback_name="course_lib.data.make_format_examples(format='doc-sentences')",
    todo="pack each document's sentences whole into blocks of <= budget ids (cut a longer "
    "sentence into pieces, close the block at the document's end); return the blocks.",
)

check_pack_full_sentences = BuildCheck(
    lambda fn: _probe_packer(fn, full=True),
    fallback=pack_full_sentences,
    fallback_name="course_lib.data.make_format_examples(format='full-sentences')",
    todo="pack as DOC-SENTENCES but run on across documents with sep_id between them (close the "
    "block instead when len(block) + 1 >= budget); return the blocks.",
)


# ----- 02/07: the pair language of the dynamic-masking lab -----------------------------------------


def _probe_pair_sequences(my_pair_sequences: Callable) -> str:
    cases = (
        ("the lab's size (64 symbols, 4 pairs, 16 sequences)", 64, 16, 4),
        ("one sequence of one pair", 64, 1, 1),
        ("a tiny alphabet of 2 symbols", 2, 6, 3),
    )
    for edge, n, count, pairs in cases:
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(n + count))
        before = perm.clone()
        got = run_learner_code(
            my_pair_sequences, perm, count, pairs, torch.Generator().manual_seed(7)
        )
        expect(torch.equal(perm, before), "`perm` was modified: index it, do not change it.")
        expected = sample_pair_sequences(before, count, pairs, torch.Generator().manual_seed(7))
        expect(
            isinstance(got, list) and len(got) == count,
            f"{edge}: return a list of {count} examples, got "
            f"{len(got) if isinstance(got, list) else type(got).__name__}.",
        )
        expect(
            all(isinstance(e, dict) and "input_ids" in e for e in got),
            'each example is a dict {"input_ids": [<s>, a1, b1, ..., </s>]}.',
        )
        for i, (g, e) in enumerate(zip(got, expected)):
            ids = (
                list(g["input_ids"])
                if not isinstance(g["input_ids"], Tensor)
                else g["input_ids"].tolist()
            )
            want = e["input_ids"]
            if ids == want:
                continue
            if len(ids) != len(want):
                raise ExerciseError(
                    f"{edge}: example {i} has {len(ids)} ids, expected {len(want)}: <s>, "
                    f"2 x {pairs} content ids, </s>."
                )
            if (ids[0], ids[-1]) != (0, 2):
                raise ExerciseError(
                    f"{edge}: example {i} must start with <s> = 0 and end with </s> = 2, got "
                    f"{ids[0]} ... {ids[-1]}."
                )
            shifts = {t - w for t, w in zip(ids[1:-1], want[1:-1])}
            if len(shifts) == 1:
                raise ExerciseError(
                    f"{edge}: example {i} is {ids}, expected {want}: every content id is "
                    f"{shifts.pop():+d} off — content ids start after the {PAIR_SPECIALS} specials "
                    f"(symbol s is id s + {PAIR_SPECIALS})."
                )
            content = [t - PAIR_SPECIALS for t in ids[1:-1]]
            want_content = [t - PAIR_SPECIALS for t in want[1:-1]]
            if content[0::2] == want_content[1::2] and content[1::2] == want_content[0::2]:
                raise ExerciseError(
                    f"{edge}: example {i} is {ids}, expected {want}: each pair is (perm[b], b) — "
                    "the permuted symbol FIRST, then b."
                )
            inverse = before.argsort()
            if (
                content[1::2] == want_content[1::2]
                and content[0::2] == inverse[torch.tensor(want_content[1::2])].tolist()
            ):
                raise ExerciseError(
                    f"{edge}: example {i} is {ids}, expected {want}: the first of each pair is "
                    "perm[b] — you used the inverse permutation."
                )
            if sorted(content) == sorted(want_content):
                raise ExerciseError(
                    f"{edge}: example {i} is {ids}, expected {want}: content ids start after the "
                    f"{PAIR_SPECIALS} specials (add 5) and interleave a1 b1 a2 b2 ..."
                )
            raise ExerciseError(
                f"{edge}: example {i} is {ids}, expected {want}: draw b as ONE "
                "torch.randint(0, len(perm), (count, pairs), generator=generator), then a = perm[b] "
                "— the same draws in the same order reproduce the library's data."
            )
    return "the library's sequences, draw for draw, at 64 and 2 symbols, down to one pair."


check_pair_sequences = BuildCheck(
    _probe_pair_sequences,
    fallback=sample_pair_sequences,
    fallback_name="course_lib.labs.roberta.sample_pair_sequences",
    todo="draw b (count, pairs) from `generator`, a = perm[b], and return "
    '[{"input_ids": [0, a1+5, b1+5, ..., 2]}] per sequence.',
)
