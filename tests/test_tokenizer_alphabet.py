"""Any real text trains a tokenizer: the alphabet cap, the bounded sample, `--vocab-size`, and
error messages that only name flags that exist."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from course_lib.data import load_builtin_corpus
from course_lib.tokenization import SPECIALS, canonical_family, train_tokenizer
from course_lib.tokenization.train import (
    DEFAULT_LIMIT_ALPHABET,
    MAX_TRAINING_CHARS,
    _empty_tokenizer,
    _words,
    alphabet_limit,
    min_vocab_size,
    sample_texts,
)
from course_lib.training.checkpoint import read_state
from course_lib.training.cli import build_parser, main

pytestmark = pytest.mark.usefixtures("one_thread")

SRC = Path(__file__).resolve().parents[1] / "src" / "course_lib"
# 300 distinct CJK characters, the i-th seen about 300/(i+1) times (a Zipf law, as in real text):
# more distinct characters than a 200-entry vocabulary has room for.
CJK = [chr(0x4E00 + i) for i in range(300)]
WORDS = "the cat sees a dog in the garden every morning and then it sleeps".split()


def rich_texts(n_docs: int = 24) -> list[str]:
    """Documents mixing English words with 300 distinct CJK characters, Zipf-distributed."""
    stream = [c for i, c in enumerate(CJK) for _ in range(max(1, 300 // (i + 1)))]
    docs = []
    for d in range(n_docs):
        mine = stream[d::n_docs] or CJK[:1]
        sentences = [
            f"{' '.join(WORDS[(d + k + j) % len(WORDS)] for j in range(6))} {''.join(mine[k::5])}。"
            for k in range(5)
        ]
        docs.append(" ".join(sentences))
    return docs


def test_the_rich_corpus_has_more_distinct_characters_than_the_vocabulary():
    assert len(set("".join(rich_texts())) & set(CJK)) == 300


@pytest.mark.parametrize("family", ["wordpiece", "unigram"])
def test_more_characters_than_entries_trains_and_the_rarest_become_unknown(family):
    lines: list[str] = []
    tok = train_tokenizer(family, rich_texts(), vocab_size=200, log=lines.append)
    assert tok.vocab_size <= 200
    assert len(lines) == 1 and "alphabet capped at the 97 most frequent" in lines[0]
    unk = tok.unk_token_id
    rare, frequent = CJK[-1], CJK[0]  # seen once; seen 300 times
    ids = tok.encode(f"the cat {rare}", add_special_tokens=False)["input_ids"]
    assert unk in ids and ids.count(unk) == 1
    ids = tok.encode(f"the cat {frequent}", add_special_tokens=False)["input_ids"]
    assert unk not in ids
    # Without the cap the old refusal stands (it is what the cap is for).
    with pytest.raises(ValueError, match="too small|Unigram training failed"):
        train_tokenizer(family, rich_texts(), vocab_size=200, limit_alphabet=None)


def test_byte_level_bpe_needs_no_cap_every_character_round_trips():
    tok = train_tokenizer("bpe", rich_texts(), vocab_size=300)
    assert tok.vocab_size <= 300 and alphabet_limit("bpe", 300) == 0
    text = f"the cat {CJK[-1]}{CJK[0]}"
    ids = tok.encode(text, add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids and tok.decode(ids) == text


def test_the_cap_is_half_of_what_the_specials_leave_at_most_bert_s_1000():
    assert alphabet_limit("bert", 200) == 97
    assert alphabet_limit("bert", 8000) == DEFAULT_LIMIT_ALPHABET == 1000
    assert alphabet_limit("albert", 6) == 1  # never 0: one character at least
    assert min_vocab_size("bert") == 6 and min_vocab_size("roberta") == 261
    with pytest.raises(ValueError, match="limit_alphabet=0 must be"):
        train_tokenizer("bert", rich_texts(), vocab_size=200, limit_alphabet=0)
    lines: list[str] = []
    tok = train_tokenizer("bert", rich_texts(), 200, limit_alphabet=20, log=lines.append)
    assert "capped at the 20 most frequent" in lines[0] and tok.vocab_size <= 200


def _alphabet(family: str, texts: list[str]) -> int:
    """How many single-character entries `family`'s trainer would start from on `texts`."""
    from tokenizers import models

    tok = _empty_tokenizer(family, models.Unigram(), lowercase=True)
    words = _words(tok, texts)
    if family == "wordpiece":
        initial = {w[0] for d in words for w in d}
        return len(initial | {"##" + c for d in words for w in d for c in w[1:]})
    return len({c for d in words for w in d for c in w})


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_the_builtin_corpus_tokenizer_is_unchanged_by_the_cap_and_the_sample(family, tmp_path):
    """The default recipe's tokenizer (8000 entries, built-in corpus) is byte for byte the one
    the trainer gave before the cap and the sample existed, so its accuracy cannot move."""
    texts = list(load_builtin_corpus().texts("train"))
    assert sum(map(len, texts)) < MAX_TRAINING_CHARS  # read whole
    fam = canonical_family(family)
    if fam != "bpe":  # ~110 WordPiece symbols, ~75 Unigram characters: far under the cap
        assert _alphabet(fam, texts) <= alphabet_limit(fam, 8000)
        assert _alphabet(fam, texts) <= alphabet_limit(fam, 223)  # and at any vocab >= 223
    capped = train_tokenizer(family, texts, 8000)
    uncapped = train_tokenizer(family, texts, 8000, limit_alphabet=None, max_chars=None)
    assert capped.vocab_size == uncapped.vocab_size
    pair = (capped, uncapped)
    saved = [json.loads(t.save(tmp_path / f"{n}.json").read_text()) for n, t in enumerate(pair)]
    if fam == "unigram":  # the trainer's EM scores differ in the 5th decimal run to run (train.py)
        for one in saved:
            one["model"]["vocab"] = [piece for piece, _ in one["model"]["vocab"]]
    assert saved[0] == saved[1]
    if fam == "unigram":
        # Same pieces in the same order; segmentations are left out, as those scores can tip a
        # Viterbi tie: two runs of the *uncapped* trainer disagree on ~1 text in 40 already.
        return
    sample = texts[::8]
    assert [capped.encode(t)["input_ids"] for t in sample] == [
        uncapped.encode(t)["input_ids"] for t in sample
    ]


def test_a_large_corpus_trains_on_a_bounded_seeded_sample_in_corpus_order():
    texts = [f"document {i} " + "word " * (i % 7 + 3) for i in range(200)]
    assert sample_texts(texts, None) is texts
    assert sample_texts(texts, 10**9) is texts
    a, b, c = (sample_texts(texts, 1000, s) for s in (0, 0, 1))
    assert a == b and a != c
    assert 900 <= sum(map(len, a)) <= 1000
    order = [int(t.split()[1]) for t in a]
    assert order == sorted(order)
    lines: list[str] = []
    tok = train_tokenizer("bert", texts, 100, max_chars=1000, log=lines.append)
    assert tok.vocab_size <= 100
    assert any(line.startswith("training on a seeded sample of ") for line in lines)
    # One document longer than the cap is cut at a space, never past it.
    (cut,) = sample_texts(["x" * 5 + " " + "y" * 50], 20)
    assert cut == "xxxxx"


# --- the command line ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rich_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rich") / "rich.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in rich_texts(40)))
    return path


def _pretrain(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["pretrain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("family", "vocab"), [("bert", 200), ("albert", 200), ("roberta", 300)])
def test_pretrain_trains_a_corpus_with_more_characters_than_the_vocabulary(
    capsys, tmp_path, rich_corpus, family, vocab
):
    out_dir = tmp_path / "run"
    preset = "bert-tiny" if family == "bert" else "tiny"
    common = ["--family", family, "--preset", preset, "--corpus", str(rich_corpus)]
    common += ["--output-dir", str(out_dir), "--batch-size", "4", "--precision", "fp32"]
    common += ["--no-progress", "--samples", "0"]
    code, out, err = _pretrain(capsys, *common, "--steps", "2", "--vocab-size", str(vocab))
    assert code == 0, err
    assert f"training a {vocab}-entry" in out
    if family != "roberta":
        assert "tokenizer: alphabet capped at the 97 most frequent" in out
    state = read_state(out_dir / "checkpoint")
    assert state["run"]["vocab_size"] == vocab
    assert state["config"]["vocab_size"] <= vocab
    if family != "bert":
        return
    # Resuming with another --vocab-size is refused (like --seed); left out, the run's own.
    code, _, err = _pretrain(capsys, *common, "--resume", "--steps", "3", "--vocab-size", "300")
    assert code == 2
    assert err.strip() == (
        f"course pretrain: error: checkpoint {str(out_dir / 'checkpoint')!r} was trained with "
        "--vocab-size 200; resume with the same value (or leave --vocab-size out)"
    )
    code, out, err = _pretrain(capsys, *common, "--resume", "--steps", "3")
    assert code == 0, err
    assert read_state(out_dir / "checkpoint")["run"]["vocab_size"] == 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--vocab-size", "5"],
            "--vocab-size 5 is too small for bert's wordpiece tokenizer "
            "(5 special tokens + 1 entry); use --vocab-size >= 6, thousands for real text",
        ),
        (
            ["--family", "roberta", "--vocab-size", "200"],
            "--vocab-size 200 is too small for "
            "roberta's bpe tokenizer (5 special tokens + 256 byte symbols); use --vocab-size >= "
            "261, thousands for real text",
        ),
        (["--vocab-size", "-3"], "--vocab-size -3 is too small"),
    ],
)
def test_a_bad_vocab_size_is_one_line_naming_the_flag(capsys, tmp_path, argv, message):
    code, out, err = _pretrain(capsys, *argv, "--output-dir", str(tmp_path / "r"))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"course pretrain: error: {message}")
    assert not (tmp_path / "r").exists()  # refused before anything is written


def _messages(path: Path) -> list[str]:
    """The string literals of a module (f-strings' literal parts too), docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _course_flags() -> set[str]:
    parser = build_parser()
    flags = {"--help"}
    for action in parser._subparsers._group_actions:  # the subcommands
        for sub in action.choices.values():
            flags.update(s for a in sub._actions for s in a.option_strings)
    return flags


def test_every_flag_an_error_message_names_exists():
    flags = _course_flags()
    assert {"--vocab-size", "--seed", "--resume", "--corpus"} <= flags
    named: dict[str, set[str]] = {}
    files = sorted((SRC / "training").glob("*.py")) + sorted((SRC / "tokenization").glob("*.py"))
    for path in files:
        for text in _messages(path):
            for flag in re.findall(r"--[a-z][a-z-]*", text):
                named.setdefault(flag, set()).add(path.name)
    assert "--vocab-size" in named and "--output-dir" in named  # the scan sees the messages
    missing = {flag: sorted(where) for flag, where in named.items() if flag not in flags}
    assert not missing, f"messages name flags no `course` command has: {missing}"


def test_specials_count_is_what_the_messages_say():
    assert {len(sp.order) for sp in SPECIALS.values()} == {5}


def test_pretrain_with_default_settings_trains_more_distinct_characters_than_8000(capsys, tmp_path):
    """The issue's failure: 8,389 distinct characters refused a default 8000-entry run."""
    chars = [chr(0x4E00 + i) for i in range(9000)]
    docs = [
        " ".join(
            f"the cat sees {''.join(chars[(d * 300 + k * 5 + j) % 9000] for j in range(5))}."
            for k in range(60)
        )
        for d in range(30)
    ]
    assert len(set("".join(docs)) & set(chars)) == 9000
    corpus = tmp_path / "wide.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    code, out, err = _pretrain(
        capsys, "--preset", "bert-tiny", "--corpus", str(corpus), "--steps", "1",
        "--output-dir", str(tmp_path / "run"), "--batch-size", "4", "--no-progress",
        "--samples", "0", "--precision", "fp32",
    )  # fmt: skip
    assert code == 0, err
    assert "training a 8000-entry wordpiece tokenizer" in out
    # The training documents alone (validation is held out) hold more than 8000 symbols.
    seen = re.search(r"alphabet capped at the 1000 most frequent of ([\d,]+) symbols", out)
    assert seen is not None and int(seen.group(1).replace(",", "")) > 8000, out
