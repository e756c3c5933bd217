"""Corpora as lists of documents of sentences: a built-in offline one, local files, HF datasets.

BERT was trained on documents (Wikipedia articles, books) split into sentences, because next
sentence prediction needs to know where sentences and documents end. Every loader here returns
the same `Corpus`: documents with a title and a list of sentences, split into train/validation
by document (never by sentence, so no validation document leaks into training).

The built-in corpus needs no download: it is English prose that ships with every CPython, the
language reference topics behind `help()` (`pydoc_data.topics`) and the docstrings of the
standard library. Source docstrings are read by parsing files with `ast`, so no module code
runs; only a fixed allow-list of C modules (which have no source) is imported.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

# Bump when the extraction or cleaning changes, so stale caches are rebuilt, not reused.
BUILTIN_CORPUS_VERSION = 2
CACHE_ENV_VAR = "COURSE_LIB_CACHE"


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


def split_documents(
    documents: Sequence[Document], validation_fraction: float, seed: int
) -> tuple[list[Document], list[Document]]:
    """Deterministic train/validation split by document.

    Documents are ranked by a hash of (seed, title, first sentence), so a document lands in the
    same split whatever other documents exist: two Python versions whose corpora differ by a
    few documents still agree on the split of all the rest.
    """
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(
            f"validation_fraction={validation_fraction} must be in [0, 1); "
            "use e.g. 0.05 for 5% of documents, or 0 for no validation split."
        )
    if not documents:
        raise ValueError(
            "The corpus is empty: no documents were found. Check the path or dataset name "
            "and that the files contain text."
        )
    n_val = round(validation_fraction * len(documents))
    if validation_fraction > 0:
        n_val = max(n_val, 1)
    if len(documents) - n_val < 1:
        raise TooFewDocuments(
            f"The corpus has {len(documents)} document(s), too few for "
            f"validation_fraction={validation_fraction}: no training document would remain. "
            "Add documents or pass validation_fraction=0.",
            len(documents),
        )

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


def _paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks of a text."""
    return [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]


def document_from_text(title: str, text: str) -> Document:
    """A Document from plain text: paragraphs are unwrapped, then split into sentences."""
    sentences = [s for para in _paragraphs(text) for s in split_sentences(para)]
    return Document(title=title, sentences=sentences)


# --------------------------------------------------------------------------------------------
# Cleaning reStructuredText-flavoured documentation into prose
# --------------------------------------------------------------------------------------------

_INLINE_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r":[\w:.-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`"), r"\1"),  # :func:`len` -> len
    (re.compile(r"`([^`<]+?)\s*<[^>]+>`_{1,2}"), r"\1"),  # `text <url>`_ -> text
    (re.compile(r"``([^`]+)``"), r"\1"),  # ``literal`` -> literal
    (re.compile(r"``([^`'\n]+)''"), r'"\1"'),  # old-style ``quote'' -> "quote"
    (re.compile(r"`([^`'\n]+)'"), r"'\1'"),  # old-style `quote' -> 'quote'
    (re.compile(r"`([^`\n]+)`_?"), r"\1"),
    # Emphasis only around words: "**" and "*args" are Python syntax, not markup.
    (re.compile(r"\*\*([A-Za-z0-9][^*\"\n]{0,80}?)\*\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w*\"])\*([A-Za-z][^*\"\n]{0,80}?)\*(?![*\"])"), r"\1"),
    (re.compile(r"\s\[\d+\]"), ""),  # footnote references
]
_CHAR_MAP = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "…": "...", "\u00a0": " "})
# Paragraphs that introduce an indented block of prose rather than a code example.
_LABELS = frozenset(
    "note notes warning warnings see also args arguments parameters params returns return "
    "raises yields attributes keyword arguments important caution tip hint".split(" ")
)
_CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.\s|\$ |#|@\w|def |class |import |from \S+ import |return\b|raise\b|"
    r"if .*:$|elif .*:$|else:|for .*:$|while .*:$|try:|except\b.*:$|finally:|with .*:$|"
    r"print\(|[\w.\[\]]+\s*[-+*/]?=\s*\S|[\w.]+\(.*\)$|[{}\[\]()]+,?$)"
)
_SIGNATURE = re.compile(r"^\s*[\w.]+\(.*\)\s*(->.*)?$|^\s*[\w.]+\(.*\)\s*-->.*$")
_BULLET = re.compile(r"^(?:[*\-•]|\d+\.|\(\d+\)|\[\d+\])\s+")
# "argv -- command line arguments": one definition per line, as in sys.__doc__.
_DEFINITION = re.compile(r"^[\w.()\[\], ]+ -- ")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+[\w:-]+::")
_FIELD = re.compile(
    r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?)"
    r"(\s+[^:]*)?:\s*"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_label(text: str) -> bool:
    words = text.strip().rstrip(":").lower()
    return text.strip().endswith(":") and (words in _LABELS or words.startswith("changed in"))


def _clean_inline(text: str) -> str:
    text = text.translate(_CHAR_MAP)
    for pattern, repl in _INLINE_RULES:
        text = pattern.sub(repl, text)
    return re.sub(r"\s+", " ", text).strip()


def _is_prose_sentence(sentence: str) -> bool:
    """At least three words and mostly letters: drops leftovers such as `x = f(y)`."""
    if len(sentence.split()) < 3:
        return False
    visible = [c for c in sentence if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    return letters >= 0.7 * len(visible)


def clean_rst(text: str, counts: dict[str, int]) -> list[str]:
    """Turn documentation text (pydoc topics or a docstring) into prose paragraphs.

    Indented blocks deeper than the surrounding prose are literal blocks (code, grammar,
    tables) unless a label like "Note:" introduces them; doctest sessions, tables, headings,
    directives and lines that look like code are dropped. `counts` tallies what was removed.
    """
    text = text.expandtabs(8).replace("\r\n", "\n")
    lines = [ln.rstrip() for ln in text.split("\n")]
    # Headings: a line followed by an underline of one repeated punctuation character.
    for i in range(len(lines) - 1):
        under = lines[i + 1].strip()
        if lines[i].strip() and len(under) >= 3 and len(set(under)) == 1 and not under.isalnum():
            lines[i] = ""
            counts["headings"] = counts.get("headings", 0) + 1
    kept: list[str] = []
    prose_level = 0
    after_label = False
    for para in _paragraphs("\n".join(lines)):
        para_lines = [ln for ln in para.split("\n") if ln.strip()]
        indent = min(_indent(ln) for ln in para_lines)
        if indent > prose_level and not after_label:
            counts["literal_blocks"] = counts.get("literal_blocks", 0) + 1
            continue
        # Code is judged per paragraph: one wrapped prose line may start with "len(x)", but
        # a paragraph that is mostly code lines is an example, not prose.
        if sum(bool(_CODE_LINE.match(ln)) for ln in para_lines) * 2 >= len(para_lines):
            counts["code_paragraphs"] = counts.get("code_paragraphs", 0) + 1
            continue
        out: list[str] = []
        for line in para_lines:
            stripped = line.strip()
            if stripped.startswith(">>>") or _DIRECTIVE.match(line):
                counts["code_lines"] = counts.get("code_lines", 0) + 1
                break  # a doctest session or directive runs to the end of its paragraph
            if stripped[0] in "|+" or re.fullmatch(r"[-=~*^+#:. ]+|-\[.*\]-", stripped):
                counts["table_or_rule_lines"] = counts.get("table_or_rule_lines", 0) + 1
                continue
            if not kept and not out and _SIGNATURE.match(line):
                counts["signature_lines"] = counts.get("signature_lines", 0) + 1
                continue  # "int(x, base=10) -> integer" opening a C docstring
            out.append(_FIELD.sub("", stripped))
        if not out:
            continue
        # List items ("* x", "1. x") are separate units; continuation lines join the item.
        first = para_lines[0]
        bullet = re.match(r"^\s*" + _BULLET.pattern[1:], first)
        prose_level = _indent(first) + (len(bullet.group(0)) - _indent(first) if bullet else 0)
        if len(para_lines) > 1:
            prose_level = min(prose_level, _indent(para_lines[1])) if not bullet else prose_level
        after_label = _is_label(" ".join(out))
        if after_label:
            continue
        item: list[str] = []
        for line in out:
            starts_item = _BULLET.match(line) or _DEFINITION.match(line)
            if starts_item and item:
                kept.append(_clean_inline(" ".join(item)))
                item = []
            item.append(_BULLET.sub("", line))
        kept.append(_clean_inline(" ".join(item)))
    return [p for p in kept if p]


# --------------------------------------------------------------------------------------------
# The built-in corpus: pydoc topics + standard-library docstrings
# --------------------------------------------------------------------------------------------

# Never read: tests, GUI/IDE code, installers, joke modules, generated codec tables.
_SKIP_MODULES = frozenset(
    "test tests idlelib idle_test tkinter turtle turtledemo lib2to3 ensurepip this antigravity "
    "__main__ __phello__ site-packages dist-packages venv pydoc_data distutils encodings "
    "msilib".split()
)
# C modules have no source to parse; these are imported (they have no import side effects).
_C_MODULES = (
    "array atexit binascii builtins cmath errno faulthandler gc itertools marshal math "
    "select sys time unicodedata zlib".split()
)


def _source_modules(stdlib_dir: Path) -> list[tuple[str, Path]]:
    """(dotted name, file) of pure-Python stdlib modules, sorted, without importing them."""
    found: list[tuple[str, Path]] = []

    def walk(folder: Path, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            name = entry.stem if entry.suffix == ".py" else entry.name
            if name in _SKIP_MODULES or name.startswith(("_", ".")) or "-" in name:
                continue
            if entry.is_dir() and (entry / "__init__.py").is_file():
                found.append((prefix + name, entry / "__init__.py"))
                walk(entry, prefix + name + ".")
            elif entry.is_file() and entry.suffix == ".py":
                found.append((prefix + name, entry))

    walk(stdlib_dir, "")
    return found


def _source_docstrings(path: Path) -> list[str]:
    """Docstrings of a module, its classes and functions, in source order (via `ast`)."""
    try:
        with warnings.catch_warnings():  # e.g. SyntaxWarning for old escape sequences (3.12+)
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    docs: list[str] = []

    def visit(node: ast.AST) -> None:
        doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
        if doc:
            docs.append(doc)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child)

    visit(tree)
    return docs


def _c_module_docstrings(name: str) -> list[str]:
    """Docstrings of an allow-listed C module and of its public members, in name order."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            module = __import__(name)
    except ImportError:  # platform-specific modules (e.g. select on some systems)
        return []
    docs = [module.__doc__ or ""]
    for attr in sorted(vars(module)):
        obj = getattr(module, attr)
        if attr.startswith("_") or not callable(obj):
            continue
        # Only what the module itself defines: pytest, IPython and site.py replace or add
        # members (sys.excepthook, builtins.help), which would make the corpus depend on
        # where it is built. sys keeps the originals of its hooks as sys.__excepthook__ etc.
        if getattr(obj, "__module__", "") != name:
            obj = getattr(module, f"__{attr}__", None)
            if getattr(obj, "__module__", "") != name:
                continue
        docs.append(getattr(obj, "__doc__", None) or "")
        if isinstance(obj, type):
            for method in sorted(vars(obj)):
                if not method.startswith("_"):
                    docs.append(getattr(getattr(obj, method), "__doc__", None) or "")
    return [d for d in docs if d]


def _raw_builtin_documents(progress: bool) -> Iterator[tuple[str, list[str]]]:
    """(title, raw texts) for every topic and module, in a fixed order."""
    from pydoc_data.topics import topics

    from tqdm.auto import tqdm

    for key in sorted(topics):
        yield f"topics/{key}", [topics[key]]
    stdlib_dir = Path(os.__file__).resolve().parent
    modules = _source_modules(stdlib_dir)
    for name, path in tqdm(modules, desc="stdlib docstrings", disable=not progress):
        yield f"stdlib/{name}", _source_docstrings(path)
    for name in _C_MODULES:
        yield f"stdlib/{name}", _c_module_docstrings(name)


def build_builtin_documents(
    min_sentences: int = 2, min_characters: int = 200, progress: bool = False
) -> tuple[list[Document], dict[str, Any]]:
    """Extract and clean the built-in corpus (no cache); returns documents and build counts.

    Paragraphs already seen anywhere earlier are dropped as boilerplate (e.g. the same
    "Return self==value." on many classes); documents left with fewer than `min_sentences`
    sentences or `min_characters` characters are dropped and counted.
    """
    counts: dict[str, int] = {}
    seen_paragraphs: set[str] = set()
    documents: list[Document] = []
    small = 0
    for title, raw_texts in _raw_builtin_documents(progress):
        sentences: list[str] = []
        for raw in raw_texts:
            for para in clean_rst(raw, counts):
                key = para.lower()
                if key in seen_paragraphs:
                    counts["duplicate_paragraphs"] = counts.get("duplicate_paragraphs", 0) + 1
                    continue
                seen_paragraphs.add(key)
                for sentence in split_sentences(para):
                    if _is_prose_sentence(sentence):
                        sentences.append(sentence)
                    else:
                        counts["non_prose_sentences"] = counts.get("non_prose_sentences", 0) + 1
        doc = Document(title=title, sentences=sentences)
        if len(sentences) < min_sentences or len(doc.text) < min_characters:
            small += 1
            continue
        documents.append(doc)
    counts["small_documents_dropped"] = small
    return documents, counts


def default_cache_dir() -> Path:
    """$COURSE_LIB_CACHE if set, else ~/.cache/course_lib."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "course_lib"


def load_builtin_corpus(
    cache_dir: str | os.PathLike[str] | None = None,
    validation_fraction: float = 0.05,
    seed: int = 0,
    rebuild: bool = False,
    progress: bool = True,
) -> Corpus:
    """The offline corpus of CPython documentation prose, built once (seconds) then cached.

    The cache file is keyed by Python version and extractor version; `rebuild=True` ignores
    it. Print `corpus.summary()` to compare size and hash with the course's saved outputs.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    py = "{}.{}.{}".format(*sys.version_info[:3])
    path = cache / f"builtin_corpus_v{BUILTIN_CORPUS_VERSION}_py{py}.json"
    payload: dict[str, Any] | None = None
    if path.is_file() and not rebuild:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            payload = None  # a corrupt cache is rebuilt, not trusted
    if payload is None:
        documents, counts = build_builtin_documents(progress=progress)
        payload = {
            "version": BUILTIN_CORPUS_VERSION,
            "python": py,
            "counts": counts,
            "documents": [{"title": d.title, "sentences": d.sentences} for d in documents],
        }
        try:
            cache.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a reader (another process, a DataLoader worker) never
            # sees half a file.
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(payload), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as err:
            warnings.warn(f"Could not cache the built-in corpus in {cache}: {err}", stacklevel=2)
    documents = [Document(d["title"], d["sentences"]) for d in payload["documents"]]
    train, val = split_documents(documents, validation_fraction, seed)
    info = {"source": "builtin", "python": payload["python"], "cache_file": str(path)}
    info.update(payload["counts"])
    return Corpus(train=train, validation=val, name="builtin corpus", build_info=info)


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


def _read_jsonl(path: Path, text_field: str, label: str) -> Iterator[Document]:
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
            yield document_from_text(title, text)


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
    if document_boundary not in ("file", "blank_line"):
        raise ValueError(
            f"document_boundary={document_boundary!r} is unknown; use 'file' or 'blank_line'."
        )
    root = Path(path).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist; pass a .txt/.jsonl file or a folder.")
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".jsonl"))
        if not files:
            raise ValueError(f"No .txt or .jsonl files under {root}.")
    elif root.suffix in (".txt", ".jsonl"):
        files = [root]
    else:
        raise ValueError(f"{root} is a {root.suffix or 'suffix-less'} file; use .txt or .jsonl.")
    documents: list[Document] = []
    empty = 0
    for file in files:
        label = str(file.relative_to(root)) if root.is_dir() else file.name
        if file.suffix == ".jsonl":
            docs = list(_read_jsonl(file, text_field, label))
        elif document_boundary == "file":
            docs = [document_from_text(label, _read_text(file))]
        else:
            blocks = _paragraphs(_read_text(file))
            docs = [document_from_text(f"{label}#{i}", b) for i, b in enumerate(blocks)]
        empty += sum(1 for d in docs if not d.sentences)
        documents.extend(d for d in docs if d.sentences)
    if empty:
        warnings.warn(f"Skipped {empty} empty document(s) in {root}.", stacklevel=2)
    train, val = split_documents(documents, validation_fraction, seed)
    info = {"source": str(root), "files": len(files), "empty_documents_skipped": empty}
    return Corpus(train=train, validation=val, name=root.name, build_info=info)


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
