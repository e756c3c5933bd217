"""The course's tokenizers against the transformers classes a practitioner would load the same
vocabulary into: identical ids, offsets, special-token layout and word grouping.

For each family a tokenizer is trained on part of the built-in corpus, its vocabulary (and
merges, or scores) is handed to the transformers class, and both encode the held-out
sentences of the corpus: alone, as consecutive pairs, and with one word replaced by the mask.

| family    | course              | transformers class, built from the trained vocabulary          |
|-----------|---------------------|-----------------------------------------------------------------|
| wordpiece | uncased (BERT)      | BertTokenizerFast(vocab=..., do_lower_case=True)                |
| bpe       | cased (RoBERTa)     | RobertaTokenizerFast(vocab, merges, roberta-base's <mask>)      |
| unigram   | uncased (ALBERT)    | AlbertTokenizerFast(vocab=[(piece, score), ...])                |
| unigram   | cased (DeBERTa-v3)  | DebertaV2TokenizerFast(vocab=[(piece, score), ...])             |

All four classes can be built offline from a trained vocabulary (transformers 5 takes the
vocabulary directly), so no comparison falls back to a hand-built `tokenizers` pipeline. The
two Unigram classes normalise text slightly differently from the course (which applies NFKC,
SentencePiece's default); `test_unigram_pipelines_differ_only_where_named` pins exactly where.
"""

from __future__ import annotations

import json
import random
from functools import cache

import pytest
import torch
from tokenizers import AddedToken

from course_lib.data import load_builtin_corpus
from course_lib.tokenization import CourseTokenizer, train_tokenizer

transformers = pytest.importorskip("transformers")

TRAIN_DOCS = 60  # a fifth of the training split: each tokenizer trains in about a second
VOCAB = 1500
CASES = {  # name: (family, lowercase)
    "wordpiece": ("wordpiece", True),
    "bpe": ("bpe", False),
    "unigram-albert": ("unigram", True),
    "unigram-deberta": ("unigram", False),
}
# Text outside the corpus: accents, other scripts, emoji, tabs, repeated spaces, code.
PROBES = [
    "Café naïve Zürich",
    "I ❤️ tokenizers 🤗🚀",
    "你好，世界",
    "Привет, мир",
    "def f(x):\treturn x**2  # → ✓",
    "e = mc²   and   three spaces",
    " a leading space",
]


@cache
def corpus():
    return load_builtin_corpus(progress=False)


@cache
def held_out() -> tuple[str, ...]:
    return tuple(corpus().sentences("validation"))


@cache
def course(name: str) -> CourseTokenizer:
    family, lowercase = CASES[name]
    texts = list(corpus().texts("train"))[:TRAIN_DOCS]
    return train_tokenizer(family, texts, vocab_size=VOCAB, lowercase=lowercase)


@cache
def reference(name: str):
    """The transformers class a practitioner would use, built from the course's vocabulary."""
    tok = course(name)
    model = json.loads(tok.backend.to_str())["model"]
    if name == "wordpiece":
        return transformers.BertTokenizerFast(vocab=tok.get_vocab(), do_lower_case=True)
    if name == "bpe":
        # roberta-base's settings: <mask> absorbs the space before it, other specials do not.
        mask = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
        return transformers.RobertaTokenizerFast(
            vocab=model["vocab"], merges=merges, mask_token=mask, add_prefix_space=False
        )
    pieces = [(piece, score) for piece, score in model["vocab"]]
    if name == "unigram-albert":
        return transformers.AlbertTokenizerFast(vocab=pieces, do_lower_case=True)
    return transformers.DebertaV2TokenizerFast(
        vocab=pieces, do_lower_case=False, unk_token="<unk>", pad_token="<pad>"
    )


def ours(tok: CourseTokenizer, text: str, pair: str | None = None) -> dict:
    enc = tok.encode(text, pair, return_offsets_mapping=True)
    # special_tokens_mask marks what the layout added ([CLS], [SEP]), not a [MASK] in the text.
    n_a = len(tok.encode(text, add_special_tokens=False)["input_ids"])
    n_b = None if pair is None else len(tok.encode(pair, add_special_tokens=False)["input_ids"])
    layout = tok.build_inputs_with_special_tokens([-1] * n_a, None if n_b is None else [-1] * n_b)
    return {
        "input_ids": enc["input_ids"],
        "token_type_ids": enc["token_type_ids"],
        "attention_mask": enc["attention_mask"],
        "offset_mapping": [tuple(o) for o in enc["offset_mapping"]],
        "special_tokens_mask": [int(i != -1) for i in layout[0]],
    }


def theirs(ref, texts: list[str], pairs: list[str] | None = None) -> list[dict]:
    batch = ref(
        texts,
        pairs,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        return_special_tokens_mask=True,
        return_attention_mask=True,
    )
    keys = (
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "offset_mapping",
        "special_tokens_mask",
    )
    rows = []
    for i in range(len(texts)):
        row = {k: list(batch[k][i]) for k in keys}
        row["offset_mapping"] = [tuple(o) for o in row["offset_mapping"]]
        if isinstance(ref, transformers.DebertaV2TokenizerFast):
            segments = (texts[i], None if pairs is None else pairs[i])
            row["offset_mapping"] = without_leading_space(
                row["offset_mapping"], batch.sequence_ids(i), segments
            )
        rows.append(row)
    return rows


def without_leading_space(offsets, sequence_ids, segments) -> list[tuple[int, int]]:
    """DeBERTa-v3's pre-tokenizer (Metaspace alone) counts the space before a word into the
    word's first piece: " may" is (10, 13) where the course, ALBERT and BERT say (11, 13); a
    lone "▁" piece is the space itself (74, 75) where the course points it at the character
    it precedes (75, 76). The ids are the same; this moves such offsets past their one space,
    and nothing else."""
    out = []
    for (start, end), seq in zip(offsets, sequence_ids):
        if seq is not None and end > start and segments[seq][start] == " ":
            start, end = start + 1, (end if end > start + 1 else end + 1)
        out.append((start, end))
    return out


def mask_one_word(tok: CourseTokenizer, sentences, seed: int = 0) -> list[str]:
    """Each sentence with one random word (first, middle or last) replaced by the mask token."""
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split(" ")
        words[rng.randrange(len(words))] = tok.mask_token
        out.append(" ".join(words))
    return out


def assert_identical(name: str, texts: list[str], pairs: list[str] | None = None) -> int:
    tok, ref = course(name), reference(name)
    expected = theirs(ref, texts, pairs)
    for i, text in enumerate(texts):
        got = ours(tok, text, None if pairs is None else pairs[i])
        assert got == expected[i], f"{name}: differs from {type(ref).__name__} on {text!r}"
    return len(texts)


@pytest.mark.parametrize("name", CASES)
def test_held_out_sentences_encode_identically(name):
    sentences = list(held_out())
    assert len(sentences) >= 300
    assert assert_identical(name, sentences) == len(sentences)


@pytest.mark.parametrize("name", CASES)
def test_pairs_encode_identically(name):
    sentences = list(held_out())
    assert assert_identical(name, sentences[:-1], sentences[1:]) == len(sentences) - 1


@pytest.mark.parametrize("name", CASES)
def test_masked_sentences_encode_identically(name):
    masked = mask_one_word(course(name), held_out())
    assert sum(course(name).mask_token in m for m in masked) == len(masked)
    assert assert_identical(name, masked) == len(masked)
    # and a masked pair, the mask in segment B
    assert assert_identical(name, list(held_out())[:50], masked[1:51]) == 50


@pytest.mark.parametrize("name", ["wordpiece", "bpe"])
def test_text_outside_the_corpus_encodes_identically(name):
    # WordPiece and byte-level BPE use exactly the classes' pipelines, on any text.
    assert assert_identical(name, PROBES) == len(PROBES)


def test_unigram_pipelines_differ_only_where_named():
    """The transformers Unigram classes, built from a bare vocabulary, normalise differently:
    ALBERT's strips accents (NFKD) and turns '' into ", DeBERTa's composes with NFC; the
    course applies NFKC (SentencePiece's nmt_nfkc), which keeps é and unfolds ². Plain
    text, as in the whole held-out corpus, is unaffected."""
    albert, deberta = course("unigram-albert"), course("unigram-deberta")
    same = ["A plain sentence, with punctuation (and digits: 42).", "Привет, мир"]
    assert assert_identical("unigram-albert", same) == assert_identical("unigram-deberta", same)

    def course_text(tok, text):
        return tok.backend.normalizer.normalize_str(text)

    def class_text(ref, text):
        return ref.backend_tokenizer.normalizer.normalize_str(text)

    assert (
        course_text(albert, "Café") == "café"
        and class_text(reference("unigram-albert"), "Café") == "cafe"
    )
    assert class_text(reference("unigram-albert"), "x = ''") == 'x = "'
    assert (
        course_text(deberta, "mc²") == "mc2"
        and class_text(reference("unigram-deberta"), "mc²") == "mc²"
    )


@pytest.mark.parametrize("name", CASES)
def test_word_ids_group_pieces_like_transformers(name):
    # Whole-word masking groups pieces by word id: the same groups as transformers' word_ids().
    tok, ref = course(name), reference(name)
    sentences = list(held_out())[:200]
    batch = ref(sentences)
    for i, text in enumerate(sentences):
        expected = [-1 if w is None else w for w in batch.word_ids(i)]
        assert tok.encode(text)["word_ids"] == expected, text


def test_roberta_mask_stands_where_a_whole_token_stood():
    """Why <mask> absorbs its space: masking a word mid-sentence must give the ids of the
    sentence with that word's token (e.g. 'Ġthe') replaced by the mask, as in pretraining.
    Without lstrip the space stays behind as a lone 'Ġ' that pretraining never produces."""
    tok = course("bpe")
    space = tok.convert_tokens_to_ids("Ġ")
    checked = 0
    for sentence in held_out():
        words = sentence.split(" ")
        for i in range(1, len(words)):
            if not words[i].isalpha() or len(tok.tokenize(" " + words[i])) != 1:
                continue
            masked = " ".join([*words[:i], tok.mask_token, *words[i + 1 :]])
            original = tok.encode(sentence)["input_ids"]
            expected = list(original)
            position = (
                len(tok.encode(" ".join(words[:i]), add_special_tokens=False)["input_ids"]) + 1
            )
            expected[position] = tok.mask_token_id
            got = tok.encode(masked)["input_ids"]
            assert got == expected, masked
            assert got.count(space) == original.count(space)  # no new lone space
            checked += 1
            break
    assert checked >= 300
    # The bug this guards against: a mask without lstrip leaves the space as its own token.
    plain = train_tokenizer("bpe", list(corpus().texts("train"))[:5], vocab_size=400)
    plain.backend.add_special_tokens(
        [AddedToken("<mask>", lstrip=False, rstrip=False, normalized=False, special=True)]
    )
    assert "Ġ" in plain.backend.encode("return a <mask> of it").tokens
    # CourseTokenizer upgrades such a tokenizer (saved before the fix) when it loads it.
    upgraded = CourseTokenizer(plain.backend, "bpe")
    assert "Ġ" not in upgraded.tokenize("return a <mask> of it")


@pytest.mark.parametrize("name", ["wordpiece", "bpe", "unigram-albert"])
def test_to_transformers_round_trips_through_save_pretrained(name, tmp_path):
    tok = course(name)
    exported = tok.to_transformers(model_max_length=64)
    exported.save_pretrained(tmp_path)
    loaded = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.model_max_length == 64
    assert loaded.mask_token == tok.mask_token and loaded.mask_token_id == tok.mask_token_id
    assert loaded.all_special_ids and set(loaded.all_special_ids) <= set(tok.special_ids)
    texts = mask_one_word(tok, list(held_out())[:100], seed=1)
    pairs = list(held_out())[100:200]
    for fast in (exported, loaded):
        batch = fast(texts, pairs, return_offsets_mapping=True, return_token_type_ids=True)
        for i, text in enumerate(texts):
            enc = tok.encode(text, pairs[i], return_offsets_mapping=True)
            assert batch["input_ids"][i] == enc["input_ids"]
            assert batch["token_type_ids"][i] == enc["token_type_ids"]
            assert [tuple(o) for o in batch["offset_mapping"][i]] == enc["offset_mapping"]
        assert fast.decode(batch["input_ids"][0], skip_special_tokens=True) == tok.decode(
            batch["input_ids"][0]
        )
    mask = loaded.backend_tokenizer.get_added_tokens_decoder()[tok.mask_token_id]
    assert mask.lstrip == (name == "bpe")


def test_fill_mask_pipeline_matches_the_course():
    """A course RoBERTa exported with its tokenizer fills masks in `pipeline("fill-mask")`
    exactly as `fill_mask` does: same tokens, same sequences, spacing right."""
    from course_lib.interop import to_transformers
    from course_lib.models import RobertaConfig, RobertaForMaskedLM
    from course_lib.training.inference import fill_mask

    tok = course("bpe")
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tok.pad_token_id,
    )
    model = RobertaForMaskedLM(config).eval()
    hf_model = to_transformers(model).eval()
    pipe = transformers.pipeline("fill-mask", model=hf_model, tokenizer=tok.to_transformers())
    special = set(tok.special_ids)
    for text in ("Return a <mask> of the items.", "<mask> is a module.", "It ends with <mask>."):
        course_top = fill_mask(model, tok, text, top_k=5)
        hf_top = [p for p in pipe(text, top_k=20) if p["token"] not in special][:5]
        assert [p["token"] for p in hf_top] == [p["token"] for p in course_top]
        assert [p["sequence"] for p in hf_top] == [p["sequence"] for p in course_top]
        # Spacing: the mask took the space before it, the predicted token brings its own.
        for p in course_top:
            piece = tok.decode([p["token"]])
            at_start = text.startswith("<mask>")
            assert p["sequence"] == text.replace("<mask>" if at_start else " <mask>", piece)


def test_fill_mask_examples_hide_one_whole_token():
    """The held-out fill-mask queries are pretraining-shaped: the masked text is the sentence
    with exactly one token (the hidden word, with its space: 'Ġlist') replaced by <mask>."""
    from course_lib.training.inference import masked_word_examples

    tok = course("bpe")
    examples = masked_word_examples(tok, list(held_out()), n=100, seed=0)
    assert len(examples) == 100
    for text, answer in examples:
        sentence = text.replace(tok.mask_token, answer)
        at_start = text.startswith(tok.mask_token)
        (token,) = tok.encode(("" if at_start else " ") + answer, add_special_tokens=False)[
            "input_ids"
        ]
        masked = tok.encode(text)["input_ids"]
        assert [token if i == tok.mask_token_id else i for i in masked] == tok.encode(sentence)[
            "input_ids"
        ]
