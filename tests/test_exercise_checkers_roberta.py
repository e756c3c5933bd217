"""Chapter 02 checkers: the right answer passes; the stub and typical mistakes are rejected with
a message that names the mistake."""

from collections import Counter

import pytest
import torch

from course_lib.data import make_format_examples, tokenize_documents
from course_lib.exercises.core import ExerciseError
from course_lib.exercises.roberta import (
    check_bpe_merge,
    check_dynamic_collator,
    check_from_byte_symbols,
    check_full_sentences,
    check_gradient_accumulation,
    check_position_ids,
    check_to_byte_symbols,
    reference_full_sentences,
)
from course_lib.objectives.masking import MaskingConfig, build_special_tokens_mask, mask_tokens
from course_lib.tokenization import train_tokenizer
from course_lib.tokenization.byte_level import (
    bpe_merge_step,
    bytes_to_unicode,
    merge_word,
    pair_counts,
)

# Tiny models: one torch thread is several times faster than two competing ones.
pytestmark = pytest.mark.usefixtures("one_thread")


def stub(*args, **kwargs):
    raise NotImplementedError()


# ----- position ids ------------------------------------------------------------------------------


def fairseq_positions(input_ids, padding_idx):
    real = (input_ids != padding_idx).long()
    return torch.cumsum(real, dim=1) * real + padding_idx


def test_position_ids_accepts_the_fairseq_rule(capsys):
    check_position_ids(fairseq_positions)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda ids, p: torch.arange(ids.shape[1]).expand_as(ids), "BERT's positions"),
        (lambda ids, p: fairseq_positions(ids, p) - (ids != p).long(), "off by one"),
        (lambda ids, p: torch.cumsum((ids != p).long(), 1) + p, "padding must get position"),
        (lambda ids, p: fairseq_positions(ids, 1), "assumed padding_idx = 1"),
        (
            lambda ids, p: torch.arange(ids.shape[1]).expand_as(ids) * (ids != p) + p + (ids != p),
            "left padding",
        ),
        (lambda ids, p: fairseq_positions(ids, p).float(), "integer"),
        (lambda ids, p: fairseq_positions(ids, p) + (ids != p).long(), "not padding_idx \\+ 2"),
    ],
)
def test_position_ids_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_position_ids(wrong)


# ----- dynamic masking collator ------------------------------------------------------------------


def pad(examples, pad_token_id):
    width = max(len(e) for e in examples)
    ids = torch.full((len(examples), width), pad_token_id)
    attention = torch.zeros_like(ids)
    for i, e in enumerate(examples):
        ids[i, : len(e)] = torch.tensor(e)
        attention[i, : len(e)] = 1
    return ids, attention


def collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    ids, attention = pad(examples, pad_token_id)
    special = build_special_tokens_mask(ids, special_ids, attention)
    ids, labels = mask_tokens(ids, special, mask_token_id, vocab_size, MaskingConfig(), generator)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def static_collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    return collate(
        examples,
        pad_token_id,
        mask_token_id,
        vocab_size,
        special_ids,
        torch.Generator().manual_seed(0),
    )  # re-seeded: the same masks every epoch


def global_rng_collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    torch.rand(1)  # ignores `generator`, draws from the global RNG
    return collate(
        examples,
        pad_token_id,
        mask_token_id,
        vocab_size,
        special_ids,
        torch.Generator().manual_seed(int(torch.randint(0, 2**30, (1,)))),
    )


def masks_padding(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    ids, attention = pad(examples, pad_token_id)
    special = build_special_tokens_mask(ids, [s for s in special_ids if s != pad_token_id])
    ids, labels = mask_tokens(ids, special, mask_token_id, vocab_size, MaskingConfig(), generator)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def all_mask(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    config = MaskingConfig(mask_replace_prob=1.0, random_replace_prob=0.0)
    ids, attention = pad(examples, pad_token_id)
    special = build_special_tokens_mask(ids, special_ids, attention)
    ids, labels = mask_tokens(ids, special, mask_token_id, vocab_size, config, generator)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def swapped_collate(*args):
    batch = collate(*args)
    return {**batch, "input_ids": batch["labels"], "labels": batch["input_ids"]}


def pads_labels_with_pad_id(
    examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator
):
    batch = collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator)
    batch["labels"] = batch["labels"].masked_fill(batch["attention_mask"] == 0, pad_token_id)
    return batch


def test_dynamic_collator_accepts_a_correct_collator(capsys):
    check_dynamic_collator(collate)
    assert "re-masks" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (static_collate, "static masking"),
        (global_rng_collate, "draw every random number from `generator`"),
        (masks_padding, "never mask padding"),
        (all_mask, "80/10/10"),
        (lambda *a: {"input_ids": pad(a[0], a[1])[0]}, "missing"),
        (lambda *a: {**collate(*a), "labels": pad(a[0], a[1])[0]}, "labels are never -100"),
        (swapped_collate, "input_ids and labels are swapped"),
        (pads_labels_with_pad_id, "give padding the label -100"),
    ],
)
def test_dynamic_collator_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_dynamic_collator(wrong)


# ----- FULL-SENTENCES packing --------------------------------------------------------------------


def full_sentences(documents, budget, sep_id):
    blocks, block = [], []
    for doc in documents:
        if block:
            if len(block) + 1 >= budget:
                blocks, block = blocks + [block], []
            else:
                block.append(sep_id)
        for sentence in doc:
            for start in range(0, len(sentence), budget):
                piece = sentence[start : start + budget]
                if len(block) + len(piece) > budget:
                    blocks, block = blocks + [block], []
                block = block + piece
    return blocks + [block] if block else blocks


def doc_sentences(documents, budget, sep_id):
    return [b for doc in documents for b in full_sentences([doc], budget, sep_id)]


def no_separator(documents, budget, sep_id):
    return [[t for t in b if t != sep_id] for b in full_sentences(documents, budget, sep_id)]


def cut_anywhere(documents, budget, sep_id):  # group_texts style: ignores sentence ends
    stream = []
    for doc in documents:
        stream += ([sep_id] if stream else []) + [t for s in doc for t in s]
    return [stream[i : i + budget] for i in range(0, len(stream), budget)]


def drops_long_sentences(documents, budget, sep_id):
    return full_sentences([[s for s in d if len(s) <= budget] for d in documents], budget, sep_id)


def test_full_sentences_accepts_the_packing(capsys):
    check_full_sentences(full_sentences)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (doc_sentences, "DOC-SENTENCES"),
        (no_separator, "no separator"),
        (cut_anywhere, "sentences are cut at block boundaries"),
        (drops_long_sentences, "not dropped"),
        (lambda d, b, s: [[t for x in d for y in x for t in y]], "more than budget"),
        (lambda d, b, s: d, "flat list of token ids"),
    ],
)
def test_full_sentences_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_full_sentences(wrong)


@pytest.mark.parametrize("fmt, cross", [("full-sentences", True), ("doc-sentences", False)])
def test_reference_packing_equals_the_library(fmt, cross):
    """The checker's reference follows make_format_examples exactly (specials stripped)."""
    docs = [
        ["The cat sat on the mat.", "It was warm.", "Then it slept for a long, long time."],
        ["Byte-level BPE never needs an unknown token."],
        ["Dynamic masking draws new masks.", "Static masking repeats them.", "Short.", "Yes."],
    ] * 3
    tok = train_tokenizer("roberta", [s for d in docs for s in d], vocab_size=300)
    max_length = 14
    examples = make_format_examples(docs, tok, max_length=max_length, format=fmt)
    # the library's own sentence tokenization (a space before every sentence but a document's first)
    tokenized = [[ids for ids, _ in d] for d in tokenize_documents(docs, tok)[0]]
    ref = reference_full_sentences(tokenized, max_length - 2, tok.sep_token_id, cross)
    assert [e["input_ids"][1:-1] for e in examples] == ref
    assert len(ref) > len(docs) // 2  # the documents really were packed and split


# ----- gradient accumulation ---------------------------------------------------------------------


def weighted(model, micro_batches):
    total = sum(int((m["labels"] != -100).sum()) for m in micro_batches)
    for m in micro_batches:
        n = int((m["labels"] != -100).sum())
        (model(**m).loss * n / total).backward()


def naive(model, micro_batches):
    for m in micro_batches:
        (model(**m).loss / len(micro_batches)).backward()


def summed(model, micro_batches):
    for m in micro_batches:
        model(**m).loss.backward()


def zeroes_between(model, micro_batches):
    for m in micro_batches:
        model.zero_grad()
        (model(**m).loss / len(micro_batches)).backward()


def test_gradient_accumulation_accepts_token_weighting(capsys):
    check_gradient_accumulation(weighted)
    assert "naive average" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (naive, "averaged the micro-batch losses equally"),
        (summed, "too large"),
        (zeroes_between, "do not zero the gradients"),
        (lambda model, mb: None, "no gradients"),
    ],
)
def test_gradient_accumulation_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_gradient_accumulation(wrong)


# ----- exercises 5 and 6: byte-level symbols -------------------------------------------------------------

TABLE = bytes_to_unicode()
INVERSE = {c: b for b, c in TABLE.items()}


def good_to_symbols(text):
    return "".join(TABLE[b] for b in text.encode("utf-8"))


def good_from_symbols(symbols):
    return bytes(INVERSE[c] for c in symbols).decode("utf-8")


def per_character(text):  # the characters, not the bytes
    return "".join(TABLE.get(ord(c), c) for c in text)


def decode_per_symbol(symbols):
    return "".join(bytes([INVERSE[c]]).decode("utf-8", errors="ignore") for c in symbols)


def test_byte_level_checkers_accept_a_solution(capsys):
    check_to_byte_symbols(good_to_symbols)
    check_from_byte_symbols(good_from_symbols)
    assert "never needs an unknown token" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda t: t, "not in the byte alphabet"),
        (per_character, "one per character"),
        (lambda t: "".join(TABLE[ord(c) % 256] for c in t), "one per character"),
        (lambda t: "".join(TABLE[b] for b in t.encode("utf-16-le")), "UTF-8 bytes"),
        (lambda t: list(good_to_symbols(t)), "must return a str"),
    ],
)
def test_to_byte_symbols_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_to_byte_symbols(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (decode_per_symbol, "lost information"),
        (lambda s: bytes(INVERSE[c] for c in s).decode("latin-1"), "lost information"),
    ],
)
def test_from_byte_symbols_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_from_byte_symbols(wrong)


# ----- exercise 7: one BPE merge step -------------------------------------------------------------


def good_merge(word_freqs):
    return bpe_merge_step(word_freqs)


def merge_unweighted(word_freqs):
    counts = Counter(p for w in word_freqs for p in zip(w, w[1:]))
    best = min(counts, key=lambda p: (-counts[p], p))
    return best, {merge_word(w, best): f for w, f in word_freqs.items()}


def merge_first_max(word_freqs):  # ties: whichever pair was counted first
    counts = pair_counts(word_freqs)
    best = max(counts, key=counts.get)
    return best, {merge_word(w, best): f for w, f in word_freqs.items()}


def merge_only_first_occurrence(word_freqs):
    best, _ = bpe_merge_step(word_freqs)
    out = {}
    for w, f in word_freqs.items():
        for i in range(len(w) - 1):
            if (w[i], w[i + 1]) == best:
                w = (*w[:i], w[i] + w[i + 1], *w[i + 2 :])
                break
        out[w] = f
    return best, out


def merge_right_to_left(word_freqs):
    best, _ = bpe_merge_step(word_freqs)
    flip = (best[1], best[0])
    return best, {
        tuple(s[::-1] for s in merge_word(tuple(c[::-1] for c in w[::-1]), flip))[::-1]: f
        for w, f in word_freqs.items()
    }


def test_bpe_merge_checker_accepts_a_solution(capsys):
    check_bpe_merge(good_merge)
    assert "('e', 's') with 9" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (merge_unweighted, "Weight every occurrence"),
        (merge_first_max, "break ties by the smallest pair"),
        (merge_only_first_occurrence, "Merge EVERY occurrence"),
        (merge_right_to_left, "a a a -> aa a"),
        (lambda wf: list(bpe_merge_step(wf)), "return a tuple"),
        (lambda wf: (bpe_merge_step(wf)[0], list(wf)), "must be a dict"),
        (
            lambda wf: (bpe_merge_step(wf)[0], dict(list(bpe_merge_step(wf)[1].items())[:-1])),
            "keep every word|should become",
        ),
    ],
)
def test_bpe_merge_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_bpe_merge(wrong)
