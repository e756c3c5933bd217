"""The token store: a corpus encoded once into memory-mapped arrays, examples built from it equal
to the list builders' (pairs.py), written atomically, reused, rebuilt when stale."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from course_lib.data import (
    Document,
    build_pretraining_dataset,
    load_builtin_corpus,
    make_format_examples,
    make_mlm_examples,
    pairs,
    tokenize_documents,
)
from course_lib.data import token_store as ts
from course_lib.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def builtin():
    corpus = load_builtin_corpus()
    return corpus, train_tokenizer("bert", corpus.texts("train"), 8000)


@pytest.fixture(scope="module")
def builtin_store(builtin, tmp_path_factory):
    corpus, tok = builtin
    return ts.open_or_build(tmp_path_factory.mktemp("stores"), corpus.train, tok)


def test_the_store_holds_the_documents_as_tokenize_documents_gives_them(builtin, builtin_store):
    corpus, tok = builtin
    docs, empty = tokenize_documents(corpus.train, tok)
    assert builtin_store.n_documents == len(docs)
    assert [builtin_store.document(d) for d in range(len(docs))] == docs
    assert builtin_store.meta["empty_sentences"] == empty
    assert builtin_store.ids.dtype == np.uint16 and isinstance(builtin_store.ids, np.memmap)
    tokens = sum(len(ids) for doc in docs for ids, _ in doc)
    assert builtin_store.n_tokens == tokens + len(docs) - 1  # a separator between documents


@pytest.mark.parametrize("max_length", [32, 128])
def test_mlm_blocks_equal_make_mlm_examples_on_the_builtin_corpus(
    builtin, builtin_store, max_length
):
    corpus, tok = builtin
    expected = make_mlm_examples(corpus.train, tok, max_length)
    got = ts.mlm_blocks(builtin_store, tok, max_length)
    assert len(got) == len(expected) > 1000
    assert list(got) == list(expected)
    assert got.counts == expected.counts


@pytest.mark.parametrize("max_length", [32, 128])
def test_packed_sentences_equal_the_default_mlm_examples_on_the_builtin_corpus(
    builtin, builtin_store, max_length
):
    """`objective="mlm"` (the default recipe's) packs full sentences across documents."""
    corpus, tok = builtin
    expected = build_pretraining_dataset(corpus.train, tok, "mlm", max_length, seed=0)
    got = ts.packed_sentences(builtin_store, tok, max_length)
    assert len(got) == len(expected) > 1000
    assert list(got) == list(expected)
    assert got.counts == expected.counts
    assert got[-1] == expected[-1] and got[3:5] == expected[3:5]
    doc = make_format_examples(corpus.train, tok, max_length, "doc-sentences")
    assert list(ts.packed_sentences(builtin_store, tok, max_length, False)) == list(doc)


# Every objective and format `build_pretraining_dataset` builds, from the store: pairs (NSP's
# segment-pair and sentence-pair, SOP, a pair format read by MLM alone), packed and blocks.
OBJECTIVE_FORMATS = [
    ("mlm+nsp", None, 32, 0),
    ("mlm+nsp", "sentence-pair", 32, 3),
    ("mlm+sop", None, 32, 1),
    ("mlm+sop", None, 128, 0),
    ("mlm+nsp", None, 128, 2),
    ("mlm", "segment-pair", 32, 0),
    ("rtd", "doc-sentences", 32, 0),
    ("mlm", "blocks", 128, 0),
]


@pytest.mark.parametrize(("objective", "format", "max_length", "seed"), OBJECTIVE_FORMATS)
def test_every_objective_from_the_store_equals_build_pretraining_dataset_on_the_builtin_corpus(
    builtin, builtin_store, objective, format, max_length, seed
):
    """Pair labels, formats, truncation, counts: example for example, in the same order."""
    corpus, tok = builtin
    expected = build_pretraining_dataset(corpus.train, tok, objective, max_length, seed, format)
    got = ts.pretraining_examples(builtin_store, tok, objective, max_length, seed, format)
    assert len(got) == len(expected) > 1000
    assert got[0] == expected[0] and got[-1] == expected[-1]
    assert list(got) == list(expected)
    assert got.counts == expected.counts and got.skipped == getattr(expected, "skipped", 0)
    label = {"mlm+nsp": "next_sentence_label", "mlm+sop": "sentence_order_label"}.get(objective)
    if label is not None:  # both classes, about half each (BERT's and ALBERT's 50%)
        share = sum(e[label] for e in got) / len(got)
        assert 0.4 < share < 0.6, share
    else:
        assert not any("next_sentence_label" in e for e in got[:100])


def test_store_pairs_keep_56_bytes_an_example_not_the_tokens(builtin, builtin_store):
    corpus, tok = builtin
    pairs = ts.pretraining_examples(builtin_store, tok, "mlm+nsp", 128)
    assert isinstance(pairs, ts.StorePairs)
    assert pairs.spans.nbytes == 56 * len(pairs)
    assert pairs.spans.dtype == np.int64 and pairs.spans.shape == (len(pairs), 7)


MASKINGS = {
    "whole-word": {"whole_word": True},
    "3-gram": {"whole_word": True, "max_ngram": 3},
    "30%-all-mask": {"mlm_probability": 0.3, "mask_replace_prob": 1.0, "random_replace_prob": 0.0},
}


@pytest.mark.parametrize("objective", ["mlm+sop", "mlm"])
def test_masking_rates_are_the_same_from_both_paths(builtin, builtin_store, objective):
    """The collator masks store examples exactly as list examples: the same batches, the same
    share of masked tokens (whole words and n-grams read the word ids the store renumbers)."""
    from course_lib.data import PretrainingCollator
    from course_lib.objectives import MaskingConfig

    corpus, tok = builtin
    expected = build_pretraining_dataset(corpus.train, tok, objective, 64, seed=0)
    got = ts.pretraining_examples(builtin_store, tok, objective, 64, seed=0)
    for name, masking in MASKINGS.items():
        config = MaskingConfig(**masking)
        ours = PretrainingCollator(tok, config, seed=5)
        theirs = PretrainingCollator(tok, config, seed=5)
        selected = tokens = 0
        for start in range(0, 512, 64):
            a, b = ours(got[start : start + 64]), theirs(expected[start : start + 64])
            assert a.keys() == b.keys()
            for key in a:
                assert torch.equal(a[key], b[key]), (name, key)
            selected += int((b["labels"] != -100).sum())
            tokens += int(b["attention_mask"].sum())  # specials included: a share a bit low
        assert abs(selected / tokens - config.mlm_probability) < 0.05, (name, selected / tokens)


def _awkward_documents() -> list[Document]:
    """Empty documents and sentences, a sentence longer than a block, one-sentence documents."""
    long = " ".join(f"word{i}" for i in range(90))
    return [
        Document("a", ["The cat sleeps.", "It dreams of fish."]),
        Document("empty", []),
        Document("blank", ["\x00\x01"]),  # a sentence that tokenizes to nothing
        Document("long", ["Short one.", long, "After the long one."]),
        Document("b", ["Dogs bark at night in the garden."]),
        Document("c", ["Birds sing.", "\x00", "Fish swim in the river every day."]),
    ]


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
@pytest.mark.parametrize("max_length", [8, 16])
def test_awkward_documents_give_the_same_examples(tmp_path, family, max_length):
    docs = _awkward_documents()
    tok = train_tokenizer(family, [" ".join(d.sentences) for d in docs] * 3, 300)
    store = ts.open_or_build(tmp_path, docs, tok)
    assert list(ts.mlm_blocks(store, tok, max_length)) == list(
        make_mlm_examples(docs, tok, max_length)
    )
    for fmt, cross in (("full-sentences", True), ("doc-sentences", False)):
        expected = make_format_examples(docs, tok, max_length, fmt)
        got = ts.packed_sentences(store, tok, max_length, cross)
        assert list(got) == list(expected), fmt
        assert got.counts == expected.counts and got.counts["split_sentences"] >= 1
    for objective, fmt in (("mlm+nsp", None), ("mlm+nsp", "sentence-pair"), ("mlm+sop", None)):
        for seed, truncation in ((0, "junction"), (1, "random")):
            with pytest.warns(UserWarning, match="skipped 3 document"):  # < 2 sentences
                expected = build_pretraining_dataset(docs, tok, objective, max_length, seed, fmt)
            with pytest.warns(UserWarning, match="skipped 3 document"):
                got = ts.pretraining_examples(store, tok, objective, max_length, seed, fmt)
            assert list(got) == list(expected), (objective, fmt, seed)
            assert got.counts == expected.counts and got.skipped == expected.skipped == 3
            task = "SOP" if objective == "mlm+sop" else "NSP" if fmt is None else fmt
            ours = ts.sentence_pairs(store, tok, task, max_length, seed, 0.5, truncation)
            theirs = (
                (pairs.make_sop_examples if task == "SOP" else pairs.make_nsp_examples)(
                    docs, tok, max_length, seed, 0.5, truncation
                )
                if task != "sentence-pair"
                else (
                    pairs.make_format_examples(docs, tok, max_length, task, seed, 0.5, truncation)
                )
            )
            assert list(ours) == list(theirs) and ours.counts == theirs.counts


def test_a_second_open_reuses_the_store_and_another_tokenizer_gets_its_own(tmp_path, monkeypatch):
    docs = _awkward_documents()
    tok = train_tokenizer("bert", [" ".join(d.sentences) for d in docs], 200)
    first = ts.open_or_build(tmp_path, docs, tok)
    monkeypatch.setattr(ts, "build_store", lambda *a, **k: pytest.fail("encoded twice"))
    again = ts.open_or_build(tmp_path, docs, tok)
    assert again.path == first.path and again.meta == first.meta
    monkeypatch.undo()
    other = train_tokenizer("bert", [" ".join(d.sentences) for d in docs], 150)
    assert ts.open_or_build(tmp_path, docs, other).path != first.path
    assert ts.open_or_build(tmp_path, docs[:3], tok).path != first.path
    assert len(list(tmp_path.iterdir())) == 3


@pytest.mark.parametrize("damage", ["fingerprint", "truncated", "no-meta"])
def test_a_stale_or_damaged_store_is_rebuilt(tmp_path, damage):
    docs = _awkward_documents()
    tok = train_tokenizer("bert", [" ".join(d.sentences) for d in docs], 200)
    store = ts.open_or_build(tmp_path, docs, tok)
    expected = list(ts.mlm_blocks(store, tok, 16))
    meta = store.path / "meta.json"
    if damage == "fingerprint":
        info = json.loads(meta.read_text())
        meta.write_text(json.dumps({**info, "tokenizer": "0" * 64}))
    elif damage == "truncated":
        data = (store.path / "ids.bin").read_bytes()
        (store.path / "ids.bin").write_bytes(data[:-2])
    else:
        meta.unlink()
    lines: list[str] = []
    rebuilt = ts.open_or_build(tmp_path, docs, tok, log=lines.append)
    assert rebuilt.path == store.path and "rebuilding" in lines[0]
    assert list(ts.mlm_blocks(rebuilt, tok, 16)) == expected


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError])
def test_an_interrupted_encoding_leaves_no_half_store(tmp_path, monkeypatch, interrupt):
    docs = _awkward_documents() * 20
    tok = train_tokenizer("bert", [" ".join(d.sentences) for d in docs], 200)
    monkeypatch.setattr(ts, "BATCH_CHARS", 50)  # many batches
    calls = {"n": 0}
    real = tok.encode_pieces

    def failing(texts):
        calls["n"] += 1
        if calls["n"] == 3:
            raise interrupt("stopped")
        return real(texts)

    monkeypatch.setattr(tok, "encode_pieces", failing)
    with pytest.raises(interrupt):
        ts.open_or_build(tmp_path, docs, tok)
    assert list(tmp_path.iterdir()) == []  # neither the store nor its temporary folder
    monkeypatch.setattr(tok, "encode_pieces", real)
    store = ts.open_or_build(tmp_path, docs, tok)
    assert list(ts.mlm_blocks(store, tok, 16)) == list(make_mlm_examples(docs, tok, 16))


def test_ids_take_two_bytes_until_the_vocabulary_needs_four():
    assert ts.id_dtype(8000) == np.uint16 and ts.id_dtype(65536) == np.uint16
    assert ts.id_dtype(65537) == np.uint32


def test_an_incomplete_store_is_refused_in_one_line(tmp_path):
    (tmp_path / "s").mkdir()
    with pytest.raises(ValueError, match="token store .* is incomplete or damaged"):
        ts.TokenStore.open(tmp_path / "s")


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_a_saved_and_loaded_tokenizer_finds_the_store_of_the_trained_one(tmp_path, family):
    """`course evaluate` opens the store with the checkpoint's copy of the tokenizer: its
    fingerprint must be the trained one's (a trained Unigram serializes differently)."""
    from course_lib.tokenization import CourseTokenizer

    docs = _awkward_documents()
    tok = train_tokenizer(family, [" ".join(d.sentences) for d in docs] * 3, 300)
    tok.save(tmp_path / "tokenizer.json")
    loaded = CourseTokenizer.load(tmp_path / "tokenizer.json", tok.family)
    assert ts.tokenizer_fingerprint(loaded) == ts.tokenizer_fingerprint(tok)
    first = ts.open_or_build(tmp_path / "stores", docs, tok)
    assert ts.open_or_build(tmp_path / "stores", docs, loaded).path == first.path
    assert len(list((tmp_path / "stores").iterdir())) == 1
