"""GPT-2's byte-level alphabet (used by RoBERTa's BPE): every byte gets a printable character, so
any text becomes a string over 256 symbols and BPE never meets an unknown character.

Printable Latin-1 bytes map to themselves; the other 68 (control characters, space, ...) are
moved to code points 256, 257, ... in order, which is why a space shows as `Ġ` (256 + 32).
"""

from __future__ import annotations

from collections import Counter


def bytes_to_unicode() -> dict[int, str]:
    """{byte: printable character} for all 256 bytes (GPT-2's `bytes_to_unicode`)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:  # not printable: the next unused code point from 256 up
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


def to_byte_symbols(text: str) -> str:
    """The text as GPT-2's byte-level symbols: UTF-8 bytes first, then one symbol per byte."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in text.encode("utf-8"))


def from_byte_symbols(symbols: str) -> str:
    """The inverse of `to_byte_symbols`: symbols -> bytes -> one UTF-8 decode of the whole."""
    inverse = {c: b for b, c in bytes_to_unicode().items()}
    return bytes(inverse[c] for c in symbols).decode("utf-8")


Word = tuple[str, ...]


def pair_counts(word_freqs: dict[Word, int]) -> Counter[tuple[str, str]]:
    """How often each adjacent symbol pair occurs, every occurrence weighted by its word's count."""
    counts: Counter[tuple[str, str]] = Counter()
    for word, freq in word_freqs.items():
        for pair in zip(word, word[1:]):
            counts[pair] += freq
    return counts


def merge_word(word: Word, pair: tuple[str, str]) -> Word:
    """`word` with every occurrence of `pair` merged, left to right, never overlapping."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def bpe_merge_step(word_freqs: dict[Word, int]) -> tuple[tuple[str, str], dict[Word, int]]:
    """One BPE training step: the most frequent pair (ties: the smallest in sorted order) and
    the word counts with it merged everywhere."""
    counts = pair_counts(word_freqs)
    if not counts:
        raise ValueError("no word has two symbols left: nothing to merge.")
    best = min(counts, key=lambda pair: (-counts[pair], pair))
    return best, {merge_word(word, best): freq for word, freq in word_freqs.items()}
