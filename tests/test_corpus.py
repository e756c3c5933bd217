"""Corpora: the built-in offline corpus, cleaning, splitting, caching, local files, datasets."""

import json
import sys
import types

import pytest

from course_lib.data import builtin_corpus
from course_lib.data.builtin_corpus import CACHE_ENV_VAR, default_cache_dir, load_builtin_corpus
from course_lib.data.corpus import (
    Corpus,
    Document,
    load_hf_dataset,
    load_text_corpus,
    split_documents,
    split_sentences,
)
from course_lib.data.rst_prose import clean_rst

SIDE_EFFECT_MODULES = ("antigravity", "this", "idlelib", "tkinter", "turtle", "ensurepip")


@pytest.fixture(scope="module")
def builtin(tmp_path_factory):
    """Build the real corpus once (a few seconds), into a throwaway cache folder."""
    before = {m for m in SIDE_EFFECT_MODULES if m in sys.modules}
    cache = tmp_path_factory.mktemp("cache")
    corpus = load_builtin_corpus(cache_dir=cache, progress=False)
    imported = {m for m in SIDE_EFFECT_MODULES if m in sys.modules} - before
    return corpus, cache, imported


def test_builtin_corpus_size_and_content(builtin):
    corpus, _, _ = builtin
    stats = corpus.stats()
    # CPython 3.10-3.13 give ~300-450 documents and ~150-250K words after cleaning.
    assert 200 < stats["documents"] < 600
    assert 100_000 < stats["words"] < 400_000
    assert stats["characters"] > 5 * stats["words"]
    assert stats["documents"] == len(corpus.train) + len(corpus.validation)
    titles = [d.title for d in corpus.documents]
    assert len(set(titles)) == len(titles)
    assert any(t.startswith("topics/") for t in titles) and "stdlib/json" in titles
    sentences = list(corpus.sentences("all"))
    assert len(sentences) == stats["sentences"]
    # Cleaning removed code, grammar, tables and reST markup.
    for marker in (">>>", "::=", ":func:", ":class:", "``", "+---", "-[ Footnotes ]-"):
        assert not any(marker in s for s in sentences), marker
    assert all(len(s.split()) >= 3 for s in sentences)
    assert len(set(sentences)) > 0.95 * len(sentences)  # boilerplate deduplicated


def test_builtin_corpus_import_is_safe(builtin):
    _, _, imported = builtin
    assert imported == set()  # no joke, GUI or installer module was imported


def test_builtin_corpus_split_is_deterministic_and_by_document(builtin):
    corpus, cache, _ = builtin
    assert len(corpus.validation) == round(0.05 * len(corpus.documents))
    train_titles = {d.title for d in corpus.train}
    assert not train_titles & {d.title for d in corpus.validation}
    again = load_builtin_corpus(cache_dir=cache, progress=False)
    assert [d.title for d in again.validation] == [d.title for d in corpus.validation]
    other = load_builtin_corpus(cache_dir=cache, seed=1, progress=False)
    assert {d.title for d in other.validation} != {d.title for d in corpus.validation}
    assert other.content_hash == corpus.content_hash  # the hash ignores the split
    assert len(corpus.content_hash) == 12
    assert corpus.content_hash in corpus.summary()


def test_builtin_corpus_is_read_from_the_cache(builtin, tmp_path, monkeypatch):
    corpus, cache, _ = builtin
    (cached,) = cache.glob("builtin_corpus_v*_py*.json")
    assert corpus.build_info["cache_file"] == str(cached)
    # A planted cache file is what gets loaded: proof that no rebuild happens.
    fake = {
        "version": 1,
        "python": "x",
        "counts": {},
        "documents": [
            {"title": f"t{i}", "sentences": ["One two three.", "Four five six."]} for i in range(20)
        ],
    }
    (tmp_path / cached.name).write_text(json.dumps(fake))
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    assert default_cache_dir() == tmp_path
    planted = load_builtin_corpus(progress=False)
    assert planted.stats()["documents"] == 20 and planted.stats()["words"] == 120


def test_content_hash_tracks_the_text():
    docs = [Document("a", ["One sentence here.", "Two."]), Document("b", ["Three more words."])]
    h = Corpus(docs, []).content_hash
    assert Corpus(list(reversed(docs)), []).content_hash == h
    changed = [Document("a", ["One sentence here!", "Two."]), docs[1]]
    assert Corpus(changed, []).content_hash != h


def test_split_sentences_handles_abbreviations():
    text = (
        "Use a list, e.g. a Python list. It works! Does it? Yes: see Dr. Smith and "
        "J. Doe (i.e. both). The end."
    )
    assert split_sentences(text) == [
        "Use a list, e.g. a Python list.",
        "It works!",
        "Does it?",
        "Yes: see Dr. Smith and J. Doe (i.e. both).",
        "The end.",
    ]
    assert split_sentences('He said "Stop." Then left.') == ['He said "Stop."', "Then left."]
    assert split_sentences("  \n ") == []


def test_clean_rst_keeps_prose_and_drops_code():
    text = """Title
*****

The :func:`len` function returns ``n``, the *size* of an object (**PEP 8**).
It is fast:

   x = len(items)
   print(x)

Note:

  Notes are prose, even when indented.

>>> len([1, 2])
2

+-----+-----+
| a   | b   |
+-----+-----+

* First item of a list.
* Second item.
"""
    counts = {}
    paragraphs = clean_rst(text, counts)
    assert paragraphs == [
        "The len function returns n, the size of an object (PEP 8). It is fast:",
        "Notes are prose, even when indented.",
        "First item of a list.",
        "Second item.",
    ]
    assert counts["literal_blocks"] == 1 and counts["headings"] == 1


def test_split_documents_errors_and_stability():
    docs = [Document(f"d{i}", [f"Sentence {i}."]) for i in range(40)]
    train, val = split_documents(docs, 0.1, seed=0)
    assert len(val) == 4 and len(train) == 36
    more_train, more_val = split_documents([*docs, Document("new", ["New one."])], 0.1, seed=0)
    # Adding a document moves at most one old document between splits.
    assert len({d.title for d in val} ^ {d.title for d in more_val} - {"new"}) <= 1
    assert split_documents(docs, 0.0, seed=0) == (docs, [])
    with pytest.raises(ValueError, match="corpus is empty"):
        split_documents([], 0.05, seed=0)
    with pytest.raises(
        ValueError, match="too few for validation_fraction=0.05.*validation_fraction=0"
    ):
        split_documents(docs[:1], 0.05, seed=0)
    with pytest.raises(ValueError, match=r"must be in \[0, 1\)"):
        split_documents(docs, 1.0, seed=0)


def test_load_text_corpus_folder_of_txt_and_jsonl(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("First doc. It has two sentences.\n\nAnd a paragraph.")
    (tmp_path / "sub" / "b.txt").write_text("Second doc here.")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"text": "From JSON. Two sentences.", "title": "json-doc"})
        + "\n\n"
        + json.dumps("A bare string document.")
        + "\n"
    )
    (tmp_path / "ignored.csv").write_text("x,y")
    corpus = load_text_corpus(tmp_path, validation_fraction=0.0)
    by_title = {d.title: d.sentences for d in corpus.train}
    assert by_title == {
        "a.txt": ["First doc.", "It has two sentences.", "And a paragraph."],
        "sub/b.txt": ["Second doc here."],
        "json-doc": ["From JSON.", "Two sentences."],
        "c.jsonl:3": ["A bare string document."],
    }
    blocks = load_text_corpus(
        tmp_path / "a.txt", validation_fraction=0.0, document_boundary="blank_line"
    )
    assert [d.sentences for d in blocks.train] == [
        ["First doc.", "It has two sentences."],
        ["And a paragraph."],
    ]


def test_load_text_corpus_errors_name_the_problem(tmp_path):
    (tmp_path / "bad.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1 has no 'text' field \(found \['body'\]\)"):
        load_text_corpus(tmp_path / "bad.jsonl")
    assert load_text_corpus(tmp_path / "bad.jsonl", validation_fraction=0, text_field="body").train[
        0
    ].sentences == ["x"]
    with pytest.raises(FileNotFoundError):
        load_text_corpus(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No .txt or .jsonl files"):
        load_text_corpus(tmp_path / "empty")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(ValueError, match="use .txt or .jsonl"):
        load_text_corpus(tmp_path / "x.csv")
    (tmp_path / "blank.txt").write_text("   \n")
    with (
        pytest.warns(UserWarning, match="Skipped 1 empty"),
        pytest.raises(ValueError, match="empty"),
    ):
        load_text_corpus(tmp_path / "blank.txt")
    with pytest.raises(ValueError, match="document_boundary='line' is unknown"):
        load_text_corpus(tmp_path, document_boundary="line")


def test_load_hf_dataset_without_datasets_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ImportError, match="pip install datasets"):
        load_hf_dataset("wikitext", "wikitext-2-raw-v1")


def test_load_hf_dataset_groups_wikitext_lines_into_articles(monkeypatch):
    rows = {
        "train": [
            "",
            " = Alpha = \n",
            "",
            " Alpha is a letter . It comes first . \n",
            " = = Usage = = \n",
            " Used in 1 @,@ 000 @-@ odd words . \n",
            " = Beta = \n",
            " Beta is second . \n",
        ],
        "validation": [" = Gamma = \n", " Gamma is third . Really . \n"],
    }

    class FakeData:
        def __init__(self, lines):
            self.column_names = ["text"]
            self.lines = lines

        def __getitem__(self, key):
            return self.lines

    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda name, config, split: FakeData(rows[split])
    monkeypatch.setitem(sys.modules, "datasets", fake)
    corpus = load_hf_dataset("wikitext", "wikitext-2-raw-v1")
    assert [d.title for d in corpus.train] == ["Alpha", "Beta"]
    assert corpus.train[0].sentences == [
        "Alpha is a letter .",
        "It comes first .",
        "Used in 1,000-odd words .",
    ]
    assert [d.title for d in corpus.validation] == ["Gamma"]
    with pytest.raises(ValueError, match="no column 'content'"):
        load_hf_dataset("wikitext", text_field="content")


def test_c_module_docstrings_ignore_members_replaced_by_tools(monkeypatch):
    # pytest and Jupyter replace sys.excepthook & co.; the corpus must not depend on that.
    before = builtin_corpus._c_module_docstrings("sys")

    def hook(*args):
        """A hook some tool installed, with a docstring that is not CPython's."""

    monkeypatch.setattr(sys, "excepthook", hook)
    assert builtin_corpus._c_module_docstrings("sys") == before
    assert any(d.startswith("Handle an exception by displaying it") for d in before)


def test_a_file_that_is_not_utf8_says_to_save_it_as_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Un caf\u00e9 noir. Deux caf\u00e9s.".encode("latin-1"))
    with pytest.raises(
        ValueError, match=r"not UTF-8 text \(byte 0xe9 at byte 6\); save the file as UTF-8"
    ):
        load_text_corpus(path)


def test_too_few_documents_and_a_missing_text_field_carry_their_details(tmp_path):
    from course_lib.data.corpus import MissingTextField, TooFewDocuments

    (tmp_path / "one.txt").write_text("Only one document here. It has two sentences.")
    with pytest.raises(TooFewDocuments) as err:
        load_text_corpus(tmp_path / "one.txt")
    assert err.value.documents == 1 and "validation_fraction=0" in str(err.value)
    (tmp_path / "rows.jsonl").write_text('{"body": "a b c"}\n')
    with pytest.raises(MissingTextField) as err:
        load_text_corpus(tmp_path / "rows.jsonl")
    assert err.value.location.endswith("rows.jsonl:1") and err.value.found == ["body"]
