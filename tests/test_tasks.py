"""Offline fine-tuning tasks: word order (classification), word classes (tagging), cloze QA.

Checked on a small generated corpus of English-like sentences, with the BERT (WordPiece) and
RoBERTa (byte-level BPE) tokenizers, so the token layouts of both families are covered."""

import random
import re
from collections import Counter

import pytest

from course_lib.data import Corpus, Document
from course_lib.data.tasks import (
    IGNORE_INDEX,
    WORD_CLASSES,
    Task,
    build_task,
    cloze_question,
    make_cloze_qa_examples,
    make_source_examples,
    make_word_class_examples,
    make_word_order_examples,
    shuffle_words,
    source_of,
    swap_two_words,
    word_class,
)
from course_lib.tokenization import train_tokenizer

NOUNS = "parser module value buffer socket thread configuration exception argument".split()
ADJS = "readable optional useful careless numerous".split()
VERBS = "returns reads writes parsing created opens closes".split()


def sentence(rng: random.Random) -> str:
    n1, n2 = rng.sample(NOUNS, 2)
    return (
        f"The {n1} {rng.choice(VERBS)} a {rng.choice(ADJS)} {n2} of {rng.randint(2, 99)} "
        f"items, and it is {rng.choice(['quickly', 'slowly', 'silently'])} done."
    )


def make_corpus(n_docs=40, seed=0) -> Corpus:
    rng = random.Random(seed)
    # Titles as in the built-in corpus: the language reference and the library's docstrings.
    docs = [
        Document(
            f"{'topics' if d % 3 == 0 else 'stdlib'}/doc{d}",
            [sentence(rng) for _ in range(rng.randint(3, 7))],
        )
        for d in range(n_docs)
    ]
    return Corpus(train=docs[:32], validation=docs[32:], name="toy")


CORPUS = make_corpus()


@pytest.fixture(scope="module", params=["bert", "roberta"])
def tokenizer(request):
    return train_tokenizer(request.param, CORPUS.texts("all"), vocab_size=400)


@pytest.fixture(scope="module")
def bert():
    return train_tokenizer("bert", CORPUS.texts("all"), vocab_size=400)


# ----- word classes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word, tag",
    [
        ("The", "DET"),
        ("it", "PRON"),
        ("of", "ADP"),
        ("and", "CONJ"),
        ("is", "AUX"),
        ("quickly", "ADV"),
        ("configuration", "NOUN"),
        ("readable", "ADJ"),
        ("parsing", "VERB"),
        ("created", "VERB"),
        ("42", "NUM"),
        ("3.14", "NUM"),
        (",", "PUNCT"),
        ("()", "PUNCT"),
        ("python", "OTHER"),
        ("string", "OTHER"),
        ("only", "OTHER"),
        ("bed", "OTHER"),
        ("expression1", "OTHER"),
    ],
)
def test_word_class_rules(word, tag):
    assert word_class(word) == tag


def test_word_class_rejects_empty_word():
    with pytest.raises(ValueError, match="non-empty"):
        word_class("  ")


# ----- classification: word order -----------------------------------------------------------------


def test_swap_two_words_swaps_exactly_two_and_never_the_first():
    rng = random.Random(0)
    original = "The parser reads a readable buffer of items quickly"
    for _ in range(50):
        swapped = swap_two_words(original, rng)
        a, b = original.split(), swapped.split()
        changed = [i for i in range(len(a)) if a[i] != b[i]]
        assert len(changed) == 2 and 0 not in changed
        i, j = changed
        assert (a[i], a[j]) == (b[j], b[i])
    assert swap_two_words("Only words", rng) is None  # one candidate: the first never moves
    assert swap_two_words("Return x, y.", rng) is None  # "x," and "y." are not plain words
    assert swap_two_words("See this this", rng) is None  # swapping equal words changes nothing


def test_shuffle_words_moves_only_plain_words():
    rng = random.Random(0)
    original = "The parser reads a readable buffer, of 42 items quickly."
    a = original.split()
    fixed = [i for i, w in enumerate(a) if i == 0 or not w.isalpha()]
    outcomes = set()
    for _ in range(50):
        b = shuffle_words(original, rng).split()
        assert b != a and sorted(b) == sorted(a)
        assert all(a[i] == b[i] for i in fixed)  # "The", "buffer,", "42", "quickly." stay
        outcomes.add(tuple(b))
    assert len(outcomes) > 10  # a real permutation, not one fixed move
    assert shuffle_words("Only words", rng) is None
    assert shuffle_words("See this this", rng) is None


@pytest.mark.parametrize("corruption, moved", [("shuffle", None), ("swap", 2)])
def test_word_order_corruptions(bert, corruption, moved):
    examples = make_word_order_examples(CORPUS.train, bert, n=40, seed=0, corruption=corruption)
    originals = {" ".join(sorted(s.split())): s.split() for s in CORPUS.sentences("train")}
    for e in examples:
        if e["labels"] == 1:
            words = e["text"].split()
            source = originals[" ".join(sorted(words))]
            changed = sum(x != y for x, y in zip(words, source))
            assert changed >= 2 and (moved is None or changed == moved)
    with pytest.raises(ValueError, match="corruption"):
        make_word_order_examples(CORPUS.train, bert, corruption="reverse")


def test_word_order_examples_are_balanced_and_encoded(bert):
    examples = make_word_order_examples(CORPUS.train, bert, max_length=64, seed=0)
    originals = set(CORPUS.sentences("train"))
    counts = Counter(e["labels"] for e in examples)
    assert abs(counts[0] - counts[1]) <= 1 and counts[0] > 20
    for e in examples:
        assert e["input_ids"] == bert.encode(e["text"])["input_ids"]
        assert len(e["input_ids"]) <= 64
        if e["labels"] == 0:
            assert e["text"] in originals
        else:
            assert e["text"] not in originals
            # a permutation of one original sentence's words
            assert any(sorted(e["text"].split()) == sorted(s.split()) for s in originals)


def test_word_order_is_deterministic_and_respects_n_and_max_length(bert):
    a = make_word_order_examples(CORPUS.train, bert, n=30, seed=3)
    b = make_word_order_examples(CORPUS.train, bert, n=30, seed=3)
    c = make_word_order_examples(CORPUS.train, bert, n=30, seed=4)
    assert len(a) == 30 and [e["text"] for e in a] == [e["text"] for e in b]
    assert [e["text"] for e in a] != [e["text"] for e in c]
    short = make_word_order_examples(CORPUS.train, bert, max_length=12)
    assert len(short) == 0 and short.counts["too_long"] > 0


# ----- classification: source ----------------------------------------------------------------------


def test_source_examples_are_balanced_and_labelled_by_title(bert):
    examples = make_source_examples(CORPUS.train, bert, n=40, seed=0)
    assert [e["labels"] for e in examples] == [0, 1] * 20
    by_source = {s: source_of(d.title) for d in CORPUS.train for s in d.sentences}
    for e in examples:
        assert by_source[e["text"]] == ("topics", "stdlib")[e["labels"]]
        assert e["input_ids"] == bert.encode(e["text"])["input_ids"]
    # without n: as many of each class as the smaller class has
    every = make_source_examples(CORPUS.train, bert)
    topics = sum(len(d.sentences) for d in CORPUS.train if d.title.startswith("topics/"))
    assert Counter(e["labels"] for e in every)[0] in (topics, topics - 1)
    assert source_of("stdlib/email.mime") == "stdlib" and source_of("plain") == "plain"


def test_source_examples_explain_missing_classes(bert):
    with pytest.raises(ValueError, match="titles start with"):
        make_source_examples(CORPUS.train, bert, labels=("topics", "howto"))
    with pytest.raises(TypeError, match="titles"):
        make_source_examples([["a sentence of enough words to use here"]], bert)


# ----- tagging: word classes ----------------------------------------------------------------------


def test_word_class_labels_sit_on_the_first_token_of_each_word(tokenizer):
    examples = make_word_class_examples(CORPUS.train, tokenizer, max_length=64, n=20, seed=0)
    assert len(examples) == 20
    for e in examples:
        encoding = tokenizer.backend.encode(e["text"], add_special_tokens=False)
        word_ids = encoding.word_ids
        assert len(e["labels"]) == len(e["input_ids"])
        # strip the specials: one before the sentence, the rest after it
        inner = e["labels"][1 : 1 + len(word_ids)]
        assert all(
            lab == IGNORE_INDEX for lab in e["labels"][:1] + e["labels"][1 + len(word_ids) :]
        )
        firsts = [i for i, w in enumerate(word_ids) if i == 0 or w != word_ids[i - 1]]
        assert [i for i, lab in enumerate(inner) if lab != IGNORE_INDEX] == firsts
        tags = [WORD_CLASSES[lab] for lab in inner if lab != IGNORE_INDEX]
        assert tags == [word_class(w) for w in e["words"]]
        assert len(e["words"]) == len(set(word_ids))


def test_word_class_examples_find_the_classes_of_the_toy_sentences(bert):
    e = make_word_class_examples(
        [["The parser returns a readable value of 42 items, and it is quickly done."]], bert
    )[0]
    tags = [WORD_CLASSES[lab] for lab in e["labels"] if lab != IGNORE_INDEX]
    assert tags == [
        "DET",
        "OTHER",
        "OTHER",
        "DET",
        "ADJ",
        "OTHER",
        "ADP",
        "NUM",
        "OTHER",
        "PUNCT",
        "CONJ",
        "PRON",
        "AUX",
        "ADV",
        "OTHER",
        "PUNCT",
    ]


# ----- extractive QA: cloze questions -------------------------------------------------------------


def test_cloze_question_replaces_the_answer_with_what():
    s = "The parser reads a buffer."
    assert cloze_question(s, s.index("buffer"), "buffer") == "The parser reads a what?"
    assert cloze_question(s, s.index("parser"), "parser") == "The what reads a buffer?"


def test_cloze_qa_answer_span_decodes_to_the_answer(tokenizer):
    examples = make_cloze_qa_examples(CORPUS.train, tokenizer, max_length=96, n=40, seed=0)
    assert len(examples) == 40
    for e in examples:
        start, end = e["start_positions"], e["end_positions"]
        assert e["context_start"] <= start <= end < e["context_end"] < len(e["input_ids"])
        assert len(e["input_ids"]) <= 96
        assert tokenizer.decode(e["input_ids"][start : end + 1]).strip() == e["answer"].lower()
        context_ids = tokenizer.backend.encode(e["context"], add_special_tokens=False).ids
        assert e["input_ids"][e["context_start"] : e["context_end"]] == context_ids
        # the question is one context sentence with the answer replaced by "what"
        assert e["question"].endswith("?") and re.search(r"\bwhat\b", e["question"])
        pattern = re.escape(e["question"][:-1]).replace("what", re.escape(e["answer"]), 1)
        assert re.search(pattern, e["context"])
        found = re.findall(rf"(?<!\w){re.escape(e['answer'].lower())}(?!\w)", e["context"].lower())
        assert len(found) == 1
        if tokenizer.family == "wordpiece":  # segment B = the context and its [SEP]
            types = e["token_type_ids"]
            assert set(types[: e["context_start"]]) == {0} and set(types[e["context_start"] :]) == {
                1
            }


def test_cloze_qa_drops_neighbours_to_fit_and_skips_what_cannot(bert):
    long = [sentence(random.Random(i)) for i in range(6)]
    fitted = make_cloze_qa_examples([long], bert, max_length=64, context_sentences=3, seed=0)
    assert fitted and all(len(e["input_ids"]) <= 64 for e in fitted)
    assert all(e["context"].count(".") < 3 for e in fitted)  # fewer than 3 sentences fit
    none = make_cloze_qa_examples([long], bert, max_length=20, seed=0)
    assert len(none) == 0 and none.counts["too_long"] == len(long)


# ----- tasks from a corpus ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind",
    [
        ("source", "classification"),
        ("word_order", "classification"),
        ("word_class", "tagging"),
        ("cloze_qa", "qa"),
    ],
)
def test_build_task_tests_on_other_documents(bert, name, kind):
    task = build_task(name, CORPUS, bert, train_size=50, test_size=20, seed=0)
    assert task.kind == kind and len(task.train) == 50 and len(task.test) == 20
    assert task.pad_token_id == bert.pad_token_id
    field = "context" if kind == "qa" else "text"
    validation = " ".join(CORPUS.texts("validation"))
    train_text = " ".join(CORPUS.texts("train"))
    for e in task.test:
        first = e[field].split(".")[0]
        assert first in validation or name == "word_order"
    if name != "word_order":  # these texts are unchanged sentences: check where they are from
        assert all(e[field].split(".")[0] in train_text for e in task.train)
    assert name in task.summary()


def test_task_label_counts_and_majority_baseline(bert):
    task = build_task("word_class", CORPUS, bert, train_size=60, test_size=30)
    train, test = task.label_counts("train"), task.label_counts("test")
    most = train.most_common(1)[0][0]
    assert task.majority_baseline() == pytest.approx(test[most] / sum(test.values()))
    assert task.num_labels == len(WORD_CLASSES)
    order = build_task("word_order", CORPUS, bert, train_size=40, test_size=20)
    assert order.majority_baseline() == pytest.approx(0.5, abs=0.05)
    qa = build_task("cloze_qa", CORPUS, bert, train_size=10, test_size=5)
    with pytest.raises(ValueError, match="spans"):
        qa.label_counts()


def test_bad_inputs_get_clear_errors(bert):
    with pytest.raises(ValueError, match="unknown"):
        build_task("sentiment", CORPUS, bert)
    with pytest.raises(TypeError, match="Corpus"):
        build_task("word_order", CORPUS.train, bert)
    with pytest.raises(ValueError, match="no validation"):
        build_task("word_order", Corpus(CORPUS.train, []), bert)
    with pytest.raises(TypeError, match="not a Corpus"):
        make_word_order_examples(CORPUS, bert)
    with pytest.raises(TypeError, match="CourseTokenizer"):
        make_word_class_examples(CORPUS.train, bert.backend)
    with pytest.raises(ValueError, match="positive number"):
        make_cloze_qa_examples(CORPUS.train, bert, n=0)
    with pytest.raises(ValueError, match="kind"):
        Task("x", "regression", [], [], (), 0)
