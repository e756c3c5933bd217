"""Tokenizers for the three subword families, trained live with HF `tokenizers`.

Example (WordPiece; "roberta" gives byte-level BPE, "albert" Unigram):
``tok = train_tokenizer("bert", corpus.texts(), vocab_size=8000)``, then
``tok.encode("Hello world", "Second segment")`` gives input_ids, token_type_ids, word_ids.
"""

from course_lib.tokenization.families import FAMILY_ALIASES, SPECIALS, canonical_family
from course_lib.tokenization.tokenizer import NO_WORD, CourseTokenizer, truncate_longest_first
from course_lib.tokenization.train import train_tokenizer

__all__ = [
    "FAMILY_ALIASES",
    "NO_WORD",
    "SPECIALS",
    "CourseTokenizer",
    "canonical_family",
    "train_tokenizer",
    "truncate_longest_first",
]
