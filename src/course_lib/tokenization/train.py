"""Train a WordPiece, byte-level BPE or Unigram tokenizer on your texts, in seconds.

Training is deterministic: the same texts and settings give the same vocabulary and ids.
HF `tokenizers` alone is not (its trainers iterate over hash maps with per-process random
order, which breaks ties between equally frequent merges differently each run), so two
families get a small deterministic wrapper, explained where it happens.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

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


def _train_wordpiece(
    texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int
) -> Tokenizer:
    """WordPiece vocabulary by BPE merges, as `tokenizers.WordPieceTrainer` does internally.

    Why not call WordPieceTrainer: it gives "##x" symbols ids in hash-map order, so ties
    between equally frequent merges go differently each run. Here every non-initial
    character is first replaced by its own private-use character (assigned in sorted order),
    plain BPE learns the merges (its alphabet is sorted, so ties are broken the same way
    every run), and the private characters are mapped back to "##" pieces.
    """
    sp = SPECIALS["wordpiece"]
    tok = _empty_tokenizer("wordpiece", models.WordPiece(unk_token=sp.unk), lowercase)
    words = _words(tok, texts)
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
        show_progress=False,
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


def _train_bpe(texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int) -> Tokenizer:
    """Byte-level BPE (GPT-2/RoBERTa): any string is bytes, so there is never an unknown."""
    tok = _empty_tokenizer("bpe", models.BPE(), lowercase)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_added_tokens("bpe"),
        min_frequency=min_frequency,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _train_unigram(texts: list[str], vocab_size: int, lowercase: bool) -> Tokenizer:
    """SentencePiece-style Unigram LM, with ids re-ordered deterministically.

    Why re-order: the trainer's EM sums floats in hash-map order, so scores differ in the
    5th decimal between runs and the score-sorted ids shuffle among near-ties. The pieces
    and segmentations are stable, so pieces are ordered by how often they are used on the
    training texts (ties by the piece itself), which is the same every run.
    """
    sp = SPECIALS["unigram"]
    tok = _empty_tokenizer("unigram", models.Unigram(), lowercase)
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=list(sp.order), unk_token=sp.unk, show_progress=False
    )
    try:
        tok.train_from_iterator(texts, trainer)
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
) -> CourseTokenizer:
    """Train a tokenizer of `family` ("wordpiece", "bpe", "unigram" or a model name such as
    "bert", "roberta", "albert", "deberta", "distilbert") with at most `vocab_size` entries.

    Deterministic: no seed is needed, the same texts give the same vocabulary and ids.
    `lowercase=None` follows the released models: WordPiece and Unigram lowercase
    (bert-base-uncased, ALBERT), byte-level BPE is cased (RoBERTa, GPT-2).
    `min_frequency` (merges seen fewer times are not learned) applies to WordPiece and BPE.
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
    if family == "wordpiece":
        tok = _train_wordpiece(texts, vocab_size, lowercase, min_frequency)
    elif family == "bpe":
        tok = _train_bpe(texts, vocab_size, lowercase, min_frequency)
    else:
        tok = _train_unigram(texts, vocab_size, lowercase)
    size = tok.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:  # WordPiece keeps every character even past the limit
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {n_special} specials and the distinct "
            f"characters of the texts alone need {size} entries; use vocab_size >= {size}."
        )
    tok.post_processor = post_processor_for(family, tok)
    return CourseTokenizer(tok, family)
