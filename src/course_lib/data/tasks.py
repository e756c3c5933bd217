"""Fine-tuning tasks built offline from a corpus: one per kind of BERT task head.

Nothing is downloaded or annotated by hand: the labels come from rules applied to the corpus's
own sentences, chosen so that knowing the language (what pretraining teaches) should help.

- `word_order` ([CLS] classification, BertForSequenceClassification): is the sentence as written
  (0) or were its words shuffled (1)? A small grammaticality judgement, like GLUE's CoLA.
- `word_class` (token tagging, BertForTokenClassification): a coarse word class per word
  (determiner, pronoun, preposition, auxiliary, adverb, noun, ...) from a hand-made lexicon of
  function words plus suffix rules. Open-class words never seen in fine-tuning must be
  recognised from what the encoder already knows about them.
- `cloze_qa` (extractive QA, BertForQuestionAnswering): a sentence of the context with one
  content word replaced by "what" becomes the question; the answer is that word's span in the
  context ("cloze questions", as in Lewis et al. 2019, Unsupervised Question Answering by
  Cloze Translation).

Training examples come from `corpus.train`, test examples from `corpus.validation`: different
documents, so the test sentences are unseen in fine-tuning (and, with the course's pretraining
on `corpus.train`, unseen in pretraining too). Examples are dicts of Python lists with the
names transformers uses (input_ids, token_type_ids, attention_mask, labels, start_positions,
end_positions); `course_lib.training.finetune.TaskCollator` pads them into batches.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from course_lib.data.corpus import Corpus, Document
from course_lib.data.pairs import Examples
from course_lib.labels import IGNORE_INDEX
from course_lib.tokenization.tokenizer import CourseTokenizer

KINDS = ("classification", "tagging", "qa")

# ----- the word-class lexicon ---------------------------------------------------------------------

# Closed classes: short lists cover them completely. A word in two lists (e.g. "that": determiner
# or conjunction) keeps the first class in WORD_CLASSES order; the tags are a rule, not a parse.
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "DET": frozenset(
        "the a an this that these those each every some any no all both either neither "
        "another such what which whose".split()
    ),
    "PRON": frozenset(
        "it its itself they them their theirs themselves you your yours yourself we us our ours "
        "he him his she her hers i me my mine one ones who whom whoever whatever something "
        "anything nothing everything someone anyone everyone".split()
    ),
    "ADP": frozenset(
        "of in to for with on at by from into onto as about over under after before between "
        "through during without within against among upon via per than like until since "
        "across along around behind beyond inside outside toward towards".split()
    ),
    "CONJ": frozenset(
        "and or but nor so yet if when whenever while because although though unless whether "
        "where wherever once then otherwise".split()
    ),
    "AUX": frozenset(
        "is are was were be been being am can could may might must shall should will would "
        "has have had having do does did not".split()
    ),
}
# Open classes by suffix, longest suffix first. Words of fewer than 5 letters are left OTHER
# (too short for a suffix to mean anything: "only", "sing", "bed").
SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ically", "ADV"),
    ("ation", "NOUN"),
    ("ition", "NOUN"),
    ("ment", "NOUN"),
    ("ness", "NOUN"),
    ("sion", "NOUN"),
    ("tion", "NOUN"),
    ("ence", "NOUN"),
    ("ance", "NOUN"),
    ("ship", "NOUN"),
    ("ity", "NOUN"),
    ("able", "ADJ"),
    ("ible", "ADJ"),
    ("less", "ADJ"),
    ("ical", "ADJ"),
    ("ive", "ADJ"),
    ("ous", "ADJ"),
    ("ful", "ADJ"),
    ("ly", "ADV"),
    ("ing", "VERB"),
    ("ed", "VERB"),
)
# Frequent words a suffix rule would get wrong.
SUFFIX_EXCEPTIONS = frozenset(
    "string strings thing things bring king ring spring apply reply supply family assembly "
    "multiply early only fly need speed feed seed embed embedded bed red hundred".split()
)
WORD_CLASSES = (
    "OTHER",
    "DET",
    "PRON",
    "ADP",
    "CONJ",
    "AUX",
    "ADV",
    "ADJ",
    "NOUN",
    "VERB",
    "NUM",
    "PUNCT",
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def word_class(word: str) -> str:
    """The coarse class of one word (a tokenizer 'word': punctuation is its own word).

    PUNCT and NUM by form, then the function-word lists, then suffix rules for open classes;
    everything else is OTHER (mostly nouns, verbs and names without a telling suffix).
    """
    w = word.strip().lower()
    if not w:
        raise ValueError("word_class needs a non-empty word.")
    if not any(c.isalnum() for c in w):
        return "PUNCT"
    if _NUMBER.fullmatch(w):
        return "NUM"
    for tag in WORD_CLASSES:
        if w in FUNCTION_WORDS.get(tag, ()):
            return tag
    if w.isalpha() and len(w) >= 5 and w not in SUFFIX_EXCEPTIONS:
        for suffix, tag in SUFFIXES:
            if w.endswith(suffix):
                return tag
    return "OTHER"


# ----- the task container -----------------------------------------------------------------------


@dataclass
class Task:
    """A fine-tuning task: train and test examples plus what a model needs to know about them."""

    name: str
    kind: str  # "classification", "tagging" or "qa"
    train: Examples
    test: Examples
    label_names: tuple[str, ...]
    pad_token_id: int
    description: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is invalid: choose one of {KINDS}.")

    @property
    def num_labels(self) -> int:
        """Classes of the task head (QA heads always predict 2 numbers, start and end)."""
        return len(self.label_names) if self.kind != "qa" else 2

    def label_counts(self, split: str = "train") -> Counter:
        """How often each label occurs in a split (scored tokens only for tagging)."""
        examples = self._split(split)
        if self.kind == "qa":
            raise ValueError("a QA task has spans, not labels; see the examples' 'answer'.")
        counts: Counter = Counter()
        for e in examples:
            labels = e["labels"] if self.kind == "tagging" else [e["labels"]]
            counts.update(self.label_names[i] for i in labels if i != IGNORE_INDEX)
        return counts

    def majority_baseline(self) -> float:
        """Test accuracy of always predicting the most frequent training label (a floor to beat)."""
        most = self.label_counts("train").most_common(1)[0][0]
        test = self.label_counts("test")
        return test[most] / sum(test.values())

    def summary(self) -> str:
        """One line: name, kind, sizes and labels."""
        labels = f"{len(self.label_names)} labels" if self.kind != "qa" else "answer spans"
        return (
            f"{self.name} ({self.kind}): {len(self.train):,} train / {len(self.test):,} "
            f"test examples, {labels}"
        )

    def _split(self, split: str) -> Examples:
        if split not in ("train", "test"):
            raise ValueError(f"split={split!r} is unknown; use 'train' or 'test'.")
        return self.train if split == "train" else self.test


# ----- helpers ------------------------------------------------------------------------------------


def _sentences(documents: Sequence[Document] | Sequence[Sequence[str]]) -> list[str]:
    if isinstance(documents, (Corpus, str)):
        raise TypeError("Pass a list of documents (e.g. corpus.train), not a Corpus or a string.")
    sentences = [s for d in documents for s in (d.sentences if hasattr(d, "sentences") else d)]
    if not sentences:
        raise ValueError("No sentences: the documents are empty. Check the corpus split.")
    return sentences


def _check_n(n: int | None) -> None:
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ValueError(f"n={n!r} is invalid: expected a positive number of examples or None.")


def _check_tokenizer(tokenizer: Any) -> None:
    if not isinstance(tokenizer, CourseTokenizer):
        raise TypeError(
            f"expected a CourseTokenizer (course_lib.tokenization.train_tokenizer), got "
            f"{type(tokenizer).__name__}."
        )


def _words_of(tokenizer: CourseTokenizer, text: str) -> tuple[list[int], list[int], list[str]]:
    """Token ids, word ids and the text of each tokenizer word (from its characters' offsets)."""
    encoding = tokenizer.backend.encode(text, add_special_tokens=False)
    spans: dict[int, list[int]] = {}
    for word_id, (start, end) in zip(encoding.word_ids, encoding.offsets):
        if word_id is None:
            continue
        span = spans.setdefault(word_id, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    n_words = max(spans, default=-1) + 1
    words = [text[spans[i][0] : spans[i][1]].strip() if i in spans else "" for i in range(n_words)]
    word_ids = [w if w is not None else -1 for w in encoding.word_ids]
    return list(encoding.ids), word_ids, words


# ----- classification: word order -----------------------------------------------------------------


def swap_two_words(sentence: str, rng: random.Random) -> str | None:
    """The sentence with two different alphabetic words swapped (never the first word, so a
    capital letter does not give it away); None if it has fewer than two such words."""
    words = sentence.split()
    candidates = [i for i, w in enumerate(words) if i > 0 and w.isalpha()]
    for _ in range(10):
        if len(candidates) < 2:
            return None
        i, j = rng.sample(candidates, 2)
        if words[i].lower() != words[j].lower():
            words[i], words[j] = words[j], words[i]
            return " ".join(words)
    return None


def shuffle_words(sentence: str, rng: random.Random) -> str | None:
    """The sentence with its alphabetic words (but the first) in a random new order; punctuation
    and other tokens stay in place. None if fewer than two such words differ."""
    words = sentence.split()
    positions = [i for i, w in enumerate(words) if i > 0 and w.isalpha()]
    if len({words[i].lower() for i in positions}) < 2:
        return None
    original = [words[i] for i in positions]
    order = original[:]
    while [w.lower() for w in order] == [w.lower() for w in original]:
        rng.shuffle(order)
    for i, w in zip(positions, order):
        words[i] = w
    return " ".join(words)


CORRUPTIONS: dict[str, Callable[[str, random.Random], str | None]] = {
    "shuffle": shuffle_words,
    "swap": swap_two_words,
}


def make_word_order_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 64,
    n: int | None = None,
    seed: int = 0,
    min_words: int = 6,
    corruption: str = "shuffle",
) -> Examples:
    """Balanced examples: each sentence used once, as written (label 0) or corrupted (label 1):
    "shuffle" reorders its words (see `shuffle_words`), "swap" swaps two (`swap_two_words`, much
    harder). Sentences longer than max_length tokens are skipped, not truncated."""
    _check_tokenizer(tokenizer)
    _check_n(n)
    if corruption not in CORRUPTIONS:
        raise ValueError(
            f"corruption={corruption!r} is invalid: choose one of {tuple(CORRUPTIONS)}."
        )
    corrupt = CORRUPTIONS[corruption]
    rng = random.Random(seed)
    sentences = [s for s in _sentences(documents) if len(s.split()) >= min_words]
    rng.shuffle(sentences)
    examples, skipped = [], Counter()
    for sentence in sentences:
        if n is not None and len(examples) == n:
            break
        label = len(examples) % 2  # alternate: exactly balanced; the order is random anyway
        text = corrupt(sentence, rng) if label == 1 else sentence
        if text is None:
            skipped["too_few_words_to_move"] += 1
            continue
        encoded = tokenizer.encode(text, truncation=False)
        if len(encoded["input_ids"]) > max_length:
            skipped["too_long"] += 1
            continue
        del encoded["word_ids"]
        examples.append({**encoded, "labels": label, "text": text})
    return Examples(examples, skipped=sum(skipped.values()), counts=dict(skipped))


# ----- classification: which part of the documentation -------------------------------------------


def source_of(title: str) -> str:
    """The part of the corpus a document belongs to: its title up to the first "/" (the built-in
    corpus has "topics/..." for the language reference and "stdlib/..." for library docstrings)."""
    return title.split("/", 1)[0]


def make_source_examples(
    documents: Sequence[Document],
    tokenizer: CourseTokenizer,
    max_length: int = 64,
    n: int | None = None,
    seed: int = 0,
    min_words: int = 6,
    labels: Sequence[str] = ("topics", "stdlib"),
) -> Examples:
    """Which part of the documentation is a sentence from? Label i = labels[i] (by `source_of`
    the document title). Classes are balanced: they take turns, so each gets n / len(labels)."""
    _check_tokenizer(tokenizer)
    _check_n(n)
    if any(not hasattr(d, "title") for d in documents):
        raise TypeError("make_source_examples needs Documents (with titles), e.g. corpus.train.")
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {label: [] for label in labels}
    for doc in documents:
        if source_of(doc.title) in pools:
            pools[source_of(doc.title)].extend(
                s for s in doc.sentences if len(s.split()) >= min_words
            )
    empty = [label for label, pool in pools.items() if not pool]
    if empty:
        found = sorted({source_of(d.title) for d in documents})
        raise ValueError(
            f"no sentences from {empty}: document titles start with {found}; pass "
            "labels=... naming two of those."
        )
    for pool in pools.values():
        rng.shuffle(pool)
    examples, skipped = [], Counter()
    while all(pools.values()) and (n is None or len(examples) < n):
        label = len(examples) % len(labels)  # take turns: balanced classes
        sentence = pools[labels[label]].pop()
        encoded = tokenizer.encode(sentence, truncation=False)
        if len(encoded["input_ids"]) > max_length:
            skipped["too_long"] += 1
            continue
        del encoded["word_ids"]
        examples.append({**encoded, "labels": label, "text": sentence})
    return Examples(examples, skipped=sum(skipped.values()), counts=dict(skipped))


# ----- tagging: word classes ----------------------------------------------------------------------


def make_word_class_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 64,
    n: int | None = None,
    seed: int = 0,
    min_words: int = 4,
) -> Examples:
    """One example per sentence: the word class of every word (see `word_class`) on the word's
    first token; later pieces of a word and special tokens get -100 (not scored), as in
    transformers' token-classification examples."""
    _check_tokenizer(tokenizer)
    rng = random.Random(seed)
    _check_n(n)
    tag_id = {tag: i for i, tag in enumerate(WORD_CLASSES)}
    sentences = _sentences(documents)
    rng.shuffle(sentences)
    examples, skipped = [], Counter()
    for sentence in sentences:
        if n is not None and len(examples) == n:
            break
        if len(sentence.split()) < min_words:
            skipped["too_short"] += 1
            continue
        ids, word_ids, words = _words_of(tokenizer, sentence)
        if len(ids) + tokenizer.num_special_tokens_to_add() > max_length:
            skipped["too_long"] += 1
            continue
        labels, previous = [], None
        for w in word_ids:
            labels.append(
                tag_id[word_class(words[w])] if w >= 0 and w != previous else IGNORE_INDEX
            )
            previous = w
        input_ids, types = tokenizer.build_inputs_with_special_tokens(ids)
        # The specials wrap the sentence: one before it, the rest after it.
        labels = [IGNORE_INDEX] + labels + [IGNORE_INDEX] * (len(input_ids) - len(labels) - 1)
        examples.append(
            {
                "input_ids": input_ids,
                "token_type_ids": types,
                "attention_mask": [1] * len(input_ids),
                "labels": labels,
                "words": words,
                "text": sentence,
            }
        )
    return Examples(examples, skipped=sum(skipped.values()), counts=dict(skipped))


# ----- extractive QA: cloze questions -------------------------------------------------------------

_STRIP = ",.;:!?()\"'"


def _answer_candidates(sentence: str) -> list[tuple[int, str]]:
    """(character start, word) of content words a cloze question can ask about: alphabetic
    words of 4+ letters that are not function words, or numbers."""
    found = []
    for match in re.finditer(r"\S+", sentence):
        token = match.group()
        core = token.strip(_STRIP)
        if not core:
            continue
        lead = len(token) - len(token.lstrip(_STRIP))
        function_word = word_class(core) in FUNCTION_WORDS  # DET, PRON, ADP, CONJ or AUX
        is_content = core.isalpha() and len(core) >= 4 and not function_word
        if is_content or core.isdigit():
            found.append((match.start() + lead, core))
    return found


def cloze_question(sentence: str, start: int, answer: str) -> str:
    """The sentence with the answer (at character `start`) replaced by "what", ending in "?"."""
    question = sentence[:start] + "what" + sentence[start + len(answer) :]
    return question.rstrip().rstrip(".!;:") + "?"


def _token_span(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """First and last token (inclusive) covering characters [start, end)."""
    first = next(i for i, (s, e) in enumerate(offsets) if e > start)
    last = max(i for i, (s, e) in enumerate(offsets) if s < end)
    return first, last


def make_cloze_qa_examples(
    documents: Sequence[Document] | Sequence[Sequence[str]],
    tokenizer: CourseTokenizer,
    max_length: int = 128,
    n: int | None = None,
    seed: int = 0,
    context_sentences: int = 3,
    min_words: int = 6,
) -> Examples:
    """Question: one sentence with a content word replaced by "what". Context: that sentence
    among up to `context_sentences` neighbours of its document. Answer: the word's token span.

    The answer word occurs exactly once in the context (so the span is unambiguous). Each
    example keeps `context_start`/`context_end` (where the context's tokens are) for decoding.
    """
    _check_tokenizer(tokenizer)
    if context_sentences < 1:
        raise ValueError(f"context_sentences={context_sentences} must be >= 1.")
    rng = random.Random(seed)
    docs = [list(d.sentences) if hasattr(d, "sentences") else list(d) for d in documents]
    _sentences(docs)  # same checks as the other builders
    _check_n(n)
    places = [(d, k) for d, doc in enumerate(docs) for k in range(len(doc))]
    rng.shuffle(places)  # a random sentence of a random document next, until n are made
    examples, skipped = [], Counter()
    # In the [CLS] q [SEP] c [SEP] layout (or RoBERTa's <s> q </s></s> c </s>) the context
    # starts after the question and the separators in between.
    between = len(tokenizer.build_inputs_with_special_tokens([], [])[0]) - 1
    for d, k in places:
        if n is not None and len(examples) == n:
            break
        doc, sentence = docs[d], docs[d][k]
        if len(sentence.split()) < min_words:
            continue
        candidates = _answer_candidates(sentence)
        if not candidates:
            skipped["no_content_word"] += 1
            continue
        char_start, answer = rng.choice(candidates)
        question = cloze_question(sentence, char_start, answer)
        before = rng.randint(0, context_sentences - 1)
        lo, hi = max(0, k - before), min(len(doc), k - before + context_sentences)
        q_ids = tokenizer.backend.encode(question, add_special_tokens=False).ids
        while True:  # drop neighbours (the farther side first) until question + context fit
            context = " ".join(doc[lo:hi])
            c_enc = tokenizer.backend.encode(context, add_special_tokens=False)
            if len(q_ids) + len(c_enc.ids) + between + 1 <= max_length or hi - lo == 1:
                break
            if k - lo >= hi - 1 - k:
                lo += 1
            else:
                hi -= 1
        if len(q_ids) + len(c_enc.ids) + between + 1 > max_length:
            skipped["too_long"] += 1
            continue
        if len(re.findall(rf"(?<!\w){re.escape(answer.lower())}(?!\w)", context.lower())) != 1:
            skipped["answer_not_unique"] += 1
            continue
        a_start = sum(len(s) + 1 for s in doc[lo:k]) + char_start
        first, last = _token_span(c_enc.offsets, a_start, a_start + len(answer))
        input_ids, types = tokenizer.build_inputs_with_special_tokens(q_ids, c_enc.ids)
        offset = len(q_ids) + between
        examples.append(
            {
                "input_ids": input_ids,
                "token_type_ids": types,
                "attention_mask": [1] * len(input_ids),
                "start_positions": offset + first,
                "end_positions": offset + last,
                "context_start": offset,
                "context_end": offset + len(c_enc.ids),
                "question": question,
                "context": context,
                "answer": answer,
            }
        )
    return Examples(examples, skipped=sum(skipped.values()), counts=dict(skipped))


# ----- tasks from a corpus ------------------------------------------------------------------------

_BUILDERS: dict[str, tuple[str, Callable[..., Examples], str]] = {
    "source": (
        "classification",
        make_source_examples,
        "Is the sentence from the language reference (0) or a library docstring (1)?",
    ),
    "word_order": (
        "classification",
        make_word_order_examples,
        "Is the sentence as written (0) or were its words shuffled (1)?",
    ),
    "word_class": (
        "tagging",
        make_word_class_examples,
        "Coarse word class of every word, from a function-word lexicon and suffix rules.",
    ),
    "cloze_qa": (
        "qa",
        make_cloze_qa_examples,
        "Find the word that 'what' stands for: a span of the context.",
    ),
}
TASK_NAMES = tuple(_BUILDERS)
_LABELS = {
    "source": ("topics", "stdlib"),
    "word_order": ("original", "reordered"),
    "word_class": WORD_CLASSES,
    "cloze_qa": (),
}


def build_task(
    name: str,
    corpus: Corpus,
    tokenizer: CourseTokenizer,
    train_size: int | None = 2000,
    test_size: int | None = 500,
    max_length: int | None = None,
    seed: int = 0,
    **options: Any,
) -> Task:
    """Task `name` ("word_order", "word_class", "cloze_qa"): train examples from corpus.train,
    test examples from corpus.validation (other documents). max_length defaults to 64 for the
    single-sentence tasks and 128 for QA (question + context); `options` go to the builder
    (e.g. corruption="swap" for word_order, context_sentences=2 for cloze_qa)."""
    if name not in _BUILDERS:
        raise ValueError(f"task {name!r} is unknown; choose one of {TASK_NAMES}.")
    if not isinstance(corpus, Corpus):
        raise TypeError(
            f"build_task needs a Corpus (load_builtin_corpus()), got {type(corpus).__name__}."
        )
    if not corpus.validation:
        raise ValueError(
            "the corpus has no validation documents to test on; load it with "
            "validation_fraction > 0."
        )
    kind, builder, description = _BUILDERS[name]
    if max_length is None:
        max_length = 128 if kind == "qa" else 64
    train = builder(
        corpus.train, tokenizer, max_length=max_length, n=train_size, seed=seed, **options
    )
    test = builder(
        corpus.validation, tokenizer, max_length=max_length, n=test_size, seed=seed + 1, **options
    )
    if not train or not test:
        raise ValueError(
            f"task {name!r} produced {len(train)} train and {len(test)} test "
            f"examples; raise max_length (now {max_length}) or use more text."
        )
    info = {
        "max_length": max_length,
        "seed": seed,
        **options,
        "skipped_train": train.counts,
        "skipped_test": test.counts,
    }
    return Task(name, kind, train, test, _LABELS[name], tokenizer.pad_token_id, description, info)


__all__ = [
    "FUNCTION_WORDS",
    "IGNORE_INDEX",
    "KINDS",
    "CORRUPTIONS",
    "SUFFIXES",
    "TASK_NAMES",
    "WORD_CLASSES",
    "Task",
    "build_task",
    "cloze_question",
    "make_cloze_qa_examples",
    "make_word_class_examples",
    "make_source_examples",
    "make_word_order_examples",
    "shuffle_words",
    "source_of",
    "swap_two_words",
    "word_class",
]
