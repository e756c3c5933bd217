"""The built-in corpus: pydoc topics and standard-library docstrings, cleaned, then cached.

It needs no download: it is English prose that ships with every CPython, the language reference
topics behind `help()` (`pydoc_data.topics`) and the docstrings of the standard library. Source
docstrings are read by parsing files with `ast`, so no module code runs; only a fixed allow-list
of C modules (which have no source) is imported. The result is cached as JSON, keyed by Python
version and extractor version.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from course_lib.data.corpus import Corpus, Document, split_documents, split_sentences
from course_lib.data.rst_prose import clean_rst, is_prose_sentence

# Bump when the extraction or cleaning changes, so stale caches are rebuilt, not reused.
BUILTIN_CORPUS_VERSION = 2
CACHE_ENV_VAR = "COURSE_LIB_CACHE"


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
                    if is_prose_sentence(sentence):
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


__all__ = [
    "BUILTIN_CORPUS_VERSION",
    "CACHE_ENV_VAR",
    "build_builtin_documents",
    "default_cache_dir",
    "load_builtin_corpus",
]
