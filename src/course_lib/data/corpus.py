"""Corpora as lists of documents of sentences: the `Corpus` type, local files, HF datasets.

BERT was trained on documents (Wikipedia articles, books) split into sentences, because next
sentence prediction needs to know where sentences and documents end. Every loader here returns
the same `Corpus`: documents with a title and a list of sentences, split into train/validation
by document (never by sentence, so no validation document leaks into training).

The built-in offline corpus (CPython's own documentation prose, no download) is extracted and
cached by `course_lib.data.builtin_corpus`, cleaned by `course_lib.data.rst_prose`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

# --------------------------------------------------------------------------------------------
# Documents and corpora
# --------------------------------------------------------------------------------------------


class TooFewDocuments(ValueError):
    """Too few documents to split into train and validation (`documents` says how many); the
    command line words its own hint from it, since its flags differ from these keywords."""

    def __init__(self, message: str, documents: int) -> None:
        super().__init__(message)
        self.documents = documents


class MissingTextField(ValueError):
    """A JSONL record without the text field: `location` (file:line), `field`, `found` keys."""

    def __init__(self, message: str, location: str, field: str, found: Any) -> None:
        super().__init__(message)
        self.location, self.field, self.found = location, field, found


@dataclass
class Document:
    """One document: a title and its sentences in reading order."""

    title: str
    sentences: list[str]

    @property
    def text(self) -> str:
        """The sentences joined by single spaces."""
        return " ".join(self.sentences)

    def __len__(self) -> int:
        return len(self.sentences)


@dataclass
class Corpus:
    """Train and validation documents plus how they were built (`build_info`)."""

    train: list[Document]
    validation: list[Document]
    name: str = "corpus"
    build_info: dict[str, Any] = field(default_factory=dict)

    @property
    def documents(self) -> list[Document]:
        """All documents, train first."""
        return self.train + self.validation

    @cached_property
    def content_hash(self) -> str:
        """Short hex digest of all titles and sentences (independent of the train/val split).

        Compare it with the hash printed in a notebook's saved output to see whether your
        corpus is the same one; different Python versions ship slightly different docs.
        """
        digest = hashlib.sha256()
        for doc in sorted(self.documents, key=lambda d: (d.title, d.sentences)):
            digest.update(doc.title.encode("utf-8") + b"\x00")
            for sentence in doc.sentences:
                digest.update(sentence.encode("utf-8") + b"\x01")
        return digest.hexdigest()[:12]

    def split(self, split: str) -> list[Document]:
        """The documents of one split: "train", "validation" or "all"."""
        if split == "train":
            return self.train
        if split == "validation":
            return self.validation
        if split == "all":
            return self.documents
        raise ValueError(f"split={split!r} is unknown; use 'train', 'validation' or 'all'.")

    def texts(self, split: str = "train") -> Iterator[str]:
        """One string per document, e.g. to train a tokenizer."""
        return (doc.text for doc in self.split(split))

    def sentences(self, split: str = "train") -> Iterator[str]:
        """Every sentence of a split, in document order."""
        return (s for doc in self.split(split) for s in doc.sentences)

    def stats(self) -> dict[str, int]:
        """Sizes of the whole corpus and of each split."""
        docs = self.documents
        return {
            "documents": len(docs),
            "train_documents": len(self.train),
            "validation_documents": len(self.validation),
            "sentences": sum(len(d.sentences) for d in docs),
            "characters": sum(len(d.text) for d in docs),
            "words": sum(len(s.split()) for d in docs for s in d.sentences),
        }

    def summary(self) -> str:
        """One line with the sizes and the content hash, for printing in notebooks."""
        s = self.stats()
        return (
            f"{self.name}: {s['documents']} documents ({s['train_documents']} train / "
            f"{s['validation_documents']} validation), {s['sentences']:,} sentences, "
            f"{s['words']:,} words, {s['characters']:,} characters, hash {self.content_hash}"
        )

    def __repr__(self) -> str:
        return f"Corpus({self.summary()})"


def validation_count(n_documents: int, validation_fraction: float) -> int:
    """How many of `n_documents` the split keeps for validation (at least one when asked for
    any); ValueError (TooFewDocuments) when no training document would remain."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(
            f"validation_fraction={validation_fraction} must be in [0, 1); "
            "use e.g. 0.05 for 5% of documents, or 0 for no validation split."
        )
    if not n_documents:
        raise ValueError(
            "The corpus is empty: no documents were found. Check the path or dataset name "
            "and that the files contain text."
        )
    n_val = round(validation_fraction * n_documents)
    if validation_fraction > 0:
        n_val = max(n_val, 1)
    if n_documents - n_val < 1:
        raise TooFewDocuments(
            f"The corpus has {n_documents} document(s), too few for "
            f"validation_fraction={validation_fraction}: no training document would remain. "
            "Add documents or pass validation_fraction=0.",
            n_documents,
        )
    return n_val


def split_documents(
    documents: Sequence[Document], validation_fraction: float, seed: int
) -> tuple[list[Document], list[Document]]:
    """Deterministic train/validation split by document.

    Documents are ranked by a hash of (seed, title, first sentence), so a document lands in the
    same split whatever other documents exist: two Python versions whose corpora differ by a
    few documents still agree on the split of all the rest.
    """
    n_val = validation_count(len(documents), validation_fraction)

    def rank(doc: Document) -> str:
        first = doc.sentences[0] if doc.sentences else ""
        return hashlib.sha256(f"{seed}\x00{doc.title}\x00{first}".encode()).hexdigest()

    order = sorted(range(len(documents)), key=lambda i: rank(documents[i]))
    val_idx = set(order[:n_val])
    train = [d for i, d in enumerate(documents) if i not in val_idx]
    val = [d for i, d in enumerate(documents) if i in val_idx]
    return train, val


# --------------------------------------------------------------------------------------------
# Sentence splitting (shared by every loader)
# --------------------------------------------------------------------------------------------

# Words whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al mr mrs ms dr prof no fig approx resp incl esp st jr sr ca".split()
)
# A sentence may end at . ! ? (optionally followed by a closing quote or bracket) when
# whitespace and then an upper-case letter, digit, quote or bracket follows.
_BOUNDARY = re.compile(r"[.!?][\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split running text into sentences with a small rule-based splitter (no model needed)."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        before = text[start : match.start() + 1]
        last_word = before.split()[-1].rstrip(".!?").lower() if before.split() else ""
        # "e.g. Foo" or an initial as in "J. Smith" is not a sentence end.
        if last_word.lstrip("(\"'") in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks of a text."""
    return [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]


def document_from_text(title: str, text: str) -> Document:
    """A Document from plain text: paragraphs are unwrapped, then split into sentences."""
    sentences = [s for para in split_paragraphs(text) for s in split_sentences(para)]
    return Document(title=title, sentences=sentences)


# --------------------------------------------------------------------------------------------
# Local files and Hugging Face datasets
# --------------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    """A file's text, or a ValueError that says to save it as UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(_not_utf8(path, err)) from err


def _not_utf8(path: Path, err: UnicodeDecodeError, line: int | None = None) -> str:
    where = f"line {line}" if line is not None else f"byte {err.start}"
    return (
        f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at {where}); "
        "save the file as UTF-8."
    )


def _jsonl_records(path: Path, text_field: str, label: str) -> Iterator[tuple[str, str]]:
    """(title, text) of each non-blank line of a JSONL file, not yet split into sentences."""
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(_not_utf8(path, err, lineno)) from err
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno} is not valid JSON ({err}).") from err
            if isinstance(record, str):
                text, title = record, f"{label}:{lineno}"
            elif isinstance(record, dict) and text_field in record:
                text = str(record[text_field])
                title = str(record.get("title", f"{label}:{lineno}"))
            else:
                keys = sorted(record) if isinstance(record, dict) else type(record).__name__
                raise MissingTextField(
                    f"{path}:{lineno} has no {text_field!r} field (found {keys}); pass "
                    "text_field=... naming the field that holds the text.",
                    f"{path}:{lineno}",
                    text_field,
                    keys,
                )
            yield title, text


def load_text_corpus(
    path: str | os.PathLike[str],
    validation_fraction: float = 0.05,
    seed: int = 0,
    document_boundary: str = "file",
    text_field: str = "text",
) -> Corpus:
    """A corpus from a .txt/.jsonl file or a folder of them (searched recursively, sorted).

    A .txt file is one document (`document_boundary="file"`) or one document per
    blank-line-separated block (`"blank_line"`). A .jsonl file holds one document per line:
    an object with a `text_field` (and optional "title") or a bare string.
    """
    # The same files and documents as the streamed reader (StreamCorpus), held in memory.
    stream = StreamCorpus(path, validation_fraction, seed, document_boundary, text_field)
    skipped = [0]
    documents = list(stream.iter_all(skipped))
    empty = skipped[0]
    if empty:
        warnings.warn(f"Skipped {empty} empty document(s) in {stream.root}.", stacklevel=2)
    train, val = split_documents(documents, validation_fraction, seed)
    info = {
        "source": str(stream.root),
        "files": len(stream.files),
        "empty_documents_skipped": empty,
    }
    return Corpus(train=train, validation=val, name=stream.root.name, build_info=info)


_WIKITEXT_HEADING = re.compile(r"^ ?= [^=].* = ?$")
_WIKITEXT_MARKERS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))


def _rows_to_documents(rows: Iterable[str], name: str, wikitext: bool) -> list[Document]:
    """Rows of text to documents; wikitext rows are lines grouped into articles by heading."""
    if not wikitext:
        docs = (document_from_text(f"{name}:{i}", row) for i, row in enumerate(rows))
        return [d for d in docs if d.sentences]
    documents: list[Document] = []
    title, lines = "", []

    def flush() -> None:
        doc = document_from_text(title or f"{name}:{len(documents)}", "\n\n".join(lines))
        if doc.sentences:
            documents.append(doc)

    for row in rows:
        if _WIKITEXT_HEADING.match(row.rstrip("\n")):
            if lines:
                flush()
            title, lines = row.strip().strip("= ").strip(), []
        elif row.strip() and not row.strip().startswith("="):  # sub-headings are not prose
            text = row.strip()
            for marker, repl in _WIKITEXT_MARKERS:
                text = text.replace(marker, repl)
            lines.append(text)
    if lines:
        flush()
    return documents


def load_hf_dataset(
    name: str,
    config: str | None = None,
    split: str = "train",
    validation_split: str | None = "validation",
    text_field: str = "text",
    validation_fraction: float = 0.05,
    seed: int = 0,
    max_documents: int | None = None,
) -> Corpus:
    """A corpus from a Hugging Face `datasets` dataset you have installed (and cached).

    Wikitext (e.g. name="wikitext", config="wikitext-2-raw-v1") stores one line per row; its
    lines are grouped into articles at " = Title = " headings. Other datasets give one document
    per row. If the dataset has `validation_split` it is used, else `validation_fraction`.
    """
    try:
        import datasets  # optional dependency, imported only here
    except ImportError as err:
        raise ImportError(
            "load_hf_dataset needs the optional `datasets` package: pip install datasets "
            "(or use load_builtin_corpus(), which needs no download)."
        ) from err
    wikitext = "wikitext" in name.lower() or "wikitext" in (config or "").lower()

    def load(which: str) -> list[Document]:
        data = datasets.load_dataset(name, config, split=which)
        if text_field not in data.column_names:
            raise ValueError(
                f"{name} has no column {text_field!r} (columns: {data.column_names}); "
                "pass text_field=..."
            )
        docs = _rows_to_documents(data[text_field], name, wikitext)
        return docs[:max_documents] if max_documents is not None else docs

    train_docs = load(split)
    val_docs: list[Document] | None = None
    if validation_split is not None:
        try:
            val_docs = load(validation_split)
        except (ValueError, KeyError) as err:
            if "column" in str(err):
                raise
            val_docs = None  # the dataset has no such split: fall back to a fraction
    if val_docs is None:
        train, val = split_documents(train_docs, validation_fraction, seed)
    else:
        if not train_docs:
            split_documents(train_docs, 0.0, seed)  # raises the empty-corpus error
        train, val = train_docs, val_docs
    info = {"source": f"datasets:{name}" + (f"/{config}" if config else "")}
    return Corpus(train=train, validation=val, name=name, build_info=info)


# --------------------------------------------------------------------------------------------
# A file corpus read as a stream (issue #40)
# --------------------------------------------------------------------------------------------
# Why: `load_text_corpus` returns every document as Python strings and lists, which is fine for
# the built-in corpus (a few MB) and not for a 400 MB dump. `StreamCorpus` gives the same
# documents, in the same order and with the same train/validation split, by reading the files
# again each time they are needed; only two numbers per document (its split, its length: 9
# bytes) stay in memory. Ranking the documents for the split needs one pass (`scan`), cached on
# disk keyed by a cheap fingerprint (path, size, modification time and the first and last MB of
# every file, not a hash of all the text, which would cost a pass of its own on every run).

# Bytes read at each end of every file for the fingerprint.
FINGERPRINT_EDGE = 1 << 20
# Bump when the scan's cached numbers change meaning.
SCAN_VERSION = 1


def corpus_files(root: Path) -> list[Path]:
    """The .txt/.jsonl files of a corpus path (a folder is searched recursively, sorted)."""
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist; pass a .txt/.jsonl file or a folder.")
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".jsonl"))
        if not files:
            raise ValueError(f"No .txt or .jsonl files under {root}.")
        return files
    if root.suffix in (".txt", ".jsonl"):
        return [root]
    raise ValueError(f"{root} is a {root.suffix or 'suffix-less'} file; use .txt or .jsonl.")


def _blank_line_blocks(path: Path) -> Iterator[str]:
    """`split_paragraphs(path.read_text())`, read line by line: the blocks between blank lines."""
    lines: list[str] = []
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(_not_utf8(path, err, lineno)) from err
            if line.strip():
                lines.append(line)
            elif lines:
                yield "".join(lines)
                lines = []
    if lines:
        yield "".join(lines)


class StreamCorpus:
    """The documents of a .txt/.jsonl file or folder, read from disk each time they are asked for.

    Same documents, order and split as `load_text_corpus(path, validation_fraction, seed,
    document_boundary, text_field)` (tests compare them), once `scan()` has ranked them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        validation_fraction: float = 0.05,
        seed: int = 0,
        document_boundary: str = "file",
        text_field: str = "text",
    ) -> None:
        if document_boundary not in ("file", "blank_line"):
            raise ValueError(
                f"document_boundary={document_boundary!r} is unknown; use 'file' or 'blank_line'."
            )
        self.root = Path(path).expanduser()
        self.files = corpus_files(self.root)
        self.name = self.root.name
        self.validation_fraction, self.seed = validation_fraction, seed
        self.document_boundary, self.text_field = document_boundary, text_field
        self.is_validation: np.ndarray | None = None  # bool per document, after scan()
        self.lengths: np.ndarray | None = None  # len(doc.text) per document, after scan()
        self.empty_documents = 0
        self.build_info = {"source": str(self.root), "files": len(self.files)}

    # ----- reading ------------------------------------------------------------------------------

    def _records(self) -> Iterator[tuple[str, str]]:
        """(title, text) of every document, empty ones included, in file order; unsplit."""
        for file in self.files:
            label = str(file.relative_to(self.root)) if self.root.is_dir() else file.name
            if file.suffix == ".jsonl":
                yield from _jsonl_records(file, self.text_field, label)
            elif self.document_boundary == "file":
                yield label, _read_text(file)
            else:
                for i, block in enumerate(_blank_line_blocks(file)):
                    yield f"{label}#{i}", block

    def iter_all(self, empty: list[int] | None = None) -> Iterator[Document]:
        """Every non-empty document, in file order (both splits); `empty[0]` counts the rest."""
        for title, text in self._records():
            doc = document_from_text(title, text)
            if doc.sentences:
                yield doc
            elif empty is not None:
                empty[0] += 1

    def _split_records(self, validation: bool) -> Iterator[tuple[int, str, str]]:
        """(index within the split, title, text) of one split's documents, unsplit. Only the
        wanted ones need splitting into sentences: a text has a sentence exactly when it has a
        character that is not whitespace (`split_sentences` drops whitespace, nothing else),
        so `text.strip()` numbers the non-empty documents as `iter_all` does."""
        mask = self._mask()
        i = j = 0
        for title, text in self._records():
            if not text.strip():
                continue
            if bool(mask[i]) == validation:
                yield j, title, text
                j += 1
            i += 1

    def documents(self, split: str) -> Iterator[Document]:
        """The documents of "train", "validation" or "all", streamed (the other split's are
        skipped unsplit: sentence splitting is most of the reading)."""
        if split == "all":
            yield from self.iter_all()
            return
        if split not in ("train", "validation"):
            raise ValueError(f"split={split!r} is unknown; use 'train', 'validation' or 'all'.")
        for _, title, text in self._split_records(split == "validation"):
            yield document_from_text(title, text)

    def texts(self, split: str = "train") -> Iterator[str]:
        """One string per document of a split, streamed."""
        return (doc.text for doc in self.documents(split))

    def sentences(self, split: str = "validation", limit: int = 5000) -> list[str]:
        """The first `limit` sentences of a split (fill-mask samples draw from them)."""
        out: list[str] = []
        for doc in self.documents(split):
            out.extend(doc.sentences[: limit - len(out)])
            if len(out) >= limit:
                break
        return out

    def n_documents(self, split: str) -> int:
        """Documents in "train" or "validation" (after `scan`)."""
        mask = self._mask()
        return int(mask.sum()) if split == "validation" else int((~mask).sum())

    def _mask(self) -> np.ndarray:
        if self.is_validation is None:
            raise RuntimeError("call scan() first: the split needs every document's rank")
        return self.is_validation

    # ----- the split ----------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """sha256 of each file's path, size, mtime and first/last MB, and of the reading rules."""
        rules = f"{SCAN_VERSION}:{self.document_boundary}:{self.text_field}"
        digest = hashlib.sha256(rules.encode())
        for file in self.files:
            stat = file.stat()
            digest.update(f"{file.resolve()}\x00{stat.st_size}\x00{stat.st_mtime_ns}\x00".encode())
            with file.open("rb") as handle:
                digest.update(handle.read(FINGERPRINT_EDGE))
                if stat.st_size > FINGERPRINT_EDGE:
                    handle.seek(max(FINGERPRINT_EDGE, stat.st_size - FINGERPRINT_EDGE))
                    digest.update(handle.read())
        return digest.hexdigest()

    def split_key(self, fingerprint: str | None = None) -> str:
        """The corpus fingerprint with the split's settings: what a token store is keyed by."""
        text = f"{fingerprint or self.fingerprint}:{self.validation_fraction!r}:{self.seed}"
        return hashlib.sha256(text.encode()).hexdigest()

    def scan(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        key: str | None = None,
        progress: bool = False,
    ) -> StreamCorpus:
        """Rank every document once (the split) and note its length; cached in `cache_dir`.
        `progress`: a bar of the characters read (a large corpus takes a while)."""
        if self.is_validation is not None:
            return self
        cache = None
        if cache_dir is not None:
            cache = Path(cache_dir) / f"scan-{(key or self.split_key())[:16]}.npz"
            if cache.is_file():
                try:
                    with np.load(cache) as saved:
                        self.is_validation = saved["is_validation"].astype(bool)
                        self.lengths = saved["lengths"].astype(np.int64)
                        self.empty_documents = int(saved["empty"])
                    self._warn_empty()
                    return self
                except (OSError, ValueError, KeyError):
                    pass  # damaged: scan again
        ranks, lengths, empty = [], [], [0]
        with _characters_bar(f"scanning {self.name}", None, progress) as bar:
            for doc in self.iter_all(empty):
                head = f"{self.seed}\x00{doc.title}\x00{doc.sentences[0]}"
                digest = hashlib.sha256(head.encode())
                # the first 8 bytes of the digest order documents as its hex string does
                ranks.append(int.from_bytes(digest.digest()[:8], "big"))
                lengths.append(len(doc.text))
                bar.update(lengths[-1])
        self.empty_documents = empty[0]
        rank = np.asarray(ranks, dtype=np.uint64)
        del ranks
        n_val = validation_count(len(rank), self.validation_fraction)
        order = np.argsort(rank, kind="stable")  # stable: ties keep file order, as sorted()
        self.is_validation = np.zeros(len(rank), dtype=bool)
        self.is_validation[order[:n_val]] = True
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self._warn_empty()
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{cache.name}.", suffix=".npz", dir=cache.parent)
            os.close(fd)
            try:
                np.savez(
                    tmp,
                    is_validation=self.is_validation,
                    lengths=self.lengths,
                    empty=self.empty_documents,
                )
                os.replace(tmp, cache)
            except BaseException:  # Ctrl-C included: no half cache
                Path(tmp).unlink(missing_ok=True)
                raise
        return self

    def _warn_empty(self) -> None:
        if self.empty_documents:
            warnings.warn(
                f"Skipped {self.empty_documents} empty document(s) in {self.root}.", stacklevel=3
            )

    def tokenizer_sample(
        self, max_chars: int | None, seed: int = 0, progress: bool = False
    ) -> tuple[list[str], int, int]:
        """`sample_texts(list(self.texts("train")), max_chars, seed)` without the list: the same
        texts, chosen from the scanned lengths and read in one pass. Returns the sample, the
        number of train texts and their characters. `progress`: a bar of the pass."""
        if self.lengths is None:
            raise RuntimeError("call scan() first")
        lengths = self.lengths[~self._mask()]
        total = int(lengths.sum())
        if max_chars is None or total <= max_chars:
            return list(self.texts("train")), len(lengths), total
        if max_chars <= 0:
            raise ValueError(f"max_chars={max_chars} must be > 0 (or None: every text).")
        # sample_texts' walk: whole texts in a seeded order until one no longer fits, which is
        # cut at a space (the cut needs the text: done while reading)
        order = list(range(len(lengths)))
        random.Random(seed).shuffle(order)
        room: dict[int, int | None] = {}  # index -> characters left for it (None: whole)
        left = max_chars
        for i in order:
            n = int(lengths[i])
            if n > left:
                room[i] = left
                break
            room[i] = None
            left -= n
            if left <= 0:
                break
        out: list[str] = []
        read = sampled = 0
        with _characters_bar("reading the tokenizer's sample", total, progress) as bar:
            for j, title, raw in self._split_records(validation=False):
                bar.update(int(lengths[j]))
                read += int(lengths[j])
                if j not in room:
                    continue  # not sampled: never split into sentences
                text = document_from_text(title, raw).text
                keep = room[j]
                if keep is not None:
                    space = text.rfind(" ", 0, keep)
                    text = text[: space if space > 0 else keep]
                if text.strip():
                    out.append(text)
                sampled += 1
                if sampled == len(room):  # the last sampled text: the rest is not read
                    bar.update(total - read)
                    break
        return out, len(lengths), total


class _NoBar:
    def update(self, n: int) -> None:
        pass


@contextlib.contextmanager
def _characters_bar(desc: str, total: int | None, enabled: bool) -> Iterator[Any]:
    """A tqdm bar counting characters (M chars and their rate per second), or one that shows
    nothing; closed on the way out, Ctrl-C included."""
    if not enabled:
        yield _NoBar()
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit="char", unit_scale=True, unit_divisor=1000)
    try:
        yield bar
    finally:
        bar.close()
