"""Chapter 02 checkers: the right answer passes; the stub and typical mistakes are rejected with
a message that names the mistake."""

from collections import Counter

import pytest
import torch

from course_lib.exercises.core import ExerciseError
from course_lib.exercises.roberta import (
    _packed_batch,
    check_bpe_merge,
    check_document_attention_mask,
    check_dynamic_collator,
    check_from_byte_symbols,
    check_loss_scales,
    check_packed_position_ids,
    check_safe_cuts,
    reference_packed_position_ids,
)
from course_lib.objectives.masking import MaskingConfig, build_special_tokens_mask, mask_tokens
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


# ----- position ids that restart at each document ------------------------------------------------


def packed_positions(input_ids, padding_idx, sep_id):
    """A loop a learner might write: count per row, restart after each separator."""
    out = torch.full_like(input_ids, padding_idx)
    for b, row in enumerate(input_ids.tolist()):
        n = 0
        for t, token in enumerate(row):
            if token != padding_idx:
                n += 1
                out[b, t] = padding_idx + n
                if token == sep_id:
                    n = 0
    return out


def fairseq_positions(input_ids, padding_idx, sep_id=None):
    real = (input_ids != padding_idx).long()
    return torch.cumsum(real, dim=1) * real + padding_idx


def restart_at_separator(input_ids, padding_idx, sep_id):
    """The separator opens the next document instead of closing its own."""
    out = torch.full_like(input_ids, padding_idx)
    for b, row in enumerate(input_ids.tolist()):
        n = 0
        for t, token in enumerate(row):
            if token != padding_idx:
                n = 1 if token == sep_id else n + 1
                out[b, t] = padding_idx + n
    return out


def separators_as_padding(input_ids, padding_idx, sep_id):
    real = input_ids != padding_idx
    seen = real.long().cumsum(1)
    at_ends = torch.where(input_ids == sep_id, seen, 0).cummax(1).values  # inclusive
    return (seen - at_ends) * real + padding_idx


def arange_per_document(input_ids, padding_idx, sep_id):
    """Counts positions from the row's start, so left padding shifts them."""
    out = torch.full_like(input_ids, padding_idx)
    for b, row in enumerate(input_ids.tolist()):
        start = 0
        for t, token in enumerate(row):
            if token != padding_idx:
                out[b, t] = padding_idx + 1 + t - start
                if token == sep_id:
                    start = t + 1
    return out


def test_reference_packed_positions_equal_the_loop():
    ids = _packed_batch(1, 2)
    assert torch.equal(reference_packed_position_ids(ids, 1, 2), packed_positions(ids, 1, 2))
    # a row without a separator inside is RoBERTa's ordinary numbering
    assert torch.equal(reference_packed_position_ids(ids[4:], 1, 2), fairseq_positions(ids[4:], 1))


def test_packed_position_ids_accepts_a_loop_and_the_vectorised_answer(capsys):
    check_packed_position_ids(packed_positions)
    check_packed_position_ids(reference_packed_position_ids)
    assert capsys.readouterr().out.count("Correct!") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (fairseq_positions, "ordinary position ids"),
        (restart_at_separator, "each </s> starts a new document"),
        (separators_as_padding, "separators got padding_idx"),
        (lambda ids, p, s: packed_positions(ids, p, s) - (ids != p).long(), "not padding_idx \\("),
        (lambda ids, p, s: packed_positions(ids, p, s) + (ids != p).long(), "padding_idx \\+ 2"),
        (
            lambda ids, p, s: torch.where(ids == p, 0, packed_positions(ids, p, s)),
            "padding must get position padding_idx",
        ),
        (lambda ids, p, s: packed_positions(ids, 1, 2), "assumed padding_idx = 1 and sep_id = 2"),
        (lambda ids, p, s: packed_positions(ids, p, 2), "sep_id = 2"),
        (arange_per_document, "left padding"),
        (lambda ids, p, s: packed_positions(ids, p, s).float(), "integer"),
        (lambda ids, p, s: packed_positions(ids, p, s)[:, :-1], "one position per token"),
    ],
)
def test_packed_position_ids_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_packed_position_ids(wrong)


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


# ----- attention that stays inside each document -------------------------------------------------


def document_mask(input_ids, padding_idx, sep_id):
    """A loop a learner might write: label each token's document, then compare labels."""
    docs = torch.zeros_like(input_ids)
    for b, row in enumerate(input_ids.tolist()):
        d = 0
        for t, token in enumerate(row):
            docs[b, t] = d
            d += token == sep_id
    real = input_ids != padding_idx
    return (docs[:, :, None] == docs[:, None, :]) & real[:, None, :] & real[:, :, None]


def padding_only(input_ids, padding_idx, sep_id):
    real = input_ids != padding_idx
    return real[:, None, :].expand(-1, input_ids.shape[1], -1).clone()


def separator_opens_the_next(input_ids, padding_idx, sep_id):
    docs = (input_ids == sep_id).long().cumsum(1)
    real = input_ids != padding_idx
    return (docs[:, :, None] == docs[:, None, :]) & real[:, None, :]


def attends_padding(input_ids, padding_idx, sep_id):
    docs = (input_ids == sep_id).long().cumsum(1) - (input_ids == sep_id).long()
    return docs[:, :, None] == docs[:, None, :]


def test_document_mask_accepts_a_loop_and_ignores_padding_queries(capsys):
    check_document_attention_mask(document_mask)
    # what a padding query may attend is not checked (its output is discarded)
    check_document_attention_mask(
        lambda ids, p, s: (
            document_mask(ids, p, s) | ((ids == p)[:, :, None] & (ids != p)[:, None, :])
        )
    )
    assert capsys.readouterr().out.count("Correct!") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (padding_only, "plain FULL-SENTENCES attention"),
        (separator_opens_the_next, "each </s> attends with the next document"),
        (attends_padding, "padding is attended"),
        (lambda ids, p, s: document_mask(ids, 1, 2), "assumed padding_idx = 1 and sep_id = 2"),
        (lambda ids, p, s: document_mask(ids, p, s).long(), "boolean keep-mask"),
        (lambda ids, p, s: ids != p, "one entry per \\(query, key\\) pair"),
        (lambda ids, p, s: document_mask(ids, p, s).transpose(0, 1), "one entry per"),
        (
            lambda ids, p, s: document_mask(ids, p, s) & ~torch.eye(16, dtype=torch.bool),
            "row 0: query 0",
        ),
    ],
)
def test_document_mask_rejects_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_document_attention_mask(wrong)


# ----- exercise 4: the loss scales of gradient accumulation --------------------------------------


def good_scales(labels, reduction):
    counts = [int((x != -100).sum()) for x in labels]
    total = sum(counts)
    if reduction == "mean":
        return [n / total for n in counts]  # an empty micro-batch gets 0.0: skipped
    return [1 / total] * len(counts)


def scales_by_rows(labels, reduction):
    rows = [x.shape[0] for x in labels]
    return [r / sum(rows) for r in rows] if reduction == "mean" else good_scales(labels, reduction)


def scales_empty_equal(labels, reduction):
    """Right, except that an empty micro-batch gets 1 / k instead of 0."""
    counts = [int((x != -100).sum()) for x in labels]
    if reduction == "mean":
        return [n / sum(counts) if n else 1 / len(counts) for n in counts]
    return good_scales(labels, reduction)


def scales_in_place(labels, reduction):
    out = good_scales(labels, reduction)
    for x in labels:
        x[x == -100] = 0
    return out


def test_loss_scales_checker_accepts_token_weighting(capsys):
    check_loss_scales(good_scales)
    assert "equal weights would be off by" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda labels, r: [1 / len(labels)] * len(labels), "weight every micro-batch equally"),
        (scales_by_rows, "you weight by rows"),
        (
            lambda labels, r: [float((x != -100).sum()) for x in labels],
            "the token counts n_i themselves",
        ),
        (
            lambda labels, r: good_scales(labels, "sum" if r == "mean" else "mean"),
            "scale for summed losses",
        ),
        (
            lambda labels, r: good_scales(labels, "mean") if r == "sum" else good_scales(labels, r),
            "counts the tokens of large micro-batches twice",
        ),
        (
            lambda labels, r: [1.0] * len(labels) if r == "sum" else good_scales(labels, r),
            "N times the big batch",
        ),
        (scales_empty_equal, "no masked token.*scale 0.0"),
        (scales_in_place, r"inputs left unmodified.*modified its input `micro_batch_labels`"),
        (lambda labels, r: good_scales(labels, r)[:1], "one scale per micro-batch"),
    ],
)
def test_loss_scales_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_loss_scales(wrong)


def test_loss_scales_for_one_micro_batch_is_one():
    """The edge where accumulation disappears: a single micro-batch keeps its loss as it is."""

    def one_is_half(labels, r):
        return [0.5] if len(labels) == 1 else good_scales(labels, r)

    with pytest.raises(ExerciseError, match=r"ONE micro-batch.*expected \[1.0\]"):
        check_loss_scales(one_is_half)


# ----- exercises 5 and 6: where a byte-level token may end, and back to text ------------------------

TABLE = bytes_to_unicode()
INVERSE = {c: b for b, c in TABLE.items()}


def good_cuts(symbols):
    data = [INVERSE[c] for c in symbols]
    return [i for i in range(1, len(data)) if data[i] & 0xC0 != 0x80]


def cuts_by_symbol(symbols):
    return [i for i in range(1, len(symbols)) if ord(symbols[i]) < 128]


def cuts_by_ascii_byte(symbols):
    return [i for i in range(1, len(symbols)) if INVERSE[symbols[i]] < 128]


def cuts_by_characters(symbols):
    return list(range(1, len(good_from_symbols(symbols))))


def cuts_with_ends(symbols):
    return [0, *good_cuts(symbols), len(symbols)]


def cuts_needing_text(symbols):
    """Right, but assumes at least one symbol (crashes on the empty string)."""
    first = INVERSE[symbols[0]]  # noqa: F841
    return good_cuts(symbols)


def good_from_symbols(symbols):
    return bytes(INVERSE[c] for c in symbols).decode("utf-8")


def decode_per_symbol(symbols):
    return "".join(bytes([INVERSE[c]]).decode("utf-8", errors="ignore") for c in symbols)


def test_byte_level_checkers_accept_a_solution(capsys):
    check_safe_cuts(good_cuts)
    check_from_byte_symbols(good_from_symbols)
    out = capsys.readouterr().out
    assert "never cuts a character in two" in out and "never needs an unknown token" in out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda s: list(range(1, len(s))), "also inside a character"),
        (cuts_with_ends, "0 and len"),
        (cuts_by_characters, "decoded text's characters"),
        (cuts_by_symbol, "you judged the symbol, not its byte"),
        (cuts_by_ascii_byte, "FIRST byte of a multi-byte character"),
        (lambda s: set(good_cuts(s)), "return a list of ints"),
        (cuts_needing_text, r"an empty string.*raised IndexError"),
    ],
)
def test_safe_cuts_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_safe_cuts(wrong)


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


# ----- the edges: answers right only at the typical sizes are rejected, naming the edge ---------


def positions_from_first_real(input_ids, padding_idx, sep_id):
    """A loop that starts counting at each row's first real token: a row of padding only has
    none (IndexError)."""
    out = torch.full_like(input_ids, padding_idx)
    for b, row in enumerate(input_ids):
        start = int((row != padding_idx).nonzero()[0])
        count = 0
        for t in range(start, len(row)):
            if row[t] != padding_idx:
                count += 1
                out[b, t] = padding_idx + count
                count = 0 if row[t] == sep_id else count
    return out


def positions_in_place(input_ids, padding_idx, sep_id):
    out = reference_packed_position_ids(input_ids, padding_idx, sep_id)
    input_ids.copy_(out)
    return out


def collate_pads_in_place(examples, pad_token_id, mask_token_id, vocab_size, special_ids, g):
    """Pads each example list in place (e += [pad] * ...): the dataset's examples change."""
    width = max(len(e) for e in examples)
    lengths = [len(e) for e in examples]
    for e in examples:
        e += [pad_token_id] * (width - len(e))
    input_ids = torch.tensor(examples)
    attention_mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    special = build_special_tokens_mask(input_ids, special_ids, attention_mask)
    input_ids, labels = mask_tokens(
        input_ids, special, mask_token_id, vocab_size, MaskingConfig(), g
    )
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def collate_squeezed(*args):
    return {k: v.squeeze() for k, v in collate(*args).items()}


def merge_in_place(word_freqs):
    """Right merges, but written into the caller's dict."""
    best, merged = bpe_merge_step(dict(word_freqs))
    word_freqs.clear()
    word_freqs.update(merged)
    return best, word_freqs


def from_symbols_short_cut(symbols):
    """Treats a one-symbol string as already decoded: wrong for 'Ġ' (a space)."""
    return symbols if len(symbols) < 2 else good_from_symbols(symbols)


@pytest.mark.parametrize(
    "checker, wrong, message",
    [
        (
            check_packed_position_ids,
            lambda *a: reference_packed_position_ids(*a).squeeze(),
            r"a batch of one.*do not \.squeeze",
        ),
        (check_packed_position_ids, positions_from_first_real, "a row of padding only.*IndexError"),
        (check_packed_position_ids, positions_in_place, "modified its input `input_ids`"),
        (
            check_document_attention_mask,
            lambda *a: document_mask(*a).squeeze(),
            r"a batch of one.*do not \.squeeze",
        ),
        (check_dynamic_collator, collate_pads_in_place, "inputs left unmodified.*e \\+= \\[pad\\]"),
        (check_dynamic_collator, collate_squeezed, r"a batch of ONE example.*\.squeeze"),
        (check_bpe_merge, merge_in_place, "inputs left unmodified.*word_freqs"),
        (check_from_byte_symbols, from_symbols_short_cut, r"one symbol \(a space"),
    ],
    ids=lambda x: getattr(x, "__name__", None) if callable(x) else None,
)
def test_an_answer_right_only_at_typical_sizes_is_rejected_at_its_edge(checker, wrong, message):
    with pytest.raises(ExerciseError, match=message):
        checker(wrong)
