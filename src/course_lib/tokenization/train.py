"""Train a WordPiece, byte-level BPE or Unigram tokenizer on your texts, in seconds.

Any real text trains, at any size: the tokenizer learns from a bounded, seeded sample of a large
corpus (`MAX_TRAINING_CHARS`), and its alphabet is capped (`alphabet_limit`, as BERT's vocabulary
and `tokenizers`' `limit_alphabet` do), so a corpus with more distinct characters than the
vocabulary has entries still trains: its rarest characters become the unknown token (WordPiece,
Unigram; byte-level BPE needs no cap, its alphabet is the 256 bytes).

Training is deterministic: the same texts and settings give the same vocabulary and ids.
HF `tokenizers` alone is not (its trainers iterate over hash maps with per-process random
order, which breaks ties between equally frequent merges differently each run), so two
families get a small deterministic wrapper, explained where it happens.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from course_lib.tokenization.families import (
    SPECIALS,
    canonical_family,
    decoder_for,
    normalizer_for,
    post_processor_for,
    pre_tokenizer_for,
    special_added_tokens,
)
from course_lib.tokenization.tokenizer import CourseTokenizer

# Private-use code points stand in for "##x" continuation characters (see _train_wordpiece).
_PRIVATE_USE_START = 0xF0000
_PRIVATE_USE_END = 0xFFFFD
# Byte-level BPE starts from all 256 byte symbols, so smaller vocabularies are impossible.
_BYTE_ALPHABET = 256
# The alphabet cap (in vocabulary entries: WordPiece's "a" and "##a" are two) when the vocabulary
# is large: BERT's own, and the `limit_alphabet` default of tokenizers' BertWordPieceTokenizer.
DEFAULT_LIMIT_ALPHABET = 1000
# The most characters the trainer reads: a seeded sample of documents beyond it. 10M characters
# is ~9x the built-in corpus (1.1M, always read whole) and trains in seconds; more text barely
# changes a vocabulary of thousands of entries, while time and memory grow with it.
MAX_TRAINING_CHARS = 10_000_000
# Case per family when lowercase=None: as the released models (RoBERTa's BPE is cased).
DEFAULT_LOWERCASE = {"wordpiece": True, "bpe": False, "unigram": True}


def _empty_tokenizer(family: str, model: models.Model, lowercase: bool) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = normalizer_for(family, lowercase)
    tok.pre_tokenizer = pre_tokenizer_for(family)
    tok.decoder = decoder_for(family)
    return tok


def _words(tok: Tokenizer, texts: list[str]) -> list[list[str]]:
    """Normalize and pre-tokenize each text the way the finished tokenizer will."""
    assert tok.normalizer is not None and tok.pre_tokenizer is not None
    return [
        [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(t))]
        for t in texts
    ]


def alphabet_limit(family: str, vocab_size: int) -> int:
    """The automatic alphabet cap of `family` at `vocab_size`: how many single-character entries
    the vocabulary may hold (0 for byte-level BPE, whose alphabet is always the 256 bytes).

    Half of what the specials leave, at most `DEFAULT_LIMIT_ALPHABET`: the other half is kept
    for the merges, so the vocabulary holds words and word pieces, not only characters. An
    alphabet within the cap is kept whole (the built-in corpus's ~110 symbols at the default
    8000 entries, and at any vocab_size >= 223).
    """
    family = canonical_family(family)
    if family == "bpe":
        return 0
    budget = vocab_size - len(SPECIALS[family].order)
    return max(1, min(DEFAULT_LIMIT_ALPHABET, budget // 2))


def min_vocab_size(family: str) -> int:
    """The smallest vocab_size `family` trains with: one entry beyond the specials, or for
    byte-level BPE the 256 byte symbols beyond them."""
    family = canonical_family(family)
    n_special = len(SPECIALS[family].order)
    return _BYTE_ALPHABET + n_special if family == "bpe" else n_special + 1


def sample_texts(
    texts: list[str], max_chars: int | None = MAX_TRAINING_CHARS, seed: int = 0
) -> list[str]:
    """At most `max_chars` characters of `texts`: all of them when they fit, else whole texts
    drawn in a seeded random order (the last one cut at a space), kept in corpus order.

    Why documents and not a prefix: a corpus is often sorted (by source, topic or date), and
    the first 10M characters of it would train a tokenizer for its first topic only.
    """
    if max_chars is None or sum(map(len, texts)) <= max_chars:
        return texts
    if max_chars <= 0:
        raise ValueError(f"max_chars={max_chars} must be > 0 (or None: every text).")
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    taken: dict[int, str] = {}
    left = max_chars
    for i in order:
        text = texts[i]
        if len(text) > left:
            cut = text.rfind(" ", 0, left)
            text = text[: cut if cut > 0 else left]
        taken[i] = text
        left -= len(text)
        if left <= 0 or len(text) < len(texts[i]):
            break
    return [taken[i] for i in sorted(taken) if taken[i].strip()]


def _capped(symbols: Counter[str], limit: int | None, keep: str = "") -> set[str] | None:
    """The `limit` most frequent symbols (ties by the symbol itself, so every run agrees; `keep`
    always), or None when they all fit."""
    if limit is None or len(symbols) <= limit:
        return None
    ranked = sorted(symbols, key=lambda s: (s != keep, -symbols[s], s))
    return set(ranked[:limit])


def _say_capped(
    log: Callable[[str], None] | None, kept: int, symbols: Counter[str], unk: str
) -> None:
    if log is not None:
        dropped = len(symbols) - kept
        rare = sum(sorted(symbols.values(), reverse=True)[kept:])
        log(
            f"alphabet capped at the {kept} most frequent of {len(symbols)} symbols: the "
            f"{dropped} rarest ({rare:,} occurrences) become {unk}"
        )


def _train_wordpiece(
    texts: list[str],
    vocab_size: int,
    lowercase: bool,
    min_frequency: int,
    limit: int | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Tokenizer:
    """WordPiece vocabulary by BPE merges, as `tokenizers.WordPieceTrainer` does internally.

    Why not call WordPieceTrainer: it gives "##x" symbols ids in hash-map order, so ties
    between equally frequent merges go differently each run. Here every non-initial
    character is first replaced by its own private-use character (assigned in sorted order),
    plain BPE learns the merges (its alphabet is sorted, so ties are broken the same way
    every run), and the private characters are mapped back to "##" pieces.

    The alphabet cap (`limit` symbols, "a" and "##a" counted apart as each takes an entry)
    keeps the most frequent; a word holding a dropped symbol is left out of training, since
    WordPiece encodes such a word as one [UNK] whatever pieces the vocabulary has.
    """
    sp = SPECIALS["wordpiece"]
    tok = _empty_tokenizer("wordpiece", models.WordPiece(unk_token=sp.unk), lowercase)
    words = _words(tok, texts)
    symbols = Counter(w[0] for doc in words for w in doc)
    symbols.update("##" + c for doc in words for w in doc for c in w[1:])
    kept = _capped(symbols, limit)
    if kept is not None:
        _say_capped(log, len(kept), symbols, sp.unk)
        words = [
            [w for w in doc if w[0] in kept and all("##" + c in kept for c in w[1:])]
            for doc in words
        ]
    used = {c for doc in words for w in doc for c in w}
    continuation = sorted({c for doc in words for w in doc for c in w[1:]})
    free = (chr(cp) for cp in range(_PRIVATE_USE_START, _PRIVATE_USE_END) if chr(cp) not in used)
    to_private = {c: next(free) for c in continuation}
    from_private = {v: k for k, v in to_private.items()}
    table = str.maketrans(to_private)
    marked = [" ".join(w[0] + w[1:].translate(table) for w in doc) for doc in words]

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(sp.order),
        min_frequency=min_frequency,
        show_progress=progress,
    )
    bpe.train_from_iterator(marked, trainer)

    vocab: dict[str, int] = {}
    for piece, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1]):
        real = "".join(from_private.get(c, c) for c in piece)
        # A piece that starts with a stand-in character continues a word: "##" + characters.
        piece = "##" + real if piece[0] in from_private else real
        vocab.setdefault(piece, len(vocab))
    tok.model = models.WordPiece(vocab, unk_token=sp.unk, continuing_subword_prefix="##")
    tok.add_special_tokens(special_added_tokens("wordpiece"))
    return tok


def _train_bpe(
    texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int, progress: bool = False
) -> Tokenizer:
    """Byte-level BPE (GPT-2/RoBERTa): any string is bytes, so there is never an unknown."""
    tok = _empty_tokenizer("bpe", models.BPE(), lowercase)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_added_tokens("bpe"),
        min_frequency=min_frequency,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=progress,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _train_unigram(
    texts: list[str],
    vocab_size: int,
    lowercase: bool,
    limit: int | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Tokenizer:
    """SentencePiece-style Unigram LM, with ids re-ordered deterministically.

    Why re-order: the trainer's EM sums floats in hash-map order, so scores differ in the
    5th decimal between runs and the score-sorted ids shuffle among near-ties. The pieces
    and segmentations are stable, so pieces are ordered by how often they are used on the
    training texts (ties by the piece itself), which is the same every run.

    The alphabet cap (`limit` characters, "▁" always among them) keeps the most frequent; the
    trainer needs every character it sees in the vocabulary, so a dropped character is turned
    into a space in its training text: no piece spans it, and encoding gives it <unk>.
    """
    sp = SPECIALS["unigram"]
    tok = _empty_tokenizer("unigram", models.Unigram(), lowercase)
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=list(sp.order),
        unk_token=sp.unk,
        show_progress=progress,
    )
    inputs = texts
    chars = Counter(c for doc in _words(tok, texts) for w in doc for c in w)
    kept = _capped(chars, limit, keep="▁")
    if kept is not None:
        _say_capped(log, len(kept), chars, sp.unk)
        assert tok.normalizer is not None
        table = str.maketrans({c: " " for c in chars if c not in kept})
        inputs = [tok.normalizer.normalize_str(t).translate(table) for t in texts]
        inputs = [t for t in inputs if t.strip()]
    try:
        tok.train_from_iterator(inputs, trainer)
    except Exception as err:  # the Rust error is terse; say what to change
        raise ValueError(
            f"Unigram training failed with vocab_size={vocab_size}: {err}. The vocabulary must "
            "hold every distinct character of the texts plus the specials; use a larger "
            "vocab_size."
        ) from err
    scores = dict(map(tuple, json.loads(tok.to_str())["model"]["vocab"]))
    usage = Counter(i for e in tok.encode_batch(texts, add_special_tokens=False) for i in e.ids)
    pieces = [p for p in scores if p not in sp.order]
    pieces.sort(key=lambda p: (-usage[tok.token_to_id(p)], p))
    ordered = [(p, 0.0) for p in sp.order] + [(p, scores[p]) for p in pieces]
    tok.model = models.Unigram(ordered, unk_id=sp.order.index(sp.unk), byte_fallback=False)
    tok.add_special_tokens(special_added_tokens("unigram"))
    return tok


def train_tokenizer(
    family: str,
    texts: Iterable[str],
    vocab_size: int,
    lowercase: bool | None = None,
    min_frequency: int = 0,
    limit_alphabet: int | str | None = "auto",
    max_chars: int | None = MAX_TRAINING_CHARS,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> CourseTokenizer:
    """Train a tokenizer of `family` ("wordpiece", "bpe", "unigram" or a model name such as
    "bert", "roberta", "albert", "deberta", "distilbert") with at most `vocab_size` entries.

    Deterministic: no seed is needed, the same texts give the same vocabulary and ids.
    `lowercase=None` follows the released models: WordPiece and Unigram lowercase
    (bert-base-uncased, ALBERT), byte-level BPE is cased (RoBERTa, GPT-2).
    `min_frequency` (merges seen fewer times are not learned) applies to WordPiece and BPE.

    `limit_alphabet` caps the single-character entries (WordPiece, Unigram): "auto" is
    `alphabet_limit(family, vocab_size)`, an int a cap of your own, None no cap (then a text
    with more distinct characters than the vocabulary is refused). The rarest characters
    become the unknown token. `max_chars` bounds the text read: beyond it, a sample of whole
    texts drawn with `seed` (`sample_texts`); None reads everything. `log`, if given, receives
    a line when the text is sampled or the alphabet capped. `progress`: the `tokenizers`
    trainer's own bars (drawn on a terminal only).
    """
    family = canonical_family(family)
    if lowercase is None:
        lowercase = DEFAULT_LOWERCASE[family]
    elif not isinstance(lowercase, bool):
        raise TypeError(f"lowercase={lowercase!r} must be True, False or None (the default).")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError("No text to train the tokenizer on: `texts` is empty or all blank.")
    n_special = len(SPECIALS[family].order)
    if vocab_size <= n_special:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room beyond the {n_special} special tokens "
            f"{SPECIALS[family].order}; use a vocab_size in the thousands (e.g. 8000)."
        )
    if family == "bpe" and vocab_size < _BYTE_ALPHABET + n_special:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for byte-level BPE: it starts from "
            f"{_BYTE_ALPHABET} byte symbols + {n_special} specials; use vocab_size >= "
            f"{_BYTE_ALPHABET + n_special}."
        )
    if limit_alphabet == "auto":
        limit = alphabet_limit(family, vocab_size) or None
    elif limit_alphabet is None or (
        isinstance(limit_alphabet, int)
        and not isinstance(limit_alphabet, bool)
        and limit_alphabet > 0
    ):
        limit = limit_alphabet
    else:
        raise ValueError(
            f"limit_alphabet={limit_alphabet!r} must be 'auto', a number > 0 or None (no cap)."
        )
    total = sum(map(len, texts))
    sample = sample_texts(texts, max_chars, seed)
    if sample is not texts and log is not None:
        log(
            f"training on a seeded sample of {len(sample):,} of {len(texts):,} texts "
            f"({sum(map(len, sample)) / 1e6:.1f}M of {total / 1e6:.1f}M characters)"
        )
    texts = sample
    if family == "wordpiece":
        tok = _train_wordpiece(texts, vocab_size, lowercase, min_frequency, limit, log, progress)
    elif family == "bpe":
        tok = _train_bpe(texts, vocab_size, lowercase, min_frequency, progress)
    else:
        tok = _train_unigram(texts, vocab_size, lowercase, limit, log, progress)
    size = tok.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:  # WordPiece keeps every character even past the limit
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {n_special} specials and the distinct "
            f"characters of the texts alone need {size} entries; use vocab_size >= {size}."
        )
    tok.post_processor = post_processor_for(family, tok)
    return CourseTokenizer(tok, family)
