"""NSP, SOP, RoBERTa's formats and MLM blocks, checked on documents whose sentences say
where they come from: every sentence starts with a marker dDxS (document D, sentence S)."""

import random
import re
import warnings

import pytest

from course_lib.data import Corpus, Document
from course_lib.data.pairs import (
    Examples,
    build_pretraining_dataset,
    concat_segments,
    junction_survival,
    make_format_examples,
    make_mlm_examples,
    make_nsp_examples,
    make_sop_examples,
    tokenize_documents,
    truncate_pair,
)
from course_lib.tokenization import train_tokenizer

WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()


def make_docs(n_docs=80, seed=0, min_sentences=4, max_sentences=12):
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        sentences = [
            f"d{d}x{s} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) + "."
            for s in range(rng.randint(min_sentences, max_sentences))
        ]
        docs.append(Document(title=f"doc{d}", sentences=sentences))
    return docs


DOCS = make_docs()


@pytest.fixture(scope="module")
def bert():
    return train_tokenizer("bert", [d.text for d in DOCS], vocab_size=200)


@pytest.fixture(scope="module")
def roberta():
    return train_tokenizer("roberta", [d.text for d in DOCS], vocab_size=300)


def markers(tok, ids):
    """(doc, sentence) markers found in decoded ids, in order."""
    return [(int(d), int(s)) for d, s in re.findall(r"d(\d+)x(\d+)", tok.decode(ids))]


def segments(tok, example):
    """Split a BERT-layout example into the ids of A and B (specials removed)."""
    ids, types = example["input_ids"], example["token_type_ids"]
    a = [i for i, t in zip(ids, types) if t == 0 and i not in tok.special_ids]
    b = [i for i, t in zip(ids, types) if t == 1 and i not in tok.special_ids]
    return a, b


def check_layout(tok, example, max_length):
    ids, types, words = example["input_ids"], example["token_type_ids"], example["word_ids"]
    assert len(ids) == len(types) == len(words) <= max_length
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert [w for i, w in zip(ids, words) if i in (tok.cls_token_id, tok.sep_token_id)] == [
        -1
    ] * sum(i in (tok.cls_token_id, tok.sep_token_id) for i in ids)


def test_nsp_labels_mean_what_they_say(bert):
    examples = make_nsp_examples(DOCS, bert, max_length=64, seed=0)
    assert len(examples) > 100
    checked = 0
    for ex in examples:
        check_layout(bert, ex, 64)
        a, b = segments(bert, ex)
        assert a and b  # truncation keeps both segments
        ma, mb = markers(bert, a), markers(bert, b)
        if not ma or not mb:
            continue
        checked += 1
        if ex["next_sentence_label"] == 0:  # B is the real continuation of A
            assert {d for d, _ in ma + mb} == {ma[0][0]}
            assert min(s for _, s in mb) > max(s for _, s in ma)
        else:  # B comes from another document
            assert {d for d, _ in mb} != {ma[0][0]}
    assert checked > 0.8 * len(examples)
    share = sum(ex["next_sentence_label"] for ex in examples) / len(examples)
    forced = examples.counts["forced_random_next"] / len(examples)
    assert 0.4 < share - forced / 2 < 0.6


def test_nsp_token_types_and_short_sequences(bert):
    ex = make_nsp_examples(DOCS, bert, max_length=64, seed=0, short_seq_prob=0.0)
    short = make_nsp_examples(DOCS, bert, max_length=64, seed=0, short_seq_prob=1.0)
    first = ex[0]
    n_a = first["token_type_ids"].index(1)
    assert set(first["token_type_ids"][:n_a]) == {0} and set(first["token_type_ids"][n_a:]) == {1}
    mean = lambda xs: sum(len(e["input_ids"]) for e in xs) / len(xs)  # noqa: E731
    assert mean(ex) > 55  # close to max_length when every target is the maximum
    assert mean(short) < 45  # random targets in [2, 61]


def test_sop_pairs_are_consecutive_and_swapped_half_the_time(bert):
    examples = make_sop_examples(DOCS, bert, max_length=64, seed=0)
    labels = [ex["sentence_order_label"] for ex in examples]
    assert 0.35 < sum(labels) / len(labels) < 0.65
    for ex in examples:
        check_layout(bert, ex, 64)
        a, b = segments(bert, ex)
        ma, mb = markers(bert, a), markers(bert, b)
        if not ma or not mb:
            continue
        assert {d for d, _ in ma + mb} == {ma[0][0]}  # always one document
        in_order = max(s for _, s in ma) < min(s for _, s in mb)
        assert in_order == (ex["sentence_order_label"] == 0)


def test_examples_are_deterministic_per_seed(bert):
    one = make_nsp_examples(DOCS, bert, 64, seed=3)
    assert one == make_nsp_examples(DOCS, bert, 64, seed=3)
    assert one != make_nsp_examples(DOCS, bert, 64, seed=4)


def test_word_ids_follow_wordpiece_continuations(bert):
    for ex in make_nsp_examples(DOCS[:5], bert, 64, seed=0):
        tokens = bert.convert_ids_to_tokens(ex["input_ids"])
        for j in range(1, len(tokens)):
            if tokens[j].startswith("##") and j > 0 and ex["word_ids"][j - 1] >= 0:
                assert ex["word_ids"][j] == ex["word_ids"][j - 1]
        real = [w for w in ex["word_ids"] if w >= 0]
        assert real == sorted(real)  # words numbered left to right, never reused


def test_single_sentence_documents_are_skipped_and_reported(bert):
    docs = DOCS[:6] + [Document("one", ["d99x0 only one sentence here."])] * 2
    with pytest.warns(UserWarning, match="skipped 2 document"):
        examples = make_sop_examples(docs, bert, 64, seed=0)
    assert examples.skipped == 2
    with pytest.raises(ValueError, match="at least two sentences"):
        make_sop_examples([Document("one", ["Only one."])], bert, 64, seed=0)
    with pytest.raises(ValueError, match="NSP needs at least two documents"):
        make_nsp_examples(DOCS[:1], bert, 64, seed=0)


def test_max_length_too_small_names_the_minimum(bert, roberta):
    with pytest.raises(ValueError, match=r"max_length=4 cannot hold two segments plus 3 .*>= 5"):
        make_nsp_examples(DOCS, bert, max_length=4, seed=0)
    with pytest.raises(ValueError, match=r"plus 4 special tokens; use max_length >= 6"):
        make_format_examples(DOCS, roberta, max_length=5, format="sentence-pair")
    with pytest.raises(ValueError, match=r"max_length=2 cannot hold one token"):
        make_format_examples(DOCS, bert, max_length=2, format="doc-sentences")


def test_bad_inputs_are_named(bert):
    with pytest.raises(ValueError, match="format='paragraphs' is unknown"):
        make_format_examples(DOCS, bert, 64, format="paragraphs")
    with pytest.raises(ValueError, match="No documents given"):
        make_sop_examples([], bert, 64)
    with pytest.raises(TypeError, match="corpus.train"):
        make_sop_examples(Corpus(DOCS, []), bert, 64)


def test_roberta_segment_pair_layout(roberta):
    examples = make_format_examples(DOCS, roberta, 64, format="segment-pair", seed=0)
    for ex in examples[:50]:
        ids = ex["input_ids"]
        assert ids[0] == roberta.cls_token_id and ids[-1] == roberta.sep_token_id
        assert ids.count(roberta.sep_token_id) == 3
        j = ids.index(roberta.sep_token_id)
        assert ids[j + 1] == roberta.sep_token_id  # <s> A </s></s> B </s>
        assert set(ex["token_type_ids"]) == {0}
        assert "next_sentence_label" in ex


def test_sentence_pair_uses_single_sentences(bert):
    examples = make_format_examples(DOCS, bert, 64, format="sentence-pair", seed=0)
    for ex in examples:
        a, b = segments(bert, ex)
        ma, mb = markers(bert, a), markers(bert, b)
        assert len(ma) <= 1 and len(mb) <= 1
        if ma and mb and ex["next_sentence_label"] == 0:
            assert mb[0] == (ma[0][0], ma[0][1] + 1)


def _inner(tok, ex):
    return ex["input_ids"][1:-1]


def test_doc_sentences_never_cross_and_lose_nothing(bert):
    examples = make_format_examples(DOCS, bert, 48, format="doc-sentences")
    for ex in examples:
        check_layout(bert, ex, 48)
        assert len({d for d, _ in markers(bert, ex["input_ids"])}) <= 1
        assert bert.sep_token_id not in _inner(bert, ex)
    n_tokens = sum(len(bert.tokenize(s)) for d in DOCS for s in d.sentences)
    assert sum(len(_inner(bert, ex)) for ex in examples) == n_tokens


def test_full_sentences_cross_documents_with_a_separator(bert):
    examples = make_format_examples(DOCS, bert, 48, format="full-sentences")
    crossing = [ex for ex in examples if len({d for d, _ in markers(bert, ex["input_ids"])}) > 1]
    assert crossing
    for ex in crossing:
        assert bert.sep_token_id in _inner(bert, ex)
    for ex in examples:
        check_layout(bert, ex, 48)
        assert set(ex["token_type_ids"]) == {0}
    n_tokens = sum(len(bert.tokenize(s)) for d in DOCS for s in d.sentences)
    n_seps = sum(_inner(bert, ex).count(bert.sep_token_id) for ex in examples)
    assert sum(len(_inner(bert, ex)) for ex in examples) - n_seps == n_tokens
    # Packed: fewer, fuller examples than one-per-document packing.
    assert len(examples) <= len(make_format_examples(DOCS, bert, 48, format="doc-sentences"))


def test_long_sentences_are_split_not_dropped(bert):
    long_doc = [Document("long", ["d1x0 " + "alpha " * 100 + ".", "d1x1 beta."])]
    examples = make_format_examples(long_doc, bert, 32, format="doc-sentences")
    assert examples.counts["split_sentences"] == 1
    assert sum(len(_inner(bert, ex)) for ex in examples) == sum(
        len(bert.tokenize(s)) for s in long_doc[0].sentences
    )


def test_mlm_blocks_are_full_length(bert):
    examples = make_mlm_examples(DOCS, bert, max_length=40)
    assert all(len(ex["input_ids"]) == 40 for ex in examples[:-1])
    assert 2 < len(examples[-1]["input_ids"]) <= 40
    n_tokens = sum(len(bert.tokenize(s)) for d in DOCS for s in d.sentences)
    assert sum(len(_inner(bert, ex)) for ex in examples) == n_tokens + len(DOCS) - 1


def test_build_pretraining_dataset_dispatches_by_objective(bert):
    mlm = build_pretraining_dataset(DOCS, bert, "mlm", max_length=48)
    nsp = build_pretraining_dataset(DOCS, bert, "mlm+nsp", max_length=48)
    sop = build_pretraining_dataset(DOCS, bert, "mlm+sop", max_length=48)
    assert all(set(ex) == {"input_ids", "token_type_ids", "word_ids"} for ex in mlm)
    assert all("next_sentence_label" in ex for ex in nsp)
    assert all("sentence_order_label" in ex for ex in sop)
    no_label = build_pretraining_dataset(DOCS, bert, "mlm", max_length=48, format="segment-pair")
    assert all("next_sentence_label" not in ex for ex in no_label)
    blocks = build_pretraining_dataset(DOCS, bert, "mlm", max_length=48, format="blocks")
    assert len(blocks[0]["input_ids"]) == 48
    with pytest.raises(ValueError, match="objective='mlm\\+mlm' is unknown.*mlm\\+sop"):
        build_pretraining_dataset(DOCS, bert, "mlm+mlm")
    with pytest.raises(ValueError, match="needs a pair format"):
        build_pretraining_dataset(DOCS, bert, "mlm+nsp", format="full-sentences")


def test_plain_sentence_lists_are_accepted(bert):
    lists = [d.sentences for d in DOCS[:5]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing skipped, so no warning
        assert make_sop_examples(lists, bert, 64, seed=1) == make_sop_examples(
            DOCS[:5], bert, 64, seed=1
        )


# ----- sentences are encoded as in running text (byte-level BPE keeps the space) --------------

STARTS = ["It", "The", "This", "Then", "Python"]


def make_prose(n_docs=30, seed=1):
    """Documents of capitalised sentences, like real prose: "It alpha beta. The gamma."."""
    rng = random.Random(seed)
    return [
        Document(
            title=f"prose{d}",
            sentences=[
                rng.choice(STARTS) + " " + " ".join(rng.choice(WORDS) for _ in range(4)) + "."
                for _ in range(rng.randint(2, 6))
            ],
        )
        for d in range(n_docs)
    ]


PROSE = make_prose()


@pytest.fixture(scope="module")
def cased_bpe():
    return train_tokenizer("roberta", [d.text for d in PROSE], vocab_size=320)


def test_sentences_get_the_pieces_of_running_text(cased_bpe):
    tokenized, _ = tokenize_documents(PROSE, cased_bpe)
    for doc, sentences in zip(PROSE, tokenized):
        running = cased_bpe.encode(doc.text, add_special_tokens=False)
        joined = concat_segments(sentences)
        assert joined[0] == running["input_ids"]  # the same ids as the document's own text
        assert joined[1] == running["word_ids"]  # and the same words (whole-word masking)


def test_a_sentence_first_word_is_the_same_token_as_mid_text(cased_bpe):
    tokenized, _ = tokenize_documents(PROSE, cased_bpe)
    tokens = cased_bpe.convert_ids_to_tokens
    checked = 0
    for doc, sentences in zip(PROSE, tokenized):
        for i, (text, (ids, _)) in enumerate(zip(doc.sentences, sentences)):
            first = text.split(" ")[0]
            mid_text = cased_bpe.tokenize("x " + first)[1:]  # the word after a space
            if i == 0:  # a document's first word has no space before it, as in its text
                assert tokens(ids[: len(cased_bpe.tokenize(first))]) == cased_bpe.tokenize(first)
            else:
                assert tokens(ids[: len(mid_text)]) == mid_text
                assert mid_text[0].startswith("Ġ")
                checked += 1
    assert checked > 50
    # The bug this guards against: "It" glued to the previous sentence's full stop.
    assert cased_bpe.tokenize(". It")[1:] == ["ĠIt"] and cased_bpe.tokenize(".It")[1:] != ["ĠIt"]


def test_packed_roberta_examples_decode_to_the_original_spacing(cased_bpe):
    for fmt in ("doc-sentences", "full-sentences"):
        examples = make_format_examples(PROSE, cased_bpe, 24, format=fmt)
        assert len(examples) > len(PROSE) // 2  # documents really were split into blocks
        decoded = "".join(
            cased_bpe.decode([i for i in ex["input_ids"][1:-1] if i != cased_bpe.sep_token_id])
            for ex in examples
        )
        assert decoded == "".join(d.text for d in PROSE)  # "warm. It" never "warm.It"


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_the_leading_space_changes_nothing_for_wordpiece_and_unigram(family):
    tok = train_tokenizer(family, [d.text for d in PROSE], vocab_size=120)
    tokenized, _ = tokenize_documents(PROSE, tok)
    alone = [[tok.encode_pieces([s])[0] for s in d.sentences] for d in PROSE]
    assert tokenized == alone


# ----- truncation keeps the A|B junction --------------------------------------------------------


def random_pair(rng):
    """Segments whose ids say where they come from: A = 0..n_a-1, B = 100..100+n_b-1."""
    n_a, n_b = rng.randint(1, 40), rng.randint(1, 40)
    return (list(range(n_a)), list(range(n_a))), (list(range(100, 100 + n_b)), list(range(n_b)))


def test_junction_truncation_keeps_a_tail_and_b_head_longest_first():
    rng = random.Random(0)
    cut_both = 0
    for _ in range(500):
        a, b = random_pair(rng)
        full_a, full_b = list(a[0]), list(b[0])
        budget = rng.randint(2, 60)
        removed, kept = truncate_pair(a, b, budget)
        assert len(a[0]) + len(b[0]) == min(budget, len(full_a) + len(full_b))
        assert removed == len(full_a) + len(full_b) - len(a[0]) - len(b[0])
        assert a[0] == full_a[len(full_a) - len(a[0]) :]  # A keeps its tail (lost its front)
        assert b[0] == full_b[: len(b[0])]  # B keeps its head (lost its back)
        assert a[1] == a[0] and [100 + w for w in b[1]] == b[0]  # word ids cut alongside
        assert kept and a[0][-1] == full_a[-1] and b[0][0] == full_b[0]  # the junction survives
        # Longest first: a segment is only cut while it is the longer one (B on a tie).
        cut_a, cut_b = len(a[0]) < len(full_a), len(b[0]) < len(full_b)
        if cut_a and cut_b:
            assert abs(len(a[0]) - len(b[0])) <= 1
            cut_both += 1
        elif cut_a:
            assert len(a[0]) >= len(b[0]) == len(full_b)
        elif cut_b:
            assert len(b[0]) >= len(a[0]) - 1 and len(a[0]) == len(full_a)
    assert cut_both > 100


def test_random_truncation_is_berts_rule_and_often_cuts_the_junction():
    rng = random.Random(1)
    kept_count = trials = 0
    for trial in range(300):
        a, b = random_pair(rng)
        full_a, full_b = list(a[0]), list(b[0])
        if len(full_a) + len(full_b) <= 20:
            continue
        trials += 1
        removed, kept = truncate_pair(a, b, 20, "random", random.Random(trial))
        assert len(a[0]) + len(b[0]) == 20 and removed == len(full_a) + len(full_b) - 20
        assert kept == (a[0][-1] == full_a[-1] and b[0][0] == full_b[0])
        kept_count += kept
    assert 0 < kept_count < trials / 2
    with pytest.raises(ValueError, match="pass rng"):
        truncate_pair(([1, 2], [0, 1]), ([3, 4], [0, 1]), 2, "random")
    with pytest.raises(ValueError, match="truncation='middle' is unknown"):
        truncate_pair(([1], [0]), ([2], [0]), 2, "middle")


@pytest.mark.parametrize("builder", [make_sop_examples, make_nsp_examples])
def test_pair_builders_keep_every_junction_and_count_it(bert, builder):
    examples = builder(DOCS, bert, max_length=24, seed=0)
    assert examples.counts["truncated_tokens"] > 5 * len(examples)  # most pairs are cut
    assert examples.counts["junction_kept"] == len(examples)
    assert junction_survival(examples) == 1.0
    before = builder(DOCS, bert, max_length=24, seed=0, truncation="random")
    assert junction_survival(before) < 0.5  # BERT's random ends cut most junctions here
    with pytest.raises(ValueError, match="truncation='front' is unknown"):
        builder(DOCS, bert, max_length=24, seed=0, truncation="front")


def test_sop_pairs_end_and_start_at_the_sentence_boundary(bert):
    """A's last token ends a sentence (its full stop) and B's first token starts one (its dDxS
    marker), swapped or not: the junction is intact however hard the cut."""
    for ex in make_sop_examples(DOCS, bert, max_length=20, seed=0):
        a, b = segments(bert, ex)
        tokens_a, tokens_b = bert.convert_ids_to_tokens(a), bert.convert_ids_to_tokens(b)
        assert tokens_a[-1] == "."  # every sentence of DOCS ends with one
        assert re.match(r"d\d*(x\d*)?$", tokens_b[0]), tokens_b  # "d", "d3x6": not "delta"


def test_junction_survival_needs_pair_counts():
    with pytest.raises(ValueError, match="no junction count"):
        junction_survival(Examples([{"input_ids": [1]}]))
    with pytest.raises(ValueError, match="No examples"):
        junction_survival(Examples([], counts={"junction_kept": 0}))
