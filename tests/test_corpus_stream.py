"""A file corpus through `course pretrain` (issue #40): read as a stream with the same documents
and split as `load_text_corpus`, tokenized once into token stores that a second run, --resume,
`course evaluate` and every torchrun process reuse, and Ctrl-C while encoding leaves no half
store. Examples from the stores equal the list builders' on the same documents."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from course_lib.data import build_pretraining_dataset, load_text_corpus
from course_lib.data import token_store as token_store_module
from course_lib.data.corpus import StreamCorpus
from course_lib.tokenization.train import sample_texts
from course_lib.training.cli import main
from course_lib.training.recipes import get_recipe, prepare_run

ANIMALS = "cat dog bird horse fox owl".split()
PLACES = "garden kitchen forest river field barn".split()
VERBS = "sees finds follows likes watches hears".split()

pytestmark = pytest.mark.usefixtures("one_thread")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(
        f"The {rng.choice(ANIMALS)} {rng.choice(VERBS)} the {rng.choice(ANIMALS)} in the "
        f"{rng.choice(PLACES)} {rng.randint(1, 9)} times."
        for _ in range(n)
    )


@pytest.fixture(scope="module")
def jsonl_corpus(tmp_path_factory):
    """60 documents: objects with and without titles, bare strings, one empty document."""
    rng = random.Random(1)
    path = tmp_path_factory.mktemp("stream") / "corpus.jsonl"
    with path.open("w") as f:
        for d in range(60):
            text = _text(rng, rng.randint(2, 14))
            if d == 7:
                f.write(json.dumps({"text": "   "}) + "\n")
            elif d % 3 == 0:
                f.write(json.dumps(text) + "\n")
            else:
                f.write(json.dumps({"title": f"doc {d}", "text": text}) + "\n")
    return path


def _same_documents(stream: StreamCorpus, corpus) -> None:
    for split, docs in (("train", corpus.train), ("validation", corpus.validation)):
        streamed = list(stream.documents(split))
        assert [(d.title, d.sentences) for d in streamed] == [(d.title, d.sentences) for d in docs]


def test_jsonl_stream_has_the_documents_and_split_of_load_text_corpus(jsonl_corpus):
    with pytest.warns(UserWarning, match="Skipped 1 empty"):
        corpus = load_text_corpus(jsonl_corpus)
    with pytest.warns(UserWarning, match="Skipped 1 empty"):
        stream = StreamCorpus(jsonl_corpus).scan()
    assert len(corpus.validation) == 3 and stream.n_documents("validation") == 3
    _same_documents(stream, corpus)


def test_blank_line_txt_and_folders_stream_the_same_documents(tmp_path):
    rng = random.Random(2)
    blocks = [_text(rng, rng.randint(1, 6)).replace(". ", ".\n", 2) for _ in range(45)]
    single = tmp_path / "one.txt"
    single.write_text("\n\n".join(blocks[:20]) + "\n  \n\n" + "\n\n\n".join(blocks[20:]) + "\n")
    corpus = load_text_corpus(single, document_boundary="blank_line")
    _same_documents(StreamCorpus(single, document_boundary="blank_line").scan(), corpus)
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    for i, block in enumerate(blocks[:25]):
        (folder / ("sub" if i % 2 else "") / f"d{i}.txt").write_text(block)
    _same_documents(StreamCorpus(folder).scan(), load_text_corpus(folder))


@pytest.mark.parametrize("max_chars", [None, 50, 997, 3000, 10**9])
def test_tokenizer_sample_is_sample_texts_of_the_train_texts(jsonl_corpus, max_chars):
    with pytest.warns(UserWarning):
        stream = StreamCorpus(jsonl_corpus).scan()
    texts = list(stream.texts("train"))
    sample, n_texts, total = stream.tokenizer_sample(max_chars)
    assert sample == sample_texts(texts, max_chars)
    assert (n_texts, total) == (len(texts), sum(map(len, texts)))


def test_long_passes_show_progress_only_when_asked(jsonl_corpus, capsys, monkeypatch):
    """The scan and the tokenizer's sample read draw character bars (to stderr) with progress=True
    and nothing without; the tokenizers trainer is asked for its own bars too."""
    from tokenizers import trainers

    from course_lib.tokenization import train as train_module

    with pytest.warns(UserWarning):
        StreamCorpus(jsonl_corpus).scan()
    assert capsys.readouterr().err == ""
    with pytest.warns(UserWarning):
        stream = StreamCorpus(jsonl_corpus).scan(progress=True)
    err = capsys.readouterr().err
    assert f"scanning {jsonl_corpus.name}" in err and "char" in err
    total = int(stream.lengths[~stream.is_validation].sum())
    sample, _, _ = stream.tokenizer_sample(total // 3, progress=True)
    err = capsys.readouterr().err
    assert "reading the tokenizer's sample" in err and "100%" in err
    asked = []

    def spy(*args, **kwargs):
        asked.append(kwargs["show_progress"])
        return real(*args, **kwargs)

    real = trainers.BpeTrainer
    monkeypatch.setattr(train_module.trainers, "BpeTrainer", spy)
    train_module.train_tokenizer("bert", sample, 200, progress=True)
    train_module.train_tokenizer("bert", sample, 200)
    assert asked == [True, False]


def test_a_split_skips_the_other_split_unsplit_and_keeps_the_same_documents(tmp_path):
    """`documents(split)` numbers documents by `text.strip()` without splitting the other
    split's: the same documents as filtering `iter_all`, exotic whitespace included."""
    odd = ["\u00a0 \u2028", "\x1c\x1d\x1e\x1f", "\x85\u3000", "a\u00a0b.", " . ", "\t\n\r"]
    path = tmp_path / "odd.jsonl"
    with path.open("w") as f:
        for d in range(80):
            text = odd[d % len(odd)] if d % 4 == 0 else f"Doc {d} says hello. It ends here."
            f.write(json.dumps({"text": text}) + "\n")
    with pytest.warns(UserWarning, match="empty document"):
        stream = StreamCorpus(path).scan()
    every = list(stream.iter_all())
    assert len(every) == len(stream.is_validation) < 80
    for split, want in (("train", False), ("validation", True)):
        expected = [d for d, v in zip(every, stream.is_validation, strict=True) if v == want]
        assert list(stream.documents(split)) == expected


def test_the_scan_is_cached_by_fingerprint(jsonl_corpus, tmp_path, monkeypatch):
    with pytest.warns(UserWarning):
        first = StreamCorpus(jsonl_corpus).scan(tmp_path)
    assert len(list(tmp_path.glob("scan-*.npz"))) == 1
    monkeypatch.setattr(StreamCorpus, "iter_all", lambda *a: pytest.fail("scanned again"))
    with pytest.warns(UserWarning):
        again = StreamCorpus(jsonl_corpus).scan(tmp_path)
    assert np.array_equal(first.is_validation, again.is_validation)
    assert np.array_equal(first.lengths, again.lengths)
    other = tmp_path / "other.jsonl"
    other.write_bytes(jsonl_corpus.read_bytes() + b'"One more document here."\n')
    assert StreamCorpus(other).split_key() != first.split_key()


def test_prepare_run_examples_from_stores_equal_the_list_builders(jsonl_corpus, tmp_path):
    """The examples `course pretrain --corpus FILE` trains on: from token stores, equal to the
    in-memory path's (full-sentences format) on the same documents with the same tokenizer."""
    with pytest.warns(UserWarning):
        stream = StreamCorpus(jsonl_corpus)
        run = prepare_run("bert-tiny", corpus=stream, store_dir=tmp_path)
    assert [s.path.parent for s in run.stores] == [tmp_path, tmp_path]
    with pytest.warns(UserWarning):
        corpus = load_text_corpus(jsonl_corpus)
    max_length = get_recipe("bert-tiny").max_length
    for examples, docs in ((run.train, corpus.train), (run.held_out, corpus.validation)):
        expected = build_pretraining_dataset(docs, run.tokenizer, "mlm", max_length)
        assert len(examples) == len(expected) > 0
        assert list(examples) == expected
    memory = prepare_run("bert-tiny", corpus=corpus)
    assert memory.tokenizer.backend.to_str() == run.tokenizer.backend.to_str()


@pytest.mark.parametrize(("family", "objective"), [("bert", "mlm+nsp"), ("albert", "mlm+sop")])
def test_sentence_pairs_of_a_file_corpus_come_from_its_stores(
    jsonl_corpus, tmp_path, family, objective
):
    """NSP and SOP pairs are drawn from the stores too (no example held as lists), the same
    pairs with the same labels as the list builders draw on the same documents."""
    from course_lib.data.token_store import StorePairs

    with pytest.warns(UserWarning):
        run = prepare_run(
            "tiny", family, objective, StreamCorpus(jsonl_corpus), seed=3, store_dir=tmp_path
        )
        corpus = load_text_corpus(jsonl_corpus)
    assert len(run.stores) == 2
    max_length = get_recipe("tiny", family).max_length
    for examples, docs in ((run.train, corpus.train), (run.held_out, corpus.validation)):
        assert isinstance(examples, StorePairs)
        expected = build_pretraining_dataset(docs, run.tokenizer, objective, max_length, seed=3)
        assert len(examples) == len(expected) > 0
        assert list(examples) == expected


# ----- through the command line ---------------------------------------------------------------


def _pretrain(capsys, corpus, out, *extra):
    argv = ["pretrain", "--preset", "bert-tiny", "--corpus", str(corpus), "--output-dir", str(out)]
    argv += ["--batch-size", "4", "--precision", "fp32", "--no-progress", "--samples", "0"]
    code = main(argv + list(extra))
    return code, *capsys.readouterr()


def _no_build(*args, **kwargs):
    pytest.fail("the token store was encoded again instead of reused")


def test_pretrain_prints_the_store_and_every_later_use_reuses_it(
    capsys, tmp_path, jsonl_corpus, monkeypatch
):
    code, out, err = _pretrain(capsys, jsonl_corpus, tmp_path / "a", "--steps", "2")
    assert code == 0, err
    assert "training a 8000-entry wordpiece tokenizer on corpus" in out
    store_dir = tmp_path / "a" / "token-store"
    lines = [line for line in out.splitlines() if line.startswith("token store")]
    assert len(lines) == 2 and all(
        str(store_dir) in line and " MB on disk" in line for line in lines
    )
    assert sorted(p.name.split("-")[0] for p in store_dir.iterdir() if p.is_dir()) == [
        "train",
        "validation",
    ]
    assert len(list(store_dir.glob("tokenizer-*.json"))) == 1  # the next run loads it
    monkeypatch.setattr(token_store_module, "build_store", _no_build)
    # --resume, course evaluate, and a second run sharing the stores with --store-dir
    code, out, err = _pretrain(capsys, jsonl_corpus, tmp_path / "a", "--steps", "3", "--resume")
    assert code == 0, err
    assert "after 3 steps" in out
    code = main(["evaluate", str(tmp_path / "a" / "checkpoint"), "--samples", "0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "held-out examples" in out
    code, out, err = _pretrain(
        capsys, jsonl_corpus, tmp_path / "b", "--steps", "1", "--store-dir", str(store_dir)
    )
    assert code == 0, err
    assert not (tmp_path / "b" / "token-store").exists()
    # the tokenizer is read, and said to be: no "training a ... tokenizer" line
    assert "training a" not in out and "trained by an earlier run: " in out
    assert str(next(store_dir.glob("tokenizer-*.json"))) in out


def test_sop_pretraining_and_its_evaluation_read_the_stores(
    capsys, tmp_path, jsonl_corpus, monkeypatch
):
    """ALBERT's mlm+sop on a file corpus: trained from the stores, evaluated from the same ones
    (nothing encoded again), the SOP accuracy reported."""
    argv = ["pretrain", "--family", "albert", "--preset", "tiny", "--objective", "mlm+sop"]
    argv += ["--corpus", str(jsonl_corpus), "--output-dir", str(tmp_path / "run"), "--steps", "2"]
    argv += ["--batch-size", "4", "--precision", "fp32", "--no-progress", "--samples", "0"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.count("token store (") == 2
    monkeypatch.setattr(token_store_module, "build_store", _no_build)
    code = main(["evaluate", str(tmp_path / "run" / "checkpoint"), "--samples", "0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "held-out examples" in out and "sop" in out.lower()


def test_ctrl_c_while_encoding_leaves_no_half_store(capsys, tmp_path, jsonl_corpus, monkeypatch):
    from course_lib.tokenization.tokenizer import CourseTokenizer

    monkeypatch.setattr(token_store_module, "BATCH_CHARS", 500)  # several batches
    real, calls = CourseTokenizer.encode_pieces, []

    def interrupted(self, texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, texts)

    monkeypatch.setattr(CourseTokenizer, "encode_pieces", interrupted)
    code, out, err = _pretrain(capsys, jsonl_corpus, tmp_path / "run", "--steps", "1")
    assert code == 130 and "interrupted" in err
    store_dir = tmp_path / "run" / "token-store"
    # stopped before its first checkpoint: no half store, and no folder left behind at all
    assert not (tmp_path / "run").exists(), "the interrupted first run left its folder"
    monkeypatch.setattr(CourseTokenizer, "encode_pieces", real)
    code, out, err = _pretrain(capsys, jsonl_corpus, tmp_path / "run", "--steps", "1")
    assert code == 0, err
    assert len([p for p in store_dir.iterdir() if p.is_dir()]) == 2
