"""Pre-training examples from documents: NSP, SOP, RoBERTa's input formats, plain blocks.

Each builder tokenizes every sentence once, then assembles examples as dicts of Python lists
(`input_ids`, `token_type_ids`, `word_ids` and, for pair tasks, `next_sentence_label` or
`sentence_order_label`). Masking happens later, in the collator, so the same examples can be
masked statically (once) or dynamically (every epoch).

- NSP (BERT): segment A, then 50% its real continuation (label 0), 50% text from another
  document (label 1). 10% of examples aim at a shorter random length, so the model also
  sees short inputs (BERT's `short_seq_prob`).
- SOP (ALBERT): two consecutive segments of one document, in order (0) or swapped (1).
- Pairs longer than `max_length` lose tokens away from the A|B junction (A from its front, B
  from its back): the junction is where NSP's and SOP's cue sits (`truncate_pair`).
- RoBERTa's formats: segment-pair (= NSP), sentence-pair (single sentences + NSP),
  full-sentences (packed sentences that may cross documents, a separator between
  documents) and doc-sentences (packed, never crossing a document).
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from course_lib.data.corpus import Corpus, Document
from course_lib.objectives.targets import OBJECTIVES
from course_lib.tokenization.tokenizer import NO_WORD, CourseTokenizer

# A tokenized sentence or segment: (token ids, word ids), kept side by side.
Segment = tuple[list[int], list[int]]
TokenizedDoc = list[Segment]  # a document as its tokenized sentences, in order
FORMATS = ("segment-pair", "sentence-pair", "full-sentences", "doc-sentences")
TRUNCATIONS = ("junction", "random")  # see truncate_pair


class Examples(list):
    """A list of example dicts that also says what was skipped and why (`counts`)."""

    def __init__(
        self,
        items: Iterable[dict[str, Any]] = (),
        skipped: int = 0,
        counts: dict[str, int] | None = None,
    ) -> None:
        super().__init__(items)
        self.skipped = skipped
        self.counts = dict(counts or {})


# ----- shared helpers -------------------------------------------------------------------------


def _sentences_of(documents: Sequence[Document] | Sequence[Sequence[str]]) -> list[list[str]]:
    if isinstance(documents, Corpus):
        raise TypeError("Pass corpus.train (or corpus.validation), not the Corpus itself.")
    if isinstance(documents, str):
        raise TypeError("Pass a list of documents, not a string.")
    docs = [list(d.sentences) if hasattr(d, "sentences") else list(d) for d in documents]
    if not docs:
        raise ValueError("No documents given: the corpus split is empty. Check the loader.")
    return docs


def tokenize_documents(
    documents: Sequence[Document] | Sequence[Sequence[str]], tokenizer: CourseTokenizer
) -> tuple[list[TokenizedDoc], int]:
    """Tokenize every sentence in one batched call; returns (documents, empty sentences).

    Each sentence is encoded as it stands in its document's running text (`Document.text`
    joins sentences with one space): every sentence but a document's first gets its leading
    space. Byte-level BPE needs it, because the space belongs to the next word's token: "It"
    after a sentence is `ĠIt`, not `I t` glued to the full stop. WordPiece and Unigram split on
    whitespace first, so for them the space changes nothing.

    Sentences that tokenize to nothing (e.g. only control characters) are left out and
    counted.
    """
    docs = _sentences_of(documents)
    flat = [" " + s if i and isinstance(s, str) else s for d in docs for i, s in enumerate(d)]
    pieces = iter(tokenizer.encode_pieces(flat))
    out, empty = [], 0
    for doc in docs:
        segments = [next(pieces) for _ in doc]
        empty += sum(1 for ids, _ in segments if not ids)
        out.append([seg for seg in segments if seg[0]])
    return out, empty


def concat_segments(segments: Sequence[Segment]) -> Segment:
    """Join sentences into one segment, renumbering words so they stay distinct."""
    ids: list[int] = []
    words: list[int] = []
    offset = 0  # first free word id
    for seg_ids, seg_words in segments:
        ids.extend(seg_ids)
        words.extend(w + offset if w >= 0 else w for w in seg_words)
        offset += max(seg_words, default=-1) + 1
    return ids, words


def _check_truncation(truncation: str) -> None:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation={truncation!r} is unknown; use one of {TRUNCATIONS}.")


def truncate_pair(
    a: Segment,
    b: Segment,
    budget: int,
    truncation: str = "junction",
    rng: random.Random | None = None,
) -> tuple[int, bool]:
    """Trim A and B in place until they fit `budget` tokens; returns (tokens removed, whether
    A's last and B's first token both survived).

    Longest first, as BERT's truncate_seq_pair: each step removes one token from the longer
    segment (B on a tie), so both keep >= 1 token and end within one token of each other
    when both were cut. Which end loses it:
    - "junction" (the default): A loses its front, B its back, so the tokens either side of
      the A|B junction survive. Whether B follows A (NSP, SOP) is decided there; at 32
      tokens BERT's random ends cut the junction in most pairs.
    - "random": BERT's rule, a random end each time (needs `rng`), which avoids always
      cutting sentence ends but often cuts the junction.
    """
    _check_truncation(truncation)
    if truncation == "random" and rng is None:
        raise ValueError("truncation='random' draws the end to cut: pass rng=random.Random(seed).")
    removed, junction_kept = 0, True
    while len(a[0]) + len(b[0]) > budget:
        longer_is_a = len(a[0]) > len(b[0])
        longer = a if longer_is_a else b
        if truncation == "junction":
            index = 0 if longer_is_a else -1
        else:
            assert rng is not None
            index = 0 if rng.random() < 0.5 else -1
        junction_kept &= index != (-1 if longer_is_a else 0)
        del longer[0][index], longer[1][index]
        removed += 1
    return removed, junction_kept


def junction_survival(examples: Examples) -> float:
    """Share of pairs whose last token of A and first token of B both survived truncation
    (from `examples.counts`, written by make_nsp_examples and make_sop_examples)."""
    if not examples:
        raise ValueError("No examples: junction survival is undefined.")
    if "junction_kept" not in examples.counts:
        raise ValueError("These examples carry no junction count; build them with a pair builder.")
    return examples.counts["junction_kept"] / len(examples)


def _example(
    tokenizer: CourseTokenizer, a: Segment, b: Segment | None = None, **labels: int
) -> dict[str, Any]:
    input_ids, types = tokenizer.build_inputs_with_special_tokens(a[0], None if b is None else b[0])
    word_ids = tokenizer.build_word_ids(a[1], None if b is None else b[1])
    return {"input_ids": input_ids, "token_type_ids": types, "word_ids": word_ids, **labels}


def _budget(tokenizer: CourseTokenizer, max_length: int, pair: bool) -> int:
    """Tokens left for text after the specials; errors if it cannot hold a minimal example."""
    n_special = tokenizer.num_special_tokens_to_add(pair=pair)
    need = 2 if pair else 1
    if max_length - n_special < need:
        what = "two segments" if pair else "one token"
        raise ValueError(
            f"max_length={max_length} cannot hold {what} plus {n_special} special tokens; "
            f"use max_length >= {n_special + need} (BERT used 128 and 512)."
        )
    return max_length - n_special


def _multi_sentence_docs(docs: list[TokenizedDoc], task: str) -> tuple[list[TokenizedDoc], int]:
    """Keep documents with >= 2 sentences (pairs need two); warn with the count of others."""
    kept = [d for d in docs if len(d) >= 2]
    skipped = len(docs) - len(kept)
    if not kept:
        raise ValueError(
            f"{task} needs documents with at least two sentences, but all {len(docs)} "
            "document(s) have fewer. Split your text into sentences (one document per file "
            "or block, several sentences each) or use objective='mlm'."
        )
    if skipped:
        warnings.warn(
            f"{task}: skipped {skipped} document(s) with fewer than two sentences.", stacklevel=3
        )
    return kept, skipped


def walk_chunks(
    doc: list[Segment],
    rng: random.Random,
    max_tokens: int,
    short_seq_prob: float,
    emit: Callable[[list[Segment], int], int],
) -> None:
    """Cut a document into chunks of consecutive sentences, as BERT's data script does.

    A chunk closes once it reaches the target length with >= 2 sentences, or at the end of
    the document; it never leaves a lone last sentence behind. A share `short_seq_prob` of
    targets is a random shorter length. `emit(chunk, target)` builds an example and returns
    how many of the chunk's last sentences to read again (NSP does, when B came from
    another document and the real continuation went unused).
    """

    def target() -> int:
        return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens

    goal = target()
    chunk: list[Segment] = []
    length, i = 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i][0])
        remaining = len(doc) - i - 1
        if remaining == 0 or (length >= goal and len(chunk) >= 2 and remaining != 1):
            i -= emit(chunk, goal)
            chunk, length, goal = [], 0, target()
        i += 1


def _require_two_documents(docs: list[TokenizedDoc], task: str, what: str, instead: str) -> None:
    """Random pairs take B from another document: refuse a corpus with only one."""
    if len(docs) < 2:
        raise ValueError(
            f"{task} needs at least two documents with two or more sentences ({what} come from "
            f"another document); add documents or use {instead!r}."
        )


def _other_document(docs: list[TokenizedDoc], d: int, rng: random.Random) -> TokenizedDoc:
    """A document other than docs[d], uniformly: a random B never comes from A's own document."""
    return docs[(d + 1 + rng.randrange(len(docs) - 1)) % len(docs)]


def _shuffled(
    examples: list[dict[str, Any]], rng: random.Random, skipped: int, counts: dict[str, int]
) -> Examples:
    """The examples in random order (documents mixed), with what was skipped and counted."""
    rng.shuffle(examples)
    return Examples(examples, skipped=skipped, counts=counts)


def _fit_pair(
    a: Segment,
    b: Segment,
    budget: int,
    truncation: str,
    rng: random.Random,
    counts: dict[str, int],
) -> None:
    """truncate_pair, adding the removed tokens and a kept junction to `counts`."""
    removed, junction_kept = truncate_pair(a, b, budget, truncation, rng)
    counts["truncated_tokens"] += removed
    counts["junction_kept"] += junction_kept


# ----- NSP and SOP ----------------------------------------------------------------------------


def make_nsp_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 128,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    truncation: str = "junction",
) -> Examples:
    """BERT's segment pairs with next_sentence_label (0 = B follows A, 1 = B is random).

    B comes from another document half of the time (always when the chunk has only one
    sentence; those are counted in `counts["forced_random_next"]`). Long pairs are cut by
    `truncate_pair(..., truncation)`; `counts["junction_kept"]` counts pairs whose junction
    survived (see `junction_survival`). truncation="random" is BERT's original rule.
    """
    _check_truncation(truncation)
    budget = _budget(tokenizer, max_length, pair=True)
    tokenized, empty = tokenize_documents(documents, tokenizer)
    docs, skipped = _multi_sentence_docs(tokenized, "NSP")
    _require_two_documents(docs, "NSP", "the random segment B must", "mlm+sop")
    rng = random.Random(seed)
    examples: list[dict[str, Any]] = []
    counts = {
        "forced_random_next": 0,
        "truncated_tokens": 0,
        "junction_kept": 0,
        "empty_sentences": empty,
    }
    for d, doc in enumerate(docs):

        def emit(chunk: list[Segment], goal: int, d: int = d) -> int:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = concat_segments(chunk[:a_end])
            put_back = 0
            if len(chunk) == 1 or rng.random() < 0.5:
                counts["forced_random_next"] += len(chunk) == 1
                other = _other_document(docs, d, rng)
                parts: list[Segment] = []
                for seg in other[rng.randrange(len(other)) :]:
                    parts.append(seg)
                    if sum(len(p[0]) for p in parts) >= goal - len(a[0]):
                        break
                b, label = concat_segments(parts), 1
                put_back = len(chunk) - a_end  # the unused real continuation is read again
            else:
                b, label = concat_segments(chunk[a_end:]), 0
            _fit_pair(a, b, budget, truncation, rng, counts)
            examples.append(_example(tokenizer, a, b, next_sentence_label=label))
            return put_back

        walk_chunks(doc, rng, budget, short_seq_prob, emit)
    return _shuffled(examples, rng, skipped, counts)


def make_sop_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 128,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    truncation: str = "junction",
) -> Examples:
    """ALBERT's sentence-order pairs: consecutive segments, sentence_order_label 1 if swapped.

    Chunks as BERT's (`walk_chunks`), a random split into A and B, a swap with probability 0.5,
    then `truncate_pair(..., truncation)`: by default A loses its front and B its back, so the
    junction, where the order shows, survives (`counts["junction_kept"]`).
    """
    _check_truncation(truncation)
    budget = _budget(tokenizer, max_length, pair=True)
    tokenized, empty = tokenize_documents(documents, tokenizer)
    docs, skipped = _multi_sentence_docs(tokenized, "SOP")
    rng = random.Random(seed)
    examples: list[dict[str, Any]] = []
    counts = {"truncated_tokens": 0, "junction_kept": 0, "empty_sentences": empty}

    def emit(chunk: list[Segment], goal: int) -> int:
        a_end = rng.randint(1, len(chunk) - 1)  # chunks of a >= 2-sentence doc have >= 2
        a, b = concat_segments(chunk[:a_end]), concat_segments(chunk[a_end:])
        swapped = rng.random() < 0.5
        if swapped:
            a, b = b, a
        _fit_pair(a, b, budget, truncation, rng, counts)
        examples.append(_example(tokenizer, a, b, sentence_order_label=int(swapped)))
        return 0

    for doc in docs:
        walk_chunks(doc, rng, budget, short_seq_prob, emit)
    return _shuffled(examples, rng, skipped, counts)


# ----- RoBERTa's input formats and plain MLM blocks -------------------------------------------


def _sentence_pairs(
    docs: list[TokenizedDoc],
    tokenizer: CourseTokenizer,
    budget: int,
    seed: int,
    skipped: int,
    empty: int,
    truncation: str = "junction",
) -> Examples:
    """Pairs of single sentences: the next one (0) or one from another document (1)."""
    _require_two_documents(docs, "sentence-pair", "random sentences", "doc-sentences")
    rng = random.Random(seed)
    examples: list[dict[str, Any]] = []
    counts = {"truncated_tokens": 0, "junction_kept": 0, "empty_sentences": empty}
    for d, doc in enumerate(docs):
        i = 0
        while i < len(doc) - 1:
            a = (list(doc[i][0]), list(doc[i][1]))
            if rng.random() < 0.5:
                other = _other_document(docs, d, rng)
                seg = other[rng.randrange(len(other))]
                b, label, step = (list(seg[0]), list(seg[1])), 1, 1  # doc[i+1] is read again
            else:
                b, label, step = (list(doc[i + 1][0]), list(doc[i + 1][1])), 0, 2
            _fit_pair(a, b, budget, truncation, rng, counts)
            examples.append(_example(tokenizer, a, b, next_sentence_label=label))
            i += step
    return _shuffled(examples, rng, skipped, counts)


def _packed(
    docs: list[TokenizedDoc],
    tokenizer: CourseTokenizer,
    budget: int,
    cross_documents: bool,
    empty: int,
) -> Examples:
    """Pack whole sentences into blocks of <= budget tokens (FULL-/DOC-SENTENCES).

    Crossing a document boundary inserts one separator token. A sentence longer than a
    block is split into block-sized pieces (counted), never dropped.
    """
    sep = tokenizer.sep_token_id
    examples: list[dict[str, Any]] = []
    counts = {"split_sentences": 0, "empty_sentences": empty}
    block: list[Segment] = []
    used = 0

    def flush() -> None:
        nonlocal block, used
        if block:
            examples.append(_example(tokenizer, concat_segments(block)))
        block, used = [], 0

    for doc in docs:
        if block and cross_documents:
            if used + 1 >= budget:  # no room for the separator plus text
                flush()
            else:
                block.append(([sep], [NO_WORD]))
                used += 1
        for ids, words in doc:
            if len(ids) > budget:
                counts["split_sentences"] += 1
            for start in range(0, len(ids), budget):
                piece = (ids[start : start + budget], words[start : start + budget])
                if used + len(piece[0]) > budget:
                    flush()
                block.append(piece)
                used += len(piece[0])
        if not cross_documents:
            flush()
    flush()
    return Examples(examples, counts=counts)


def make_format_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 128,
    format: str = "full-sentences",
    seed: int = 0,
    short_seq_prob: float = 0.0,
    truncation: str = "junction",
) -> Examples:
    """Examples in one of RoBERTa's four input formats (Liu et al. 2019, section 4.2).

    "segment-pair" and "sentence-pair" carry next_sentence_label (and are cut by
    `truncate_pair(..., truncation)`); the packed formats ("full-sentences",
    "doc-sentences") are single segments for MLM only.
    """
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is unknown; use one of {FORMATS}.")
    _check_truncation(truncation)
    if format == "segment-pair":
        return make_nsp_examples(documents, tokenizer, max_length, seed, short_seq_prob, truncation)
    pair = format == "sentence-pair"
    budget = _budget(tokenizer, max_length, pair=pair)
    tokenized, empty = tokenize_documents(documents, tokenizer)
    if pair:
        docs, skipped = _multi_sentence_docs(tokenized, "sentence-pair")
        return _sentence_pairs(docs, tokenizer, budget, seed, skipped, empty, truncation)
    return _packed(tokenized, tokenizer, budget, format == "full-sentences", empty)


def make_mlm_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 128,
    seed: int = 0,
) -> Examples:
    """Contiguous blocks of exactly max_length tokens (the last may be shorter), for MLM only.

    Like transformers' run_mlm `group_texts`: all documents are concatenated with a separator
    and cut regardless of sentence ends. The final partial block is kept, not dropped.
    `seed` is unused (the blocks are deterministic) and kept for a uniform signature.
    """
    del seed
    budget = _budget(tokenizer, max_length, pair=False)
    tokenized, empty = tokenize_documents(documents, tokenizer)
    stream = concat_segments(
        [seg for doc in tokenized for seg in [*doc, ([tokenizer.sep_token_id], [NO_WORD])]][:-1]
    )
    examples = [
        _example(tokenizer, (stream[0][i : i + budget], stream[1][i : i + budget]))
        for i in range(0, len(stream[0]), budget)
    ]
    return Examples(examples, counts={"empty_sentences": empty})


def build_pretraining_dataset(
    corpus_documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    objective: str = "mlm",
    max_length: int = 128,
    seed: int = 0,
    format: str | None = None,
) -> Examples:
    """Examples for an objective: "mlm" (default format full-sentences, as RoBERTa),
    "mlm+nsp" (segment-pair, as BERT; or sentence-pair) or "mlm+sop" (as ALBERT); "rtd"
    (ELECTRA) reads the same examples as "mlm"."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is unknown; use one of {OBJECTIVES}.")
    if objective == "mlm+sop":
        if format not in (None, "sop"):
            raise ValueError(f"objective='mlm+sop' builds its own pairs; drop format={format!r}.")
        return make_sop_examples(corpus_documents, tokenizer, max_length, seed)
    if objective == "mlm+nsp":
        format = format or "segment-pair"
        if format not in ("segment-pair", "sentence-pair"):
            raise ValueError(
                f"objective='mlm+nsp' needs a pair format, not {format!r}; use 'segment-pair' "
                "or 'sentence-pair' (or objective='mlm' for packed formats)."
            )
        short = 0.1 if format == "segment-pair" else 0.0
        return make_format_examples(corpus_documents, tokenizer, max_length, format, seed, short)
    format = format or "full-sentences"
    if format == "blocks":
        return make_mlm_examples(corpus_documents, tokenizer, max_length, seed)
    examples = make_format_examples(corpus_documents, tokenizer, max_length, format, seed)
    for example in examples:  # MLM alone: a pair format without its NSP label
        example.pop("next_sentence_label", None)
    return examples
