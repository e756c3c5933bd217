"""Tokenizers: layouts per family, round trips, vocabulary size, determinism, persistence."""

import json
from pydoc_data.topics import topics

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from course_lib.tokenization import CourseTokenizer, canonical_family, train_tokenizer

# Real prose that ships with Python: small enough to train on in well under a second.
TEXTS = [topics[k] for k in sorted(topics)[:20]]
FAMILIES = ("wordpiece", "bpe", "unigram")
VOCAB = 600


@pytest.fixture(scope="module")
def toks():
    return {f: train_tokenizer(f, TEXTS, vocab_size=VOCAB) for f in FAMILIES}


def test_aliases_map_model_names_to_families():
    assert [
        canonical_family(m) for m in ("bert", "distilbert", "roberta", "albert", "deberta")
    ] == ["wordpiece", "wordpiece", "bpe", "unigram", "unigram"]
    with pytest.raises(ValueError, match="Unknown tokenizer family 'gpt'.*wordpiece"):
        canonical_family("gpt")


@pytest.mark.parametrize("family", FAMILIES)
def test_vocab_size_is_honoured(toks, family):
    assert toks[family].vocab_size == VOCAB
    assert len(toks[family].get_vocab()) == VOCAB


def test_training_alias_returns_family():
    tok = train_tokenizer("roberta", TEXTS[:3], vocab_size=300)
    assert tok.family == "bpe" and tok.mask_token == "<mask>"


@pytest.mark.parametrize("family", FAMILIES)
def test_training_is_deterministic(toks, family):
    # HF's WordPiece and Unigram trainers alone are not (hash-map order); see train.py.
    again = train_tokenizer(family, TEXTS, vocab_size=VOCAB)
    assert again.get_vocab() == toks[family].get_vocab()
    text = TEXTS[-1][:2000]
    assert again.encode(text)["input_ids"] == toks[family].encode(text)["input_ids"]


def test_special_tokens_per_family(toks):
    bert, roberta, albert = toks["wordpiece"], toks["bpe"], toks["unigram"]
    assert [
        bert.pad_token_id,
        bert.unk_token_id,
        bert.cls_token_id,
        bert.sep_token_id,
        bert.mask_token_id,
    ] == [0, 1, 2, 3, 4]
    assert bert.convert_ids_to_tokens([0, 1, 2, 3, 4]) == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    # RoBERTa's order: <s>=0 <pad>=1 </s>=2 <unk>=3
    assert roberta.convert_ids_to_tokens([0, 1, 2, 3, 4]) == [
        "<s>",
        "<pad>",
        "</s>",
        "<unk>",
        "<mask>",
    ]
    assert (roberta.cls_token_id, roberta.pad_token_id, roberta.sep_token_id) == (0, 1, 2)
    assert albert.convert_ids_to_tokens([0, 1, 2, 3, 4]) == [
        "<pad>",
        "<unk>",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    for tok in toks.values():
        assert tok.special_ids == [0, 1, 2, 3, 4]
        assert tok.convert_tokens_to_ids(tok.mask_token) == tok.mask_token_id


def test_wordpiece_uses_continuation_prefix_and_word_ids(toks):
    tok = toks["wordpiece"]
    pieces = tok.tokenize("Identifiers unbelievably")
    assert pieces[0] == "identifiers" or pieces[1].startswith("##")
    assert any(p.startswith("##") for p in pieces)
    enc = tok.encode("Identifiers unbelievably")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    for token, word, prev in zip(tokens[1:-1], enc["word_ids"][1:-1], enc["word_ids"][:-2]):
        if token.startswith("##"):
            assert word == prev  # a continuation piece belongs to the previous word
    assert enc["word_ids"][0] == enc["word_ids"][-1] == -1


def test_bert_pair_layout(toks):
    tok = toks["wordpiece"]
    a, b = (
        tok.encode("first part", add_special_tokens=False),
        tok.encode("second", add_special_tokens=False),
    )
    enc = tok.encode("first part", "second")
    cls, sep = tok.cls_token_id, tok.sep_token_id
    assert enc["input_ids"] == [cls, *a["input_ids"], sep, *b["input_ids"], sep]
    assert enc["token_type_ids"] == [0] * (len(a["input_ids"]) + 2) + [1] * (
        len(b["input_ids"]) + 1
    )
    assert enc["attention_mask"] == [1] * len(enc["input_ids"])


def test_roberta_pair_layout_has_double_separator_and_zero_types(toks):
    tok = toks["bpe"]
    enc = tok.encode("first part", "second")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert tokens.count("</s>") == 3
    i = tokens.index("</s>")
    assert tokens[i + 1] == "</s>"
    assert set(enc["token_type_ids"]) == {0}
    assert tok.num_special_tokens_to_add(pair=True) == 4
    assert toks["wordpiece"].num_special_tokens_to_add(pair=True) == 3


@pytest.mark.parametrize("family", FAMILIES)
def test_layout_matches_the_saved_post_processor(toks, family):
    # transformers will use the post-processor stored in tokenizer.json: it must agree.
    tok = toks[family]
    ours = tok.encode("A sentence here.", "And another one.")
    rust = tok.backend.encode("A sentence here.", "And another one.")
    assert ours["input_ids"] == rust.ids
    assert ours["token_type_ids"] == rust.type_ids


def test_round_trips(toks):
    plain = "the interpreter raises an exception when it detects a run time error"
    for family in FAMILIES:
        assert toks[family].decode(toks[family].encode(plain)["input_ids"]) == plain
    # Byte-level BPE has no unknowns: any string, emoji and all, comes back exactly.
    cased = train_tokenizer("bpe", TEXTS[:5], vocab_size=400, lowercase=False)
    weird = "Héllo Wörld ∑ 🤖 \t tabs"
    ids = cased.encode(weird)["input_ids"]
    assert cased.unk_token_id not in ids
    assert cased.decode(ids) == weird


def test_unknown_characters_map_to_unk_in_wordpiece(toks):
    tok = toks["wordpiece"]
    assert tok.unk_token_id in tok.encode("🤖")["input_ids"]


def test_unigram_marks_word_starts(toks):
    pieces = toks["unigram"].tokenize("the statement")
    assert pieces[0].startswith("▁")
    assert sum(p.startswith("▁") for p in pieces) == 2


def test_truncation_is_longest_first_and_keeps_both(toks):
    tok = toks["wordpiece"]
    long = "word " * 50
    enc = tok.encode(long, "short text", max_length=16)
    assert len(enc["input_ids"]) == 16
    types = enc["token_type_ids"]
    b_len = sum(types) - 1  # type-1 tokens are B and its [SEP]
    assert b_len == len(tok.tokenize("short text"))  # the short one is untouched
    enc = tok.encode(long, long, max_length=17)
    assert sum(enc["token_type_ids"]) - 1 == 7 and len(enc["input_ids"]) == 17
    with pytest.raises(ValueError, match="max_length=4 cannot hold two segments.*>= 5"):
        tok.encode("a b", "c d", max_length=4)


def test_batch_encode_pads(toks):
    tok = toks["bpe"]
    batch = tok.batch_encode(["short", "a much longer sentence than the first"], ["x", "y"])
    assert batch["input_ids"].shape == batch["attention_mask"].shape == batch["word_ids"].shape
    n_short = int(batch["attention_mask"][0].sum())
    assert (batch["input_ids"][0, n_short:] == tok.pad_token_id).all()
    assert (batch["word_ids"][0, n_short:] == -1).all()
    assert batch["attention_mask"][1].all()
    lists = tok.batch_encode(["short", "a longer one, really"], return_tensors=None, padding=False)
    assert isinstance(lists["input_ids"][0], list)
    assert len(lists["input_ids"][0]) != len(lists["input_ids"][1])
    with pytest.raises(TypeError, match="list of texts"):
        tok.batch_encode("one string")


@pytest.mark.parametrize("family", FAMILIES)
def test_save_and_load_round_trip(toks, family, tmp_path):
    tok = toks[family]
    path = tok.save(tmp_path / family)
    assert path.name == "tokenizer.json"
    for loaded in (
        CourseTokenizer.load(tmp_path / family),
        CourseTokenizer.load(path),
        CourseTokenizer.from_file(tok.save(tmp_path / "x.json")),
    ):
        assert loaded.family == family
        assert loaded.get_vocab() == tok.get_vocab()
        assert loaded.encode("Some text.", "More.") == tok.encode("Some text.", "More.")


def test_from_file_reads_a_hand_written_bert_style_tokenizer_json(tmp_path):
    vocab = {
        t: i
        for i, t in enumerate(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]
        )
    }
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.save(str(tmp_path / "tokenizer.json"))
    tok = CourseTokenizer.from_file(tmp_path / "tokenizer.json")
    assert tok.family == "wordpiece"
    assert tok.encode("hello worlds")["input_ids"] == [2, 5, 6, 7, 3]


def test_from_file_accepts_deberta_spellings_and_names_missing_tokens(tmp_path):
    pieces = [
        ("[PAD]", 0.0),
        ("[CLS]", 0.0),
        ("[SEP]", 0.0),
        ("[UNK]", 0.0),
        ("[MASK]", 0.0),
        ("▁a", -1.0),
        ("a", -2.0),
    ]
    backend = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    backend.save(str(tmp_path / "deberta.json"))
    tok = CourseTokenizer.from_file(tmp_path / "deberta.json")
    assert (tok.family, tok.pad_token_id, tok.unk_token_id) == ("unigram", 0, 3)
    spec = json.loads((tmp_path / "deberta.json").read_text())
    spec["model"]["vocab"] = [p for p in spec["model"]["vocab"] if p[0] != "[MASK]"]
    (tmp_path / "nomask.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="no mask token"):
        CourseTokenizer.from_file(tmp_path / "nomask.json")
    with pytest.raises(FileNotFoundError):
        CourseTokenizer.from_file(tmp_path / "missing.json")


def test_bad_training_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="vocab_size=5 leaves no room beyond the 5 special"):
        train_tokenizer("bert", TEXTS, vocab_size=5)
    with pytest.raises(ValueError, match="byte-level BPE.*>= 261"):
        train_tokenizer("bpe", TEXTS, vocab_size=100)
    # The alphabet is capped (tests/test_tokenizer_alphabet.py): 20 entries train; uncapped, not.
    assert train_tokenizer("wordpiece", TEXTS[:2], vocab_size=20).vocab_size <= 20
    with pytest.raises(ValueError, match=r"too small.*use vocab_size >= \d+"):
        train_tokenizer("wordpiece", TEXTS[:2], vocab_size=20, limit_alphabet=None)
    with pytest.raises(ValueError, match="empty or all blank"):
        train_tokenizer("unigram", ["", "  "], vocab_size=100)
    with pytest.raises(ValueError, match="Unigram training failed.*larger"):
        train_tokenizer("unigram", TEXTS[:2], vocab_size=8, limit_alphabet=None)


def test_to_transformers_gives_the_same_ids(toks):
    fast = toks["wordpiece"].to_transformers()
    text, pair = "Exceptions are raised.", "They can be handled."
    ours = toks["wordpiece"].encode(text, pair)
    theirs = fast(text, pair)
    assert theirs["input_ids"] == ours["input_ids"]
    assert theirs["token_type_ids"] == ours["token_type_ids"]
    assert fast.mask_token_id == toks["wordpiece"].mask_token_id


def test_decode_accepts_tensors_and_keeps_specials_on_request(toks):
    tok = toks["wordpiece"]
    ids = torch.tensor(tok.encode("hello")["input_ids"])
    assert tok.decode(ids, skip_special_tokens=False).startswith("[CLS]")
    assert "[CLS]" not in tok.decode(ids)


def test_byte_level_bpe_is_cased_by_default_like_roberta():
    # RoBERTa's (GPT-2's) byte-level BPE keeps case; BERT-uncased and ALBERT lowercase.
    texts = ["The cat. The dog. the end."] * 20
    assert (
        train_tokenizer("roberta", texts, vocab_size=300).decode(
            train_tokenizer("roberta", texts, vocab_size=300).encode("The cat")["input_ids"]
        )
        == "The cat"
    )
    assert train_tokenizer("bert", texts, vocab_size=60).tokenize("The")[0] == "the"
    assert "".join(train_tokenizer("albert", texts, vocab_size=60).tokenize("The")) == "▁the"
    with pytest.raises(TypeError, match="lowercase='yes' must be True, False or None"):
        train_tokenizer("bert", texts, vocab_size=60, lowercase="yes")


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (None, TypeError, r"the text must be a string, not NoneType"),
        (b"bytes", TypeError, r"the text is bytes, not a string; decode it first"),
        (7, TypeError, r"must be a string, not int"),
        ("ok \udc80 here", ValueError, r"lone surrogate '\\udc80' at character 3.*utf-8"),
    ],
)
def test_bad_text_gets_one_clear_line(toks, bad, error, message):
    for tok in toks.values():
        for method in (tok.encode, tok.tokenize):
            with pytest.raises(error, match=message) as info:
                method(bad)
            assert "\n" not in str(info.value) and "TextEncodeInput" not in str(info.value)
    with pytest.raises(error, match=message.replace("the text", "text 1")):
        toks["bpe"].batch_encode(["fine", bad])
    if bad is not None:  # text_pair=None means "no pair"
        with pytest.raises(error, match=message.replace("the text", "text/text_pair 1")):
            toks["bpe"].encode("fine", bad)


@pytest.mark.parametrize(
    "ids, error, message",
    [
        ([5, -1], ValueError, r"decode got id -1 at position 1, outside .* 0\.\.599"),
        ([600], ValueError, r"decode got id 600 at position 0, outside .*another tokenizer"),
        ([1.5], TypeError, r"decode got 1\.5 \(float\) at position 0; token ids are integers"),
        (["the"], TypeError, r"decode got 'the' \(str\)"),
        ("the", TypeError, r"decode takes a list of token ids, not str"),
        (torch.zeros(2, 3, dtype=torch.long), ValueError, r"one sequence of ids.*\(2, 3\)"),
    ],
)
def test_bad_ids_get_one_clear_line(toks, ids, error, message):
    with pytest.raises(error, match=message):
        toks["bpe"].decode(ids)


def test_decode_accepts_numpy_and_tensor_ints(toks):
    import numpy as np

    tok = toks["wordpiece"]
    ids = tok.encode("the statement")["input_ids"]
    assert tok.decode(np.array(ids)) == tok.decode(torch.tensor(ids)) == tok.decode(ids)
    assert tok.decode(ids[1]) == tok.decode([ids[1]])
    with pytest.raises(ValueError, match="convert_ids_to_tokens got id -1"):
        tok.convert_ids_to_tokens(-1)


@pytest.mark.parametrize("content", [b"not json", b'{"version": "1.0"}', b"\xff\xfe\x00", b""])
def test_a_damaged_tokenizer_json_names_the_file(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(
        ValueError, match=r"tokenizer\.json is not a valid tokenizer\.json \("
    ) as info:
        CourseTokenizer.load(tmp_path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert path.read_bytes() == content  # the damaged file is left as it was
