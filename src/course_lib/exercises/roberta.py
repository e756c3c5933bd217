"""Chapter 02 exercise checkers: RoBERTa's position ids, a dynamic-masking collator,
FULL-SENTENCES packing, gradient accumulation that equals one big batch, a lossless byte-level
encoding and one BPE merge step."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from course_lib.exercises.core import (
    ExerciseError,
    expect,
    expect_ignore_index_in_labels_only,
    passed,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.models.roberta import (
    RobertaConfig,
    RobertaForMaskedLM,
    create_position_ids_from_input_ids,
)

# ----- exercise 1: position ids ------------------------------------------------------------------


def _position_batch(padding_idx: int) -> torch.Tensor:
    """Right-padded rows, a full row and a left-padded row; no real token equals padding_idx."""
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(10, 60, (4, 9), generator=g)
    ids[0, 6:] = padding_idx  # 6 real tokens, 3 pads
    ids[1, 3:] = padding_idx  # 3 real tokens
    ids[3, :4] = padding_idx  # left padding: 5 real tokens at the end
    return ids


def check_position_ids(position_ids: Callable) -> None:
    """`position_ids(input_ids, padding_idx)` -> RoBERTa's (fairseq's) position ids: real tokens
    count padding_idx + 1, + 2, ... within their row; padding gets padding_idx."""
    for padding_idx in (1, 3):
        ids = _position_batch(padding_idx)
        got = run_learner_code(position_ids, ids.clone(), padding_idx)
        expect(isinstance(got, torch.Tensor), f"return a tensor, got {type(got).__name__}.")
        expect(
            got.shape == ids.shape,
            f"return one position per token, shape {tuple(ids.shape)}; got {tuple(got.shape)}.",
        )
        expect(
            not got.is_floating_point(),
            "position ids index an embedding table: return an integer (long) tensor.",
        )
        ref = create_position_ids_from_input_ids(ids, padding_idx)
        if torch.equal(got, ref):
            continue
        real = ids != padding_idx
        arange = torch.arange(ids.shape[1]).expand_as(ids)
        if torch.equal(got, arange):
            raise ExerciseError(
                "these are BERT's positions 0, 1, 2, ...; RoBERTa's real tokens "
                "start at padding_idx + 1 (fairseq's convention)."
            )
        if torch.equal(got[real], ref[real] - 1):
            raise ExerciseError(
                "off by one: the first real token gets padding_idx + 1, not "
                "padding_idx (that id is reserved for padding)."
            )
        if torch.equal(got[real], ref[real] + 1):
            raise ExerciseError(
                "off by one: the first real token gets padding_idx + 1, not padding_idx + 2."
            )
        if torch.equal(got[real], ref[real]):
            raise ExerciseError(
                "real tokens are right, but padding must get position padding_idx "
                "(the row of the table that stays zero)."
            )
        if padding_idx != 1 and torch.equal(got, create_position_ids_from_input_ids(ids, 1)):
            raise ExerciseError("you assumed padding_idx = 1; use the padding_idx argument.")
        if torch.equal(got, arange + padding_idx + 1) or torch.equal(got[0], ref[0]):
            raise ExerciseError(
                "positions must count only real tokens of each row: with left padding (row 3) "
                "the first real token still gets padding_idx + 1 (hint: a cumulative sum of "
                "the non-padding mask)."
            )
        raise ExerciseError(f"for padding_idx={padding_idx} expected\n{ref}\ngot\n{got}")
    passed(
        "real tokens count from padding_idx + 1, padding stays at padding_idx, left padding too."
    )


# ----- exercise 2: a dynamic masking collator ----------------------------------------------------

_PAD, _CLS, _SEP, _MASK, _VOCAB = 1, 0, 2, 4, 300
_SPECIALS = [0, 1, 2, 3, 4]


def _collator_examples(n: int = 64) -> list[list[int]]:
    g = torch.Generator().manual_seed(5)
    lengths = torch.randint(8, 60, (n,), generator=g).tolist()
    return [[_CLS, *torch.randint(5, _VOCAB, (k,), generator=g).tolist(), _SEP] for k in lengths]


def _call_collator(
    collate: Callable, examples: list[list[int]], generator: torch.Generator
) -> dict[str, torch.Tensor]:
    batch = run_learner_code(
        collate, [list(e) for e in examples], _PAD, _MASK, _VOCAB, list(_SPECIALS), generator
    )
    expect(isinstance(batch, dict), f"return a dict of tensors, got {type(batch).__name__}.")
    missing = [k for k in ("input_ids", "attention_mask", "labels") if k not in batch]
    expect(
        not missing, f"the batch is missing {missing}; return input_ids, attention_mask, labels."
    )
    return batch


def check_dynamic_collator(collate: Callable) -> None:
    """`collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator)` pads a
    list of id lists and masks them afresh on every call (RoBERTa's dynamic masking)."""
    examples = _collator_examples()
    width = max(len(e) for e in examples)
    batch = _call_collator(collate, examples, torch.Generator().manual_seed(0))
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    shape = (len(examples), width)
    for name, t in (("input_ids", ids), ("attention_mask", mask), ("labels", labels)):
        expect(
            isinstance(t, torch.Tensor) and tuple(t.shape) == shape,
            f"{name} must be a tensor padded to the longest example, shape {shape}; got "
            f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}.",
        )
    real = torch.zeros(shape, dtype=torch.bool)
    for i, e in enumerate(examples):
        real[i, : len(e)] = True
    expect(
        torch.equal(mask.bool(), real),
        "attention_mask must be 1 on the real tokens and 0 on the padding.",
    )
    expect_ignore_index_in_labels_only(
        ids,
        labels,
        swapped="input_ids and labels are swapped: input_ids holds the (masked) "
        "tokens the model reads, labels the original ids and -100.",
        never="labels are never -100: set them to -100 wherever a token was NOT "
        "selected (and on padding); only selected tokens keep their id.",
        in_inputs="input_ids contain -100: that value belongs in labels only.",
    )
    selected = labels != IGNORE_INDEX
    specials = torch.isin(
        torch.stack([torch.tensor(e + [_PAD] * (width - len(e))) for e in examples]),
        torch.tensor(_SPECIALS),
    )
    expect(
        not (selected & ~real).any(),
        "padding was selected for prediction (its label is not "
        "-100): never mask padding, and give padding the label -100.",
    )
    expect(bool((ids[~real] == _PAD).all()), "pad with pad_token_id after each example.")
    expect(
        not (selected & specials).any(), "<s> and </s> were selected; never mask special tokens."
    )
    original = torch.full(shape, _PAD)
    for i, e in enumerate(examples):
        original[i, : len(e)] = torch.tensor(e)
    expect(
        torch.equal(labels[selected], original[selected]),
        "labels must hold the original token where selected (and -100 elsewhere).",
    )
    expect(torch.equal(ids[~selected], original[~selected]), "unselected tokens must not change.")
    rate = selected.sum().item() / (real & ~specials).sum().item()
    expect(
        abs(rate - 0.15) < 0.03, f"{rate:.1%} of the eligible tokens were selected; expected 15%."
    )
    to_mask = (ids[selected] == _MASK).float().mean().item()
    expect(
        abs(to_mask - 0.8) < 0.08,
        f"{to_mask:.0%} of the selected tokens became <mask>; RoBERTa keeps BERT's 80/10/10.",
    )

    # Dynamic: the next call (same generator, next epoch) draws new masks ...
    again = _call_collator(collate, examples, torch.Generator().manual_seed(0))
    expect(
        torch.equal(again["labels"], labels) and torch.equal(again["input_ids"], ids),
        "two generators with the same seed gave different masks: draw every random number "
        "from `generator` (pass generator=... to torch.rand / torch.randint), so runs repeat.",
    )
    shared = torch.Generator().manual_seed(0)
    first = _call_collator(collate, examples, shared)["labels"] != IGNORE_INDEX
    second = _call_collator(collate, examples, shared)["labels"] != IGNORE_INDEX
    expect(
        not torch.equal(first, second),
        "two calls with the same generator gave the same masks: that is static masking. "
        "Do not re-seed inside the collator; keep drawing from the generator you are given.",
    )
    overlap = (first & second).sum().item() / max(first.sum().item(), 1)
    passed(
        f"padding, 15% selection and 80/10/10 are right, and a second epoch re-masks: only "
        f"{overlap:.0%} of the selected positions were selected again (about 15% by chance)."
    )


# ----- exercise 3: FULL-SENTENCES packing --------------------------------------------------------


def reference_full_sentences(
    documents: Sequence[Sequence[Sequence[int]]],
    budget: int,
    sep_id: int,
    cross_documents: bool = True,
) -> list[list[int]]:
    """Greedy packing of whole sentences into blocks of <= budget tokens (no <s>/</s>).

    Crossing into the next document adds `sep_id` when there is room for it and one more token
    (else the block is closed); a sentence longer than the budget is cut into budget-sized
    pieces. cross_documents=False gives DOC-SENTENCES. Same rules as
    course_lib.data.pairs.make_format_examples.
    """
    blocks: list[list[int]] = []
    block: list[int] = []
    for doc in documents:
        if block and cross_documents:
            if len(block) + 1 >= budget:
                blocks.append(block)
                block = []
            else:
                block.append(sep_id)
        for sentence in doc:
            for start in range(0, len(sentence), budget):
                piece = list(sentence[start : start + budget])
                if len(block) + len(piece) > budget:
                    blocks.append(block)
                    block = []
                block.extend(piece)
        if not cross_documents and block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    return blocks


def _packing_documents() -> list[list[list[int]]]:
    g = torch.Generator().manual_seed(21)
    docs = []
    for n_sentences in (5, 1, 7, 3, 2, 6):
        lengths = torch.randint(2, 14, (n_sentences,), generator=g).tolist()
        docs.append([torch.randint(10, 99, (k,), generator=g).tolist() for k in lengths])
    docs[2][3] = list(range(100, 140))  # one sentence longer than the budget
    return docs


def check_full_sentences(pack: Callable) -> None:
    """`pack(documents, budget, sep_id)` -> list of blocks (lists of ids), RoBERTa's FULL-SENTENCES:
    whole sentences, up to `budget` tokens, crossing documents with `sep_id` between them."""
    docs, budget, sep = _packing_documents(), 24, 2
    got = run_learner_code(pack, [[list(s) for s in d] for d in docs], budget, sep)
    expect(
        isinstance(got, list) and all(isinstance(b, list) for b in got),
        "return a list of blocks, each a list of token ids.",
    )
    try:
        got = [[int(t) for t in b] for b in got]
    except (TypeError, ValueError):
        raise ExerciseError("each block must be a flat list of token ids (ints).") from None
    ref = reference_full_sentences(docs, budget, sep)
    if got == ref:
        passed(
            f"{len(ref)} blocks of <= {budget} tokens, sentences whole, documents joined by "
            f"the separator."
        )
        return
    too_long = [i for i, b in enumerate(got) if len(b) > budget]
    expect(not too_long, f"block {too_long[:3]} has more than budget={budget} tokens.")
    text = [t for d in docs for s in d for t in s]
    kept = [t for b in got for t in b if t != sep]
    expect(
        len(kept) >= len(text),
        f"{len(text) - len(kept)} tokens are missing: a sentence longer than the budget must "
        "be cut into budget-sized pieces, not dropped.",
    )
    if got == reference_full_sentences(docs, budget, sep, cross_documents=False):
        raise ExerciseError(
            "you start a new block at every document: that is DOC-SENTENCES. "
            "FULL-SENTENCES keeps filling the block across the boundary, with "
            "sep_id between the documents."
        )
    if sep not in {t for b in got for t in b}:
        raise ExerciseError(
            "no separator: when a block crosses into the next document, put "
            "sep_id between them so the model can tell the documents apart."
        )
    stream = [t for b in got for t in b]
    if all(len(b) == budget for b in got[:-1]):
        raise ExerciseError(
            "every block is exactly full, so sentences are cut at block "
            "boundaries; move a sentence that does not fit to the next block "
            "whole (only a sentence longer than the budget is cut)."
        )
    if stream != [t for b in ref for t in b]:
        raise ExerciseError(
            "the tokens are not in reading order (documents in order, a "
            "separator between consecutive documents)."
        )
    raise ExerciseError(
        f"the blocks are cut differently: expected block lengths "
        f"{[len(b) for b in ref]}, got {[len(b) for b in got]} (a block closes "
        "when the next sentence would not fit; the separator needs room for "
        "itself and one more token)."
    )


# ----- exercise 4: gradient accumulation ---------------------------------------------------------


def _accumulation_setup(seed: int = 0) -> tuple[RobertaForMaskedLM, list[dict[str, torch.Tensor]]]:
    config = RobertaConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(seed)
    model = RobertaForMaskedLM(config)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(5, 120, (12, 20), generator=g)
    ids[:, 0], ids[:, -1] = 0, 2
    attention = torch.ones_like(ids)
    attention[::3, 14:] = 0
    ids[attention == 0] = 1
    labels = torch.full_like(ids, IGNORE_INDEX)
    # Very different numbers of masked tokens per micro-batch (1, 2, 6 per row): the naive
    # average of micro-batch means then differs clearly from the big-batch mean.
    for row in range(12):
        k = (1, 2, 6)[row // 4]
        cols = torch.randperm(12, generator=g)[:k] + 1
        labels[row, cols] = ids[row, cols]
    micro = [
        dict(
            input_ids=ids[i : i + 4], attention_mask=attention[i : i + 4], labels=labels[i : i + 4]
        )
        for i in range(0, 12, 4)
    ]
    return model, micro


def _gradients(model: torch.nn.Module) -> list[torch.Tensor]:
    return [
        p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()
    ]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def check_gradient_accumulation(accumulate: Callable) -> None:
    """`accumulate(model, micro_batches)` runs backward on every micro-batch so that the summed
    .grad equals the gradient of ONE big batch (the mean MLM loss over all its masked tokens)."""
    model, micro = _accumulation_setup()
    big = {k: torch.cat([m[k] for m in micro]) for k in micro[0]}
    model.zero_grad()
    model(**big).loss.backward()
    reference = _gradients(model)
    model.zero_grad()
    naive = []
    for m in micro:
        model.zero_grad()
        model(**m).loss.backward()
        naive.append(_gradients(model))
    mean_of_means = [sum(g) / len(micro) for g in zip(*naive)]
    sum_of_means = [sum(g) for g in zip(*naive)]

    model.zero_grad()
    run_learner_code(accumulate, model, [dict(m) for m in micro])
    got = _gradients(model)
    expect(
        any(g.abs().sum() > 0 for g in got),
        "no gradients: call .backward() on each micro-batch's (scaled) loss.",
    )
    scale = max(g.abs().max().item() for g in reference)
    if _max_diff(got, reference) <= 1e-5 * scale:
        passed(
            f"max |difference| from the big-batch gradient {_max_diff(got, reference):.1e}; "
            f"the naive average of micro-batch means would be off by "
            f"{_max_diff(mean_of_means, reference):.1e}."
        )
        return
    if _max_diff(got, mean_of_means) <= 1e-5 * scale:
        raise ExerciseError(
            "you averaged the micro-batch losses equally (loss / number of micro-batches). Each "
            "loss is a mean over ITS OWN masked tokens, and the micro-batches have different "
            "numbers of them: weight micro-batch i by n_i / N (its masked tokens / all masked "
            "tokens of the big batch)."
        )
    if _max_diff(got, sum_of_means) <= 1e-5 * scale:
        raise ExerciseError(
            "the gradients are the SUM of the micro-batch gradients, about "
            f"{len(micro)} times too large: scale each loss before backward()."
        )
    if (
        _max_diff(got, naive[-1]) <= 1e-5 * scale
        or _max_diff(got, [g / len(micro) for g in naive[-1]]) <= 1e-5 * scale
    ):
        raise ExerciseError(
            "only the last micro-batch's gradient is left: do not zero the "
            "gradients between micro-batches (they must add up)."
        )
    raise ExerciseError(
        f"the gradients differ from the big batch's by up to {_max_diff(got, reference):.2e}. "
        "Scale each micro-batch loss by (its masked tokens) / (all masked tokens), call "
        "backward() on each, and do not zero the gradients in between."
    )


# ----- exercises 5 and 6: a lossless byte-level encoding ------------------------------------------------

_BYTE_TEXTS = (
    "plain ASCII, with  two spaces\tand a tab\n",
    "café, naïve, Ångström",  # 2-byte UTF-8 characters
    "漢字とかな",  # 3-byte characters
    "emoji 🙂 and a family 👨‍👩‍👧 (joined by zero-width joiners)",  # 4-byte characters
    "e\u0301 is e + a combining accent",  # a character in two code points
)


def check_to_byte_symbols(to_byte_symbols: Callable) -> None:
    """`to_byte_symbols(text)` -> one symbol of GPT-2's byte alphabet (`bytes_to_unicode()`) per
    UTF-8 byte of the text, in order."""
    from course_lib.tokenization.byte_level import bytes_to_unicode
    from course_lib.tokenization.byte_level import to_byte_symbols as reference

    alphabet = set(bytes_to_unicode().values())
    for text in _BYTE_TEXTS:
        got = run_learner_code(to_byte_symbols, text)
        expect(
            isinstance(got, str), f"to_byte_symbols must return a str, got {type(got).__name__}."
        )
        outside = sorted({c for c in got if c not in alphabet})
        expect(
            not outside,
            f"to_byte_symbols({text!r}) contains {outside[:3]}, which are not in the byte "
            "alphabet: map every BYTE through bytes_to_unicode(), not the characters.",
        )
        n_bytes = len(text.encode("utf-8"))
        if len(got) == len(text) != n_bytes:
            raise ExerciseError(
                f"{text!r} became {len(got)} symbols, one per character; it is {n_bytes} UTF-8 "
                "bytes (é is 2 bytes, 🙂 is 4). Encode the text to bytes first."
            )
        expect(
            got == reference(text),
            f"to_byte_symbols({text!r}) = {got!r}, expected {reference(text)!r} (UTF-8 bytes, "
            "in order, each through bytes_to_unicode()).",
        )
    passed("one symbol per UTF-8 byte: é is 2 symbols, 🙂 is 4, and all 256 bytes have one.")


def check_from_byte_symbols(from_byte_symbols: Callable) -> None:
    """`from_byte_symbols(symbols)` -> the original text, for any text at all: the inverse of
    GPT-2's byte-level encoding."""
    from course_lib.tokenization.byte_level import to_byte_symbols as reference

    for text in _BYTE_TEXTS:
        back = run_learner_code(from_byte_symbols, reference(text))
        expect(
            back == text,
            f"from_byte_symbols lost information: {text!r} came back as {back!r}. Map symbols "
            "to bytes, join them, and decode the whole byte string once as UTF-8 (a character's "
            "bytes are not characters on their own; never decode with errors='ignore').",
        )
    passed(
        "every text survives the round trip, emoji and accents included: byte-level BPE starts "
        "from these 256 symbols, so it never needs an unknown token."
    )


# ----- exercise 7: one BPE merge step -------------------------------------------------------------


def _merge_corpora() -> list[dict[tuple[str, ...], int]]:
    sennrich = {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3}
    # (a, b) appears in many word TYPES but few tokens; (x, y) in one very frequent word
    weighted = {("a", "b", "c"): 1, ("a", "b", "d"): 1, ("a", "b", "e"): 1, ("x", "y"): 10}
    # a word with the pair twice, and an overlapping run: "a a a" -> "aa a", "a a a a" -> "aa aa"
    repeats = {("a", "a", "a"): 4, ("a", "a", "a", "a"): 3, ("b", "a", "b", "a"): 1}
    # a tie between (c, d) and (a, b): the smallest pair in sorted order wins
    tie = {("c", "d"): 2, ("a", "b"): 2, ("e",): 9}
    return [sennrich, weighted, repeats, tie]


def check_bpe_merge(bpe_merge_step: Callable) -> None:
    """`bpe_merge_step(word_freqs)` -> (best_pair, new_word_freqs): the adjacent pair with the
    highest count (each occurrence weighted by its word's frequency; ties: smallest in sorted
    order), merged left to right, without overlap, in every word."""
    from course_lib.tokenization.byte_level import bpe_merge_step as reference
    from course_lib.tokenization.byte_level import pair_counts

    for corpus in _merge_corpora():
        out = run_learner_code(bpe_merge_step, dict(corpus))
        expect(
            isinstance(out, tuple) and len(out) == 2,
            "return a tuple (best_pair, new_word_freqs).",
        )
        pair, merged = out
        expect(
            isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(s, str) for s in pair),
            f"best_pair must be a tuple of two symbols, e.g. ('e', 's'); got {pair!r}.",
        )
        best, expected = reference(corpus)
        counts = pair_counts(corpus)
        if tuple(pair) != best:
            per_type = {p: sum(1 for w in corpus if p in zip(w, w[1:])) for p in counts}
            if counts[tuple(pair)] < counts[best] and per_type.get(tuple(pair), 0) > per_type[best]:
                raise ExerciseError(
                    f"you chose {tuple(pair)}: it is in more word types, but {best} occurs "
                    f"{counts[best]} times against {counts[tuple(pair)]}. Weight every occurrence "
                    "by its word's frequency."
                )
            if counts.get(tuple(pair)) == counts[best]:
                raise ExerciseError(
                    f"{tuple(pair)} and {best} tie at {counts[best]}: break ties by the "
                    "smallest pair in sorted order, so the merges are deterministic."
                )
            raise ExerciseError(
                f"best pair {tuple(pair)} (count {counts.get(tuple(pair), 0)}); expected {best} "
                f"(count {counts[best]}). Count every adjacent pair of every word."
            )
        expect(
            isinstance(merged, dict),
            f"new_word_freqs must be a dict, got {type(merged).__name__}.",
        )
        for word, new in zip(corpus, expected):
            if merged.get(new) != expected[new]:
                got = [w for w in merged if "".join(w) == "".join(word)]
                raise ExerciseError(
                    f"{word} should become {new} after merging {best}; you have "
                    f"{got[0] if got else 'no such word'}. Merge EVERY occurrence, left to "
                    "right, and a symbol used by one merge cannot be used by the next "
                    "(a a a -> aa a)."
                )
        expect(
            len(merged) == len(expected),
            f"{len(merged)} words after the merge, expected {len(expected)}: keep every word "
            "and its frequency.",
        )
    passed(
        "weighted counts, sorted tie-break and left-to-right merges: Sennrich's first merge is "
        "('e', 's') with 9 occurrences, as in the paper's example."
    )
