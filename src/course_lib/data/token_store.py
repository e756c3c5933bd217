"""A corpus tokenized once, on disk: memory-mapped token ids and boundaries, examples on the fly.

Why: the list builders (`pairs.py`) hold every example as Python lists and dicts, ~55 MB of
memory per MB of text, and tokenize again on every run. A `TokenStore` encodes the documents
once, in batches with the fast tokenizer, into flat arrays next to the run; opening it maps the
files (nothing is read until used), so memory stays flat at any corpus size and a second run,
a resume or an evaluation starts at once.

Layout of a store folder (all little-endian numpy arrays, plus `meta.json`, written last):

- `ids.bin`      the token stream: every document's sentences in order, one separator token
                 between documents (the stream `make_mlm_examples` cuts), uint16 when the
                 vocabulary fits, else uint32;
- `words.bin`    int32 word id of each token within its sentence (-1: a separator, no word);
- `sentences.npy` int64 (start in the stream, length, words) per non-empty sentence;
- `documents.npy` int64 index of each document's first sentence (n_documents + 1 entries).

A store is keyed by the fingerprints of its documents and of the tokenizer (the folder name
holds the key, `meta.json` all of it): another corpus or tokenizer gets another store, and a
folder whose meta does not match (damaged, or older layout) is rebuilt. It is written under a
temporary name and renamed when complete, so an interrupted encoding (Ctrl-C, a full disk)
leaves no half store behind.

Examples built from a store equal the list builders' on the same documents, in the same order
(tests compare them): `mlm_blocks` = `make_mlm_examples`, `packed_sentences` = the
"full-sentences" and "doc-sentences" formats, `sentence_pairs` = NSP, SOP and sentence-pair
(drawn by `pairs.plan_pairs` on the sentence lengths alone), and `pretraining_examples` =
`build_pretraining_dataset` for every objective and format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from abc import abstractmethod
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from course_lib.data.corpus import Document
from course_lib.tokenization.tokenizer import NO_WORD, CourseTokenizer

# Bump when the layout or the encoding rule changes: older stores are then rebuilt.
FORMAT_VERSION = 1
# Characters per encoding batch: big enough for the Rust tokenizer's threads, small enough
# that a batch's Python lists stay a few tens of MB.
BATCH_CHARS = 1_000_000


def documents_fingerprint(documents: Sequence[Document] | Sequence[Sequence[str]]) -> str:
    """sha256 of the documents' sentences, in order (titles do not change the tokens)."""
    digest = hashlib.sha256()
    for doc in documents:
        for sentence in doc.sentences if hasattr(doc, "sentences") else doc:
            digest.update(sentence.encode("utf-8") + b"\x01")
        digest.update(b"\x02")
    return digest.hexdigest()


def tokenizer_fingerprint(tokenizer: CourseTokenizer) -> str:
    """sha256 of the tokenizer's full definition (its tokenizer.json) and family, as saved and
    loaded again: a freshly trained Unigram serializes a field its reloaded copy does not, and
    `course evaluate` (the checkpoint's copy) must find the store training wrote."""
    from tokenizers import Tokenizer

    canonical = Tokenizer.from_str(tokenizer.backend.to_str()).to_str()
    text = canonical + "\x00" + tokenizer.family
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TokenStore:
    """An encoded corpus, memory-mapped: see the module docstring for the layout."""

    path: Path
    ids: np.ndarray
    words: np.ndarray
    sentences: np.ndarray  # (n, 3): start in the stream, length, words (max word id + 1)
    documents: np.ndarray  # (n_documents + 1,): first sentence of each document
    meta: dict[str, Any]

    @property
    def n_tokens(self) -> int:
        """Length of the stream, separators included."""
        return int(self.ids.shape[0])

    @property
    def n_documents(self) -> int:
        return int(self.documents.shape[0]) - 1

    @property
    def nbytes(self) -> int:
        """Bytes on disk (what `course pretrain` reports)."""
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())

    def document(self, d: int) -> list[tuple[list[int], list[int]]]:
        """Document `d` as the list builders see it: (ids, word ids) per non-empty sentence."""
        first, last = int(self.documents[d]), int(self.documents[d + 1])
        out = []
        for start, length, _ in self.sentences[first:last].tolist():
            out.append(
                (
                    self.ids[start : start + length].tolist(),
                    self.words[start : start + length].tolist(),
                )
            )
        return out

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> TokenStore:
        """Map an existing store; ValueError if it is incomplete or damaged."""
        path = Path(path)
        try:
            meta = json.loads((path / "meta.json").read_text())
            dtype = np.dtype(meta["dtype"])
            n_tokens = int(meta["n_tokens"])
            ids = _map(path / "ids.bin", dtype, n_tokens)
            words = _map(path / "words.bin", np.dtype(np.int32), n_tokens)
            sentences = np.load(path / "sentences.npy", mmap_mode="r")
            documents = np.load(path / "documents.npy", mmap_mode="r")
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"token store {path} is incomplete or damaged ({err})") from err
        if sentences.ndim != 2 or sentences.shape[1] != 3 or documents.ndim != 1:
            raise ValueError(f"token store {path} has damaged boundary arrays")
        return cls(path, ids, words, sentences, documents, meta)


def _map(path: Path, dtype: np.dtype, n: int) -> np.ndarray:
    if path.stat().st_size != n * dtype.itemsize:
        raise ValueError(f"{path.name} holds {path.stat().st_size} bytes, not {n * dtype.itemsize}")
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(n,))


def store_key(documents_fp: str, tokenizer_fp: str) -> str:
    """The folder name's key: both fingerprints and the layout version, hashed short."""
    text = f"{FORMAT_VERSION}:{documents_fp}:{tokenizer_fp}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def open_or_build(
    root: str | os.PathLike[str],
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    name: str = "train",
    log: Callable[[str], None] | None = None,
    documents_fp: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> TokenStore:
    """The store of `documents` encoded by `tokenizer` under `root` (as `<name>-<key>`): opened
    when it exists and matches, else (re)built. `log` receives progress lines while encoding,
    `progress` the bytes of each encoded batch. `documents_fp` stands for the documents'
    fingerprint when the caller has a cheaper one (a streamed file corpus: `documents` is then
    an iterator, read only if the store must be built)."""
    root = Path(root)
    docs_fp = documents_fp or documents_fingerprint(documents)
    tok_fp = tokenizer_fingerprint(tokenizer)
    path = root / f"{name}-{store_key(docs_fp, tok_fp)}"
    expected = {"format": FORMAT_VERSION, "documents": docs_fp, "tokenizer": tok_fp}
    if path.exists():
        with contextlib.suppress(ValueError):
            store = TokenStore.open(path)
            if all(store.meta.get(k) == v for k, v in expected.items()):
                return store
        if log is not None:
            log(f"token store {path} does not match its corpus and tokenizer; rebuilding it")
        shutil.rmtree(path)
    build_store(path, documents, tokenizer, expected, log, progress)
    return TokenStore.open(path)


def _sentences(documents: Iterable[Document] | Iterable[Sequence[str]]) -> Iterator[list[str]]:
    for doc in documents:
        yield list(doc.sentences) if hasattr(doc, "sentences") else list(doc)


def build_store(
    path: str | os.PathLike[str],
    documents: Iterable[Document] | Iterable[Sequence[str]],
    tokenizer: CourseTokenizer,
    meta: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Encode `documents` into a new store at `path` (which must not exist).

    Sentences are encoded as `tokenize_documents` encodes them (each but a document's first
    with its leading space; empty ones left out and counted), in batches of ~`BATCH_CHARS`
    characters. Everything is written into a temporary folder beside `path` and renamed to it
    at the end: an interruption leaves nothing (the temporary folder is removed).
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; open it with TokenStore.open")
    path.parent.mkdir(parents=True, exist_ok=True)
    dtype = id_dtype(tokenizer.vocab_size)
    sep = tokenizer.sep_token_id
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        # Boundaries as numpy arrays per batch (24 bytes a sentence), not Python tuples.
        sentence_parts: list[np.ndarray] = []
        doc_parts = [np.zeros(1, dtype=np.int64)]
        pos, empty, n_docs, n_sentences, done_bytes = 0, 0, 0, 0, 0
        began, said = time.monotonic(), time.monotonic()
        with open(tmp / "ids.bin", "wb") as ids_f, open(tmp / "words.bin", "wb") as words_f:
            for batch in _batches(_sentences(documents)):
                flat = [" " + s if i else s for doc in batch for i, s in enumerate(doc)]
                pieces = iter(tokenizer.encode_pieces(flat))
                ids_out: list[int] = []
                words_out: list[int] = []
                rows: list[tuple[int, int, int]] = []
                firsts: list[int] = []
                for doc in batch:
                    if n_docs:
                        ids_out.append(sep)
                        words_out.append(NO_WORD)
                        pos += 1
                    for _ in doc:
                        ids, words = next(pieces)
                        if not ids:
                            empty += 1
                            continue
                        rows.append((pos, len(ids), max(words, default=-1) + 1))
                        ids_out.extend(ids)
                        words_out.extend(words)
                        pos += len(ids)
                    n_docs += 1
                    firsts.append(n_sentences + len(rows))
                n_sentences += len(rows)
                sentence_parts.append(np.asarray(rows, dtype=np.int64).reshape(-1, 3))
                doc_parts.append(np.asarray(firsts, dtype=np.int64))
                ids_f.write(np.asarray(ids_out, dtype=dtype).tobytes())
                words_f.write(np.asarray(words_out, dtype=np.int32).tobytes())
                batch_bytes = sum(len(s.encode("utf-8")) for s in flat)
                done_bytes += batch_bytes
                if progress is not None:
                    progress(batch_bytes)
                if log is not None and time.monotonic() - said >= 2.0:
                    said = time.monotonic()
                    rate = done_bytes / 1e6 / max(said - began, 1e-9)
                    log(f"encoded {done_bytes / 1e6:,.0f} MB ({rate:.1f} MB/s)")
        sentences = np.concatenate([np.zeros((0, 3), dtype=np.int64), *sentence_parts])
        np.save(tmp / "sentences.npy", sentences)
        np.save(tmp / "documents.npy", np.concatenate(doc_parts))
        del sentence_parts, doc_parts
        info = dict(meta or {})
        info.update(
            dtype=dtype.name,
            n_tokens=pos,
            n_sentences=n_sentences,
            n_documents=n_docs,
            empty_sentences=empty,
            encoded_bytes=done_bytes,
            seconds=round(time.monotonic() - began, 3),
        )
        (tmp / "meta.json").write_text(json.dumps(info, indent=1) + "\n")
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C included: no half store
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 (2 bytes a token) when every id fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def _batches(docs: Iterator[list[str]]) -> Iterator[list[list[str]]]:
    batch: list[list[str]] = []
    chars = 0
    for doc in docs:
        batch.append(doc)
        chars += sum(map(len, doc))
        if chars >= BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


# ----- examples on the fly ------------------------------------------------------------------


class _OnTheFly(Sequence):
    """A store's examples as a read-only sequence of dicts, each built when indexed (`_build`);
    `counts` and `skipped` as the list builders' `Examples` carry them."""

    def __init__(
        self,
        store: TokenStore,
        tokenizer: CourseTokenizer,
        counts: dict[str, int] | None = None,
        skipped: int = 0,
    ) -> None:
        self.store, self.tokenizer = store, tokenizer
        self.counts, self.skipped = dict(counts or {}), skipped
        rows = np.asarray(store.sentences).reshape(-1, 3)
        self._sentence_starts = rows[:, 0]
        self._sentence_ends = rows[:, 0] + rows[:, 1]
        # each sentence's first word, counting the words of every sentence before it
        self._word_base = np.concatenate([[0], np.cumsum(rows[:, 2])]).astype(np.int64)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"example {i} of {len(self)}")
        return self._build(i)

    @abstractmethod
    def _build(self, i: int) -> dict[str, Any]:
        """Example i (0 <= i < len(self)), read from the store."""


class StoreExamples(_OnTheFly):
    """Single-segment examples of a store (MLM blocks, packed sentences).

    `ranges[i]` is example i's [start, end) in the stream; only the ranges live in memory
    (16 bytes per example), the tokens stay on disk.
    """

    def __init__(
        self,
        store: TokenStore,
        tokenizer: CourseTokenizer,
        ranges: np.ndarray,
        global_words: bool,
        counts: dict[str, int] | None = None,
    ) -> None:
        super().__init__(store, tokenizer, counts)
        self.ranges, self.global_words = ranges, global_words

    def __len__(self) -> int:
        return int(self.ranges.shape[0])

    def _build(self, i: int) -> dict[str, Any]:
        a, e = (int(x) for x in self.ranges[i])
        ids = self.store.ids[a:e].tolist()
        local = np.asarray(self.store.words[a:e], dtype=np.int64)
        # The sentence of each token (separators belong to no sentence: their word is -1).
        positions = np.arange(a, e)
        which = np.searchsorted(self._sentence_starts, positions, side="right") - 1
        safe = np.maximum(which, 0)
        if len(self._sentence_ends):
            inside = (which >= 0) & (positions < self._sentence_ends[safe])
        else:  # a store without sentences: only separators
            inside = np.zeros(len(positions), dtype=bool)
        if self.global_words:  # make_mlm_examples numbers words across the whole stream
            words = np.where(local >= 0, local + self._word_base[safe], local)
        else:  # concat_segments over the example's own pieces: numbering starts at 0
            words = self._renumbered(local, np.where(inside, which, -1))
        input_ids, types = self.tokenizer.build_inputs_with_special_tokens(ids)
        word_ids = self.tokenizer.build_word_ids(words.tolist())
        return {"input_ids": input_ids, "token_type_ids": types, "word_ids": word_ids}

    @staticmethod
    def _renumbered(local: np.ndarray, piece_of: np.ndarray) -> np.ndarray:
        """Word ids as `concat_segments` gives them: each piece (a sentence's part, or a
        separator: `piece_of` -1) shifted past the words of the pieces before it."""
        out = local.copy()
        offset, start = 0, 0
        sep = piece_of < 0
        for k in range(1, len(local) + 1):
            boundary = k == len(local) or piece_of[k] != piece_of[k - 1] or sep[k] or sep[k - 1]
            if boundary:
                piece = local[start:k]
                out[start:k] = np.where(piece >= 0, piece + offset, piece)
                offset += int(piece.max(initial=-1)) + 1
                start = k
        return out


def _budget(tokenizer: CourseTokenizer, max_length: int) -> int:
    from course_lib.data.pairs import _budget as budget

    return budget(tokenizer, max_length, pair=False)


def mlm_blocks(store: TokenStore, tokenizer: CourseTokenizer, max_length: int) -> StoreExamples:
    """`make_mlm_examples` from a store: the stream cut every max_length - specials tokens."""
    budget = _budget(tokenizer, max_length)
    starts = np.arange(0, store.n_tokens, budget, dtype=np.int64)
    ranges = np.stack([starts, np.minimum(starts + budget, store.n_tokens)], axis=1)
    empty = int(store.meta.get("empty_sentences", 0))
    return StoreExamples(store, tokenizer, ranges, True, {"empty_sentences": empty})


def packed_sentences(
    store: TokenStore, tokenizer: CourseTokenizer, max_length: int, cross_documents: bool = True
) -> StoreExamples:
    """RoBERTa's "full-sentences" (`cross_documents`) or "doc-sentences" format from a store,
    block for block as `pairs._packed` packs them: whole sentences up to the budget, a separator
    between documents (dropped where a block would begin with it), a sentence longer than a
    block cut into block-sized pieces."""
    budget = _budget(tokenizer, max_length)
    ranges = array("q")  # flat (start, end) pairs: 16 bytes an example, not a tuple's ~100
    split = 0
    a = e = -1  # the open block's range; a < 0: empty
    sentences = np.asarray(store.sentences)
    documents = np.asarray(store.documents).tolist()

    def flush() -> None:
        nonlocal a, e
        if a >= 0:
            ranges.extend((a, e))
        a = e = -1

    for d in range(store.n_documents):
        if a >= 0 and cross_documents:
            if e - a + 1 >= budget:
                flush()
            else:
                e += 1  # the separator right after the block's last sentence
        for start, length, _ in sentences[documents[d] : documents[d + 1]].tolist():
            if length > budget:
                split += 1
            for s in range(start, start + length, budget):
                n = min(budget, start + length - s)
                if a >= 0 and e - a + n > budget:
                    flush()
                if a < 0:
                    a = e = s
                e = s + n
        if not cross_documents:
            flush()
    flush()
    counts = {"split_sentences": split, "empty_sentences": int(store.meta["empty_sentences"])}
    return StoreExamples(
        store, tokenizer, np.frombuffer(ranges, dtype=np.int64).reshape(-1, 2), False, counts
    )


class StorePairs(_OnTheFly):
    """Pair examples (NSP, SOP, sentence-pair) of a store, each built when indexed.

    `spans[i]` holds example i's A and B as stream ranges, with the first sentence of each
    (where its word numbering starts), and the label: 7 int64, 56 bytes an example. `label`
    names the label's key (None: no label, a pair format read by MLM alone).
    """

    def __init__(
        self,
        store: TokenStore,
        tokenizer: CourseTokenizer,
        spans: np.ndarray,
        label: str | None,
        skipped: int = 0,
        counts: dict[str, int] | None = None,
    ) -> None:
        super().__init__(store, tokenizer, counts, skipped)
        self.spans, self.label = spans, label

    def __len__(self) -> int:
        return int(self.spans.shape[0])

    def _segment(self, row: int, start: int, end: int) -> tuple[list[int], list[int]]:
        """Tokens [start, end) of one document, words numbered from sentence `row` on (as
        `concat_segments` numbers the sentences it joins)."""
        local = np.asarray(self.store.words[start:end], dtype=np.int64)
        which = np.searchsorted(self._sentence_starts, np.arange(start, end), side="right") - 1
        words = np.where(local >= 0, local + self._word_base[which] - self._word_base[row], local)
        return self.store.ids[start:end].tolist(), words.tolist()

    def _build(self, i: int) -> dict[str, Any]:
        a_row, a_start, a_end, b_row, b_start, b_end, label = (int(x) for x in self.spans[i])
        a, b = self._segment(a_row, a_start, a_end), self._segment(b_row, b_start, b_end)
        input_ids, types = self.tokenizer.build_inputs_with_special_tokens(a[0], b[0])
        word_ids = self.tokenizer.build_word_ids(a[1], b[1])
        example = {"input_ids": input_ids, "token_type_ids": types, "word_ids": word_ids}
        if self.label is not None:  # None: a pair format read by MLM alone
            example[self.label] = label
        return example


def sentence_pairs(
    store: TokenStore,
    tokenizer: CourseTokenizer,
    task: str,
    max_length: int,
    seed: int = 0,
    short_seq_prob: float | None = None,
    truncation: str = "junction",
) -> StorePairs:
    """`make_nsp_examples` ("NSP"), `make_sop_examples` ("SOP") or the "sentence-pair" format
    from a store: the same draw (`pairs.plan_pairs`, on the sentence lengths the store keeps),
    the tokens read from the mapped stream. `short_seq_prob` defaults as the list builders'
    (0.1 for NSP and SOP, unused by sentence-pair)."""
    from course_lib.data.pairs import PAIR_TASKS, _budget, plan_pairs

    budget = _budget(tokenizer, max_length, pair=True)
    if short_seq_prob is None:
        short_seq_prob = 0.0 if task == "sentence-pair" else 0.1
    rows = np.asarray(store.sentences).reshape(-1, 3)
    documents = np.asarray(store.documents)
    # Sentence lengths per document: Python ints, small ones shared (~8 bytes a sentence).
    lengths = [rows[documents[d] : documents[d + 1], 1].tolist() for d in range(store.n_documents)]
    pairs, skipped, counts = plan_pairs(
        task, lengths, budget, seed, short_seq_prob, truncation, stacklevel=2
    )
    del lengths
    flat = np.asarray([(*a, *b, y) for a, b, y in pairs], dtype=np.int64).reshape(-1, 11)
    del pairs
    spans = np.empty((flat.shape[0], 7), dtype=np.int64)
    for side, col in ((0, 0), (5, 3)):  # A in columns 0-2, B in 3-5
        doc, first, end, front, back = (flat[:, side + j] for j in range(5))
        first_row = documents[doc] + first
        last_row = documents[doc] + end - 1
        spans[:, col] = first_row
        spans[:, col + 1] = rows[first_row, 0] + front
        spans[:, col + 2] = rows[last_row, 0] + rows[last_row, 1] - back
    spans[:, 6] = flat[:, 10]
    counts["empty_sentences"] = int(store.meta.get("empty_sentences", 0))
    return StorePairs(store, tokenizer, spans, PAIR_TASKS[task][0], skipped, counts)


def pretraining_examples(
    store: TokenStore,
    tokenizer: CourseTokenizer,
    objective: str = "mlm",
    max_length: int = 128,
    seed: int = 0,
    format: str | None = None,
) -> StoreExamples | StorePairs:
    """`build_pretraining_dataset` from a store: the same examples in the same order, for every
    objective and format (MLM blocks, packed sentences, NSP, SOP, sentence pairs)."""
    from course_lib.data.pairs import pair_short_seq_prob, pretraining_format

    format = pretraining_format(objective, format)
    if format == "blocks":
        return mlm_blocks(store, tokenizer, max_length)
    if format in ("full-sentences", "doc-sentences"):
        return packed_sentences(store, tokenizer, max_length, format == "full-sentences")
    task = {"sop": "SOP", "segment-pair": "NSP", "sentence-pair": "sentence-pair"}[format]
    short = pair_short_seq_prob(objective, format)
    pairs = sentence_pairs(store, tokenizer, task, max_length, seed, short)
    if objective not in ("mlm+nsp", "mlm+sop"):
        pairs.label = None  # MLM alone: a pair format without its NSP label
    return pairs
