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
from typing import Any, NamedTuple

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


def pair_cuts(
    len_a: int,
    len_b: int,
    budget: int,
    truncation: str = "junction",
    rng: random.Random | None = None,
) -> tuple[int, int, int, int, bool]:
    """How `truncate_pair` cuts segments of `len_a` and `len_b` tokens, from the lengths alone:
    (A's tokens cut from its front, from its back, B's from its front, from its back, whether
    the junction survived). The token store cuts its pairs with it without reading a token."""
    _check_truncation(truncation)
    if truncation == "random" and rng is None:
        raise ValueError("truncation='random' draws the end to cut: pass rng=random.Random(seed).")
    cut = [0, 0, 0, 0]  # A front, A back, B front, B back
    junction_kept = True
    while len_a + len_b > budget:
        longer_is_a = len_a > len_b
        if truncation == "junction":
            front = longer_is_a  # A loses its front, B its back
        else:
            assert rng is not None
            front = rng.random() < 0.5
        junction_kept &= front if longer_is_a else not front
        cut[(0 if longer_is_a else 2) + (0 if front else 1)] += 1
        if longer_is_a:
            len_a -= 1
        else:
            len_b -= 1
    return cut[0], cut[1], cut[2], cut[3], junction_kept


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
    a_front, a_back, b_front, b_back, junction_kept = pair_cuts(
        len(a[0]), len(b[0]), budget, truncation, rng
    )
    for seg, front, back in ((a, a_front, a_back), (b, b_front, b_back)):
        for part in seg:
            part[:] = part[front : len(part) - back]
    return a_front + a_back + b_front + b_back, junction_kept


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


def _multi_sentence_docs(
    lengths: list[list[int]], task: str, stacklevel: int = 1
) -> tuple[list[int], int]:
    """The documents with >= 2 sentences (pairs need two), by index; warn with the count of
    others."""
    kept = [d for d, sentences in enumerate(lengths) if len(sentences) >= 2]
    skipped = len(lengths) - len(kept)
    if not kept:
        raise ValueError(
            f"{task} needs documents with at least two sentences, but all {len(lengths)} "
            "document(s) have fewer. Split your text into sentences (one document per file "
            "or block, several sentences each) or use objective='mlm'."
        )
    if skipped:
        warnings.warn(
            f"{task}: skipped {skipped} document(s) with fewer than two sentences.",
            stacklevel=stacklevel + 1,
        )
    return kept, skipped


def walk_chunks(
    doc: Sequence[Any],
    rng: random.Random,
    max_tokens: int,
    short_seq_prob: float,
    emit: Callable[[list[Any], int], int],
    size: Callable[[Any], int] | None = None,
) -> None:
    """Cut a document into chunks of consecutive sentences, as BERT's data script does.

    A chunk closes once it reaches the target length with >= 2 sentences, or at the end of
    the document; it never leaves a lone last sentence behind. A share `short_seq_prob` of
    targets is a random shorter length. `emit(chunk, target)` builds an example and returns
    how many of the chunk's last sentences to read again (NSP does, when B came from
    another document and the real continuation went unused). `size(sentence)` is a
    sentence's token count: `len(ids)` of an (ids, word ids) segment unless given.
    """

    def target() -> int:
        return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens

    goal = target()
    chunk: list[Any] = []
    length, i = 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i][0]) if size is None else size(doc[i])
        remaining = len(doc) - i - 1
        if remaining == 0 or (length >= goal and len(chunk) >= 2 and remaining != 1):
            i -= emit(chunk, goal)
            chunk, length, goal = [], 0, target()
        i += 1


# ----- pairs as spans: drawn from sentence lengths alone ---------------------------------------
# NSP, SOP and sentence-pair examples are drawn on the documents' sentence lengths only: which
# sentences make A and B, and how many tokens truncation cuts from each end. The list builders
# below turn the spans into tokens from lists, the token store (`token_store.sentence_pairs`)
# from its memory-mapped arrays: both draw here, so both give the same pairs.


class Span(NamedTuple):
    """Sentences [first, end) of document `doc`, less `front` tokens at its start and `back`
    at its end (what truncation cut)."""

    doc: int
    first: int
    end: int
    front: int = 0
    back: int = 0


# The pair tasks, their label and, for those whose B may come from another document, what
# the error says when there is no other document (what must come from one, what to use instead).
PAIR_TASKS = {
    "NSP": ("next_sentence_label", ("the random segment B must", "mlm+sop")),
    "SOP": ("sentence_order_label", None),
    "sentence-pair": ("next_sentence_label", ("random sentences", "doc-sentences")),
}


def _require_two_documents(docs: list[int], task: str, what: str, instead: str) -> None:
    """Random pairs take B from another document: refuse a corpus with only one."""
    if len(docs) < 2:
        raise ValueError(
            f"{task} needs at least two documents with two or more sentences ({what} come from "
            f"another document); add documents or use {instead!r}."
        )


def _other_document(docs: list[int], k: int, rng: random.Random) -> int:
    """A document other than docs[k], uniformly: a random B never comes from A's own document."""
    return docs[(k + 1 + rng.randrange(len(docs) - 1)) % len(docs)]


def plan_pairs(
    task: str,
    lengths: list[list[int]],
    budget: int,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    truncation: str = "junction",
    stacklevel: int = 1,
) -> tuple[list[tuple[Span, Span, int]], int, dict[str, int]]:
    """The pairs of `task` ("NSP", "SOP", "sentence-pair") over documents whose non-empty
    sentences have `lengths` tokens, cut to `budget` text tokens: ([(A, B, label)] in random
    order, documents skipped for having < 2 sentences, counts). One seeded draw, in the order
    BERT's and ALBERT's scripts make it. `stacklevel`: whose line the warning about skipped
    documents names (1: plan_pairs' caller, as `warnings.warn`'s, counted from here)."""
    _check_truncation(truncation)
    label_name, other = PAIR_TASKS[task]
    docs, skipped = _multi_sentence_docs(lengths, task, stacklevel + 1)
    if other is not None:
        _require_two_documents(docs, task, *other)
    rng = random.Random(seed)
    pairs: list[tuple[Span, Span, int]] = []
    counts = {"truncated_tokens": 0, "junction_kept": 0}
    if task == "NSP":
        counts = {"forced_random_next": 0, **counts}

    def add(a: Span, b: Span, label: int) -> None:
        len_a = sum(lengths[a.doc][a.first : a.end])
        len_b = sum(lengths[b.doc][b.first : b.end])
        a_front, a_back, b_front, b_back, kept = pair_cuts(len_a, len_b, budget, truncation, rng)
        counts["truncated_tokens"] += a_front + a_back + b_front + b_back
        counts["junction_kept"] += kept
        pairs.append(
            (a._replace(front=a_front, back=a_back), b._replace(front=b_front, back=b_back), label)
        )

    for k, d in enumerate(docs):
        sizes = lengths[d]
        if task == "sentence-pair":  # single sentences: the next one (0) or a random one (1)
            i = 0
            while i < len(sizes) - 1:
                if rng.random() < 0.5:
                    o = _other_document(docs, k, rng)
                    s = rng.randrange(len(lengths[o]))
                    add(Span(d, i, i + 1), Span(o, s, s + 1), 1)
                    i += 1  # sentence i + 1 is read again
                else:
                    add(Span(d, i, i + 1), Span(d, i + 1, i + 2), 0)
                    i += 2
            continue

        def emit(chunk: list[int], goal: int, k: int = k, d: int = d) -> int:
            first, end = chunk[0], chunk[-1] + 1
            if task == "SOP":  # chunks of a >= 2-sentence document have >= 2 sentences
                split = first + rng.randint(1, len(chunk) - 1)
                a, b = Span(d, first, split), Span(d, split, end)
                swapped = rng.random() < 0.5
                add(*((b, a) if swapped else (a, b)), int(swapped))
                return 0
            split = first + (rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1)
            a = Span(d, first, split)
            if len(chunk) == 1 or rng.random() < 0.5:
                counts["forced_random_next"] += len(chunk) == 1
                o = _other_document(docs, k, rng)
                start = rng.randrange(len(lengths[o]))
                need, total, stop = goal - sum(lengths[d][first:split]), 0, start
                for stop in range(start, len(lengths[o])):
                    total += lengths[o][stop]
                    if total >= need:
                        break
                add(a, Span(o, start, stop + 1), 1)
                return end - split  # the unused real continuation is read again
            add(a, Span(d, split, end), 0)
            return 0

        walk_chunks(range(len(sizes)), rng, budget, short_seq_prob, emit, sizes.__getitem__)
    rng.shuffle(pairs)  # documents mixed
    return pairs, skipped, counts


def _segment(docs: list[TokenizedDoc], span: Span) -> Segment:
    """A span's tokens and word ids (numbered as `concat_segments` numbers them)."""
    ids, words = concat_segments(docs[span.doc][span.first : span.end])
    stop = len(ids) - span.back
    return ids[span.front : stop], words[span.front : stop]


def _pair_examples(
    task: str,
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int,
    seed: int,
    short_seq_prob: float,
    truncation: str,
) -> Examples:
    """The examples of a pair task, as lists: tokenize, draw the spans, read their tokens."""
    _check_truncation(truncation)
    budget = _budget(tokenizer, max_length, pair=True)
    tokenized, empty = tokenize_documents(documents, tokenizer)
    lengths = [[len(ids) for ids, _ in doc] for doc in tokenized]
    pairs, skipped, counts = plan_pairs(
        task, lengths, budget, seed, short_seq_prob, truncation, stacklevel=3
    )  # the warning names the line that called make_nsp_examples (or make_sop_examples)
    label = PAIR_TASKS[task][0]
    examples = [
        _example(tokenizer, _segment(tokenized, a), _segment(tokenized, b), **{label: y})
        for a, b, y in pairs
    ]
    return Examples(examples, skipped=skipped, counts={**counts, "empty_sentences": empty})


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

    Chunks of consecutive sentences (`walk_chunks`) split at a random sentence into A and B;
    B is replaced by text from another document half of the time (always when the chunk has
    only one sentence; those are counted in `counts["forced_random_next"]`). Long pairs are cut
    as `truncate_pair(..., truncation)` cuts them; `counts["junction_kept"]` counts pairs whose
    junction survived (see `junction_survival`). truncation="random" is BERT's original rule.
    """
    return _pair_examples("NSP", documents, tokenizer, max_length, seed, short_seq_prob, truncation)


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
    then cut as `truncate_pair(..., truncation)` cuts: by default A loses its front and B its
    back, so the junction, where the order shows, survives (`counts["junction_kept"]`).
    """
    return _pair_examples("SOP", documents, tokenizer, max_length, seed, short_seq_prob, truncation)


# ----- RoBERTa's input formats and plain MLM blocks -------------------------------------------


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
    if format == "sentence-pair":
        return _pair_examples(
            "sentence-pair", documents, tokenizer, max_length, seed, short_seq_prob, truncation
        )
    budget = _budget(tokenizer, max_length, pair=False)
    tokenized, empty = tokenize_documents(documents, tokenizer)
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


def pretraining_format(objective: str, format: str | None = None) -> str:
    """The input format an objective's examples take: "sop" for "mlm+sop", a pair format for
    "mlm+nsp" ("segment-pair" unless "sentence-pair"), else `format` or "full-sentences" (or
    "blocks"); ValueError (one line) for a format the objective cannot use."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is unknown; use one of {OBJECTIVES}.")
    if objective == "mlm+sop":
        if format not in (None, "sop"):
            raise ValueError(f"objective='mlm+sop' builds its own pairs; drop format={format!r}.")
        return "sop"
    if objective == "mlm+nsp":
        format = format or "segment-pair"
        if format not in ("segment-pair", "sentence-pair"):
            raise ValueError(
                f"objective='mlm+nsp' needs a pair format, not {format!r}; use 'segment-pair' "
                "or 'sentence-pair' (or objective='mlm' for packed formats)."
            )
        return format
    format = format or "full-sentences"
    if format not in (*FORMATS, "blocks"):
        raise ValueError(f"format={format!r} is unknown; use one of {FORMATS}.")
    return format


def pair_short_seq_prob(objective: str, format: str) -> float:
    """BERT's 10% of shorter targets for its own pairs (NSP's segment-pair, SOP); none for
    sentence-pair or a pair format read by MLM alone (as `make_format_examples`' default)."""
    return 0.1 if format == "sop" or (objective, format) == ("mlm+nsp", "segment-pair") else 0.0


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
    (ELECTRA) reads the same examples as "mlm". `token_store.pretraining_examples` builds the
    same examples from a token store."""
    format = pretraining_format(objective, format)
    if format == "sop":
        return make_sop_examples(corpus_documents, tokenizer, max_length, seed)
    if format == "blocks":
        return make_mlm_examples(corpus_documents, tokenizer, max_length, seed)
    short = pair_short_seq_prob(objective, format)
    examples = make_format_examples(corpus_documents, tokenizer, max_length, format, seed, short)
    if objective != "mlm+nsp":
        for example in examples:  # MLM alone: a pair format without its NSP label
            example.pop("next_sentence_label", None)
    return examples
