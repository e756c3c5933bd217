"""Chapter 02 exercise checkers: position ids and an attention mask that keep the documents of a
packed row apart, a dynamic-masking collator, the loss scales that make gradient accumulation equal
one big batch, where a byte-level token may end without cutting a character, the lossless way
back to text, and one BPE merge step."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from course_lib.config import tiny_config
from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    expect,
    expect_ignore_index_in_labels_only,
    expect_keep_mask,
    expect_unchanged,
    passed,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.models.roberta import (
    RobertaConfig,
    RobertaForMaskedLM,
    create_position_ids_from_input_ids,
)

# ----- exercise 1: position ids that restart at each document (design) ---------------------------


def document_ids(input_ids: torch.Tensor, sep_id: int) -> torch.Tensor:
    """[batch, seq] index of the document each token belongs to in a packed row: a separator
    closes the document it ends, so it counts for the tokens *after* it (an exclusive cumsum)."""
    ends = (input_ids == sep_id).long()
    return ends.cumsum(dim=1) - ends


def reference_packed_position_ids(
    input_ids: torch.Tensor, padding_idx: int, sep_id: int
) -> torch.Tensor:
    """fairseq's numbering restarted at every document of a packed row: each document's tokens
    count padding_idx + 1, + 2, ... (its closing separator included); padding gets padding_idx."""
    real = input_ids.ne(padding_idx).long()
    seen = real.cumsum(dim=1)  # real tokens so far, this one included
    # real tokens up to the last separator strictly before each token, by a running maximum
    at_ends = torch.where(input_ids == sep_id, seen, torch.zeros_like(seen)).cummax(dim=1).values
    before = torch.cat([torch.zeros_like(at_ends[:, :1]), at_ends[:, :-1]], dim=1)
    return (seen - before) * real + padding_idx


def _positions_for(input_ids: torch.Tensor, padding_idx: int, docs: torch.Tensor) -> torch.Tensor:
    """Positions numbered within each value of `docs` (for the checker's wrong-answer variants)."""
    out = torch.full_like(input_ids, padding_idx)
    for b in range(input_ids.shape[0]):
        counts: dict[int, int] = {}
        for t in range(input_ids.shape[1]):
            if input_ids[b, t] != padding_idx:
                d = int(docs[b, t])
                counts[d] = counts.get(d, 0) + 1
                out[b, t] = padding_idx + counts[d]
    return out


def _packed_batch(padding_idx: int, sep_id: int, bos_id: int = 0) -> torch.Tensor:
    """Packed rows `<s> doc </s> doc ... </s>`: right-padded, full, left-padded, one document."""
    layouts = [  # (document lengths before their </s>, padding on the "right" or "left")
        ((4, 5), "right"),
        ((3, 2, 4), "right"),
        ((6, 7), "right"),
        ((2, 4, 2), "left"),
        ((9,), "right"),
    ]
    g = torch.Generator().manual_seed(13)
    width = 16
    rows = []
    for lengths, side in layouts:
        row = [bos_id]
        for n in lengths:
            row += torch.randint(10, 60, (n,), generator=g).tolist() + [sep_id]
        pads = [padding_idx] * (width - len(row))
        rows.append(row + pads if side == "right" else pads + row)
    return torch.tensor(rows)


def check_packed_position_ids(position_ids: Callable) -> None:
    """`position_ids(input_ids, padding_idx, sep_id)` -> position ids that restart at
    padding_idx + 1 after every separator of a packed row; padding gets padding_idx."""
    for padding_idx, sep_id in ((1, 2), (3, 5)):
        ids = _packed_batch(padding_idx, sep_id)
        got = run_learner_code(position_ids, ids.clone(), padding_idx, sep_id)
        expect(isinstance(got, torch.Tensor), f"return a tensor, got {type(got).__name__}.")
        expect(
            got.shape == ids.shape,
            f"return one position per token, shape {tuple(ids.shape)}; got {tuple(got.shape)}.",
        )
        expect(
            not got.is_floating_point(),
            "position ids index an embedding table: return an integer (long) tensor.",
        )
        ref = reference_packed_position_ids(ids, padding_idx, sep_id)
        if torch.equal(got, ref):
            continue
        for assumed_pad, assumed_sep in ((1, sep_id), (padding_idx, 2), (1, 2)):
            if (assumed_pad, assumed_sep) != (padding_idx, sep_id) and torch.equal(
                got, reference_packed_position_ids(ids, assumed_pad, assumed_sep)
            ):
                raise ExerciseError(
                    f"you assumed padding_idx = {assumed_pad} and sep_id = {assumed_sep}; "
                    "use the arguments."
                )
        real, seps = ids != padding_idx, ids == sep_id
        if torch.equal(got, create_position_ids_from_input_ids(ids, padding_idx)):
            raise ExerciseError(
                "the numbering runs straight through the row: these are RoBERTa's ordinary "
                "position ids (notebook 01). Start again at padding_idx + 1 on the token after "
                "each </s>."
            )
        inclusive = (ids == sep_id).long().cumsum(dim=1)  # the separator opens the next document
        if torch.equal(got, _positions_for(ids, padding_idx, inclusive)):
            raise ExerciseError(
                "each </s> starts a new document in your numbering, but it closes the one "
                "before it: it takes the next number of that document, and the restart comes "
                "on the token after it."
            )
        if torch.equal(got[~seps], ref[~seps]) and torch.equal(
            got[seps & real], torch.full_like(ref[seps & real], padding_idx)
        ):
            raise ExerciseError(
                "the separators got padding_idx: a </s> is a real token of the document it "
                "closes and takes that document's next number."
            )
        if torch.equal(got[real], ref[real] - 1):
            raise ExerciseError(
                "off by one: each document's first token gets padding_idx + 1, not "
                "padding_idx (that id is reserved for padding)."
            )
        if torch.equal(got[real], ref[real] + 1):
            raise ExerciseError(
                "off by one: each document's first token gets padding_idx + 1, not padding_idx + 2."
            )
        if torch.equal(got[real], ref[real]):
            raise ExerciseError(
                "real tokens are right, but padding must get position padding_idx "
                "(the row of the table that stays zero)."
            )
        left = 3  # the left-padded row
        if torch.equal(
            torch.cat([got[:left], got[left + 1 :]]), torch.cat([ref[:left], ref[left + 1 :]])
        ):
            raise ExerciseError(
                "right-padded rows are right, but with left padding (row 3) count only the real "
                "tokens: the <s> after the padding is still padding_idx + 1."
            )
        raise ExerciseError(
            f"for padding_idx={padding_idx}, sep_id={sep_id} and input_ids\n{ids}\nexpected\n"
            f"{ref}\ngot\n{got}"
        )
    _check_row_edges(position_ids, reference_packed_position_ids, "position ids")
    passed(
        "every document counts from padding_idx + 1 again, each </s> ends its own document, "
        "padding stays at padding_idx, left padding too."
    )


def _check_row_edges(fn: Callable, reference: Callable, what: str) -> None:
    """The edges of a packed-row function: one row (a batch of one), a row of padding only next
    to a one-document row without </s>, and input_ids left as they were."""
    name = getattr(fn, "__name__", "your function")
    full = _packed_batch(1, 2)
    edges = (
        ("a batch of one (input_ids of shape (1, 16))", full[2:3]),
        (
            "a row of padding only, next to a row without any </s>",
            torch.tensor([[1] * 8, [0, 7, 8, 9, 10, 11, 12, 13]]),
        ),
    )
    for description, ids in edges:
        with at_edge(description):
            given = ids.clone()
            got = run_learner_code(fn, given, 1, 2)
            expect_unchanged(ids, given, "input_ids", name)
            want = reference(ids, 1, 2)
            expect(isinstance(got, torch.Tensor), f"return a tensor, got {type(got).__name__}.")
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
                + (" (do not .squeeze(): B may be 1)" if got.numel() == want.numel() else "")
                + ".",
            )
            real = ids != 1
            if what == "keep-mask":  # only real queries are checked
                ok = torch.equal(got.bool()[real], want[real])
            else:
                ok = torch.equal(got, want)
            expect(
                ok, f"wrong {what} for input_ids\n{ids}\nexpected\n{want.long()}\ngot\n{got.long()}"
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
    given = [list(e) for e in examples]
    batch = run_learner_code(collate, given, _PAD, _MASK, _VOCAB, list(_SPECIALS), generator)
    changed = [i for i, (a, b) in enumerate(zip(given, examples)) if a != b]
    with at_edge("inputs left unmodified"):
        expect(
            not changed and len(given) == len(examples),
            f"`{getattr(collate, '__name__', 'collate')}` modified the example lists it was given "
            f"(example {changed[0] if changed else len(given)} changed): padding in place "
            "(e += [pad] * ...) changes the dataset's own examples. Build new rows instead.",
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
    with at_edge("a batch of ONE example (no padding at all)"):
        one = _call_collator(collate, examples[:1], torch.Generator().manual_seed(2))
        length = len(examples[0])
        for name in ("input_ids", "attention_mask", "labels"):
            t = one[name]
            expect(
                isinstance(t, torch.Tensor) and tuple(t.shape) == (1, length),
                f"{name} must have shape (1, {length}); got "
                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}"
                " (do not .squeeze(): B may be 1).",
            )
        expect(bool(one["attention_mask"].bool().all()), "one example has no padding: mask all 1.")
    passed(
        f"padding, 15% selection and 80/10/10 are right, and a second epoch re-masks: only "
        f"{overlap:.0%} of the selected positions were selected again (about 15% by chance)."
    )


# ----- exercise 3: attention that stays inside each document (design) ----------------------------


def reference_document_attention_mask(
    input_ids: torch.Tensor, padding_idx: int, sep_id: int
) -> torch.Tensor:
    """[batch, seq, seq] bool: query i may attend key j when both are real tokens of the same
    document of the packed row (a separator belongs to the document it closes)."""
    real = input_ids != padding_idx
    docs = document_ids(input_ids, sep_id)
    same = docs[:, :, None] == docs[:, None, :]  # [batch, query, key]
    return same & real[:, :, None] & real[:, None, :]


def check_document_attention_mask(attention_mask: Callable) -> None:
    """`attention_mask(input_ids, padding_idx, sep_id)` -> [batch, seq, seq] bool keep-mask of a
    packed batch: each real token attends only to the real tokens of its own document."""
    for padding_idx, sep_id in ((1, 2), (3, 5)):
        ids = _packed_batch(padding_idx, sep_id)
        batch, seq = ids.shape
        got = run_learner_code(attention_mask, ids.clone(), padding_idx, sep_id)
        expect_keep_mask(got, batch, seq)
        real = ids != padding_idx
        ref = reference_document_attention_mask(ids, padding_idx, sep_id)
        # Only real queries are checked: a padding query's output is thrown away anyway.
        if torch.equal(got[real], ref[real]):
            continue
        for assumed_pad, assumed_sep in ((1, sep_id), (padding_idx, 2), (1, 2)):
            if (assumed_pad, assumed_sep) != (padding_idx, sep_id) and torch.equal(
                got[real], reference_document_attention_mask(ids, assumed_pad, assumed_sep)[real]
            ):
                raise ExerciseError(
                    f"you assumed padding_idx = {assumed_pad} and sep_id = {assumed_sep}; "
                    "use the arguments."
                )
        everything = (real[:, :, None] & real[:, None, :])[real]
        if torch.equal(got[real], everything):
            raise ExerciseError(
                "every token may attend to the other documents of its row: that is plain "
                "FULL-SENTENCES attention (only padding masked). Allow a pair only when both "
                "tokens belong to the same document."
            )
        inclusive = (ids == sep_id).long().cumsum(dim=1)  # the separator opens the next document
        shifted = (
            (inclusive[:, :, None] == inclusive[:, None, :]) & real[:, :, None] & real[:, None, :]
        )
        if torch.equal(got[real], shifted[real]):
            raise ExerciseError(
                "each </s> attends with the next document in your mask, but it closes the one "
                "before it: it belongs to (and attends within) the document it ends."
            )
        docs = document_ids(ids, sep_id)
        with_padding = (docs[:, :, None] == docs[:, None, :]) & real[:, :, None]
        if torch.equal(got[real], with_padding[real]) or bool(
            (got & ~real[:, None, :])[real].any()
        ):
            raise ExerciseError(
                "padding is attended: a key that is padding must be False in every row "
                "(look at the left-padded row 3, where the padding sits before the first document)."
            )
        wrong = (got != ref) & real[:, :, None]
        b, i, j = (int(x) for x in wrong.nonzero()[0])
        raise ExerciseError(
            f"row {b}: query {i} (token {int(ids[b, i])}) and key {j} (token {int(ids[b, j])}) "
            f"should be {bool(ref[b, i, j])}; input_ids[{b}] = {ids[b].tolist()}."
        )
    allowed_full = (real[:, :, None] & real[:, None, :]).sum().item()
    kept = ref[real].sum().item()
    _check_row_edges(attention_mask, reference_document_attention_mask, "keep-mask")
    passed(
        f"each document attends only to itself: of the {allowed_full} (query, key) pairs of "
        f"real tokens that FULL-SENTENCES attention allows in this batch, {kept} remain "
        f"({kept / allowed_full:.0%})."
    )


# ----- exercise 4: how to scale each micro-batch's loss (design) ------------------------------


def _accumulation_setup(seed: int = 0) -> tuple[RobertaForMaskedLM, list[dict[str, torch.Tensor]]]:
    config = tiny_config(RobertaConfig, 120, 32, heads=2, max_positions=40, intermediate_size=64)
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


def _reference_scales(counts: list[int], rows: list[int], reduction: str, kind: str = "right"):
    """Each micro-batch's loss scale; `kind` reproduces the typical slips."""
    total, k = sum(counts), len(counts)
    if kind == "equal":
        return [1 / k] * k
    if kind == "by_rows":
        return [r / sum(rows) for r in rows]
    if kind == "counts":
        return [float(n) for n in counts]
    if kind == "one":
        return [1.0] * k
    if kind == "inverse":
        return [total / n if n else 0.0 for n in counts]
    mean = reduction == "mean"
    if kind == "other_reduction":
        mean = not mean
    return [(n / total if mean else (1 / total if n else 0.0)) for n in counts]


_SCALE_MISTAKES = {
    "mean": (
        (
            "equal",
            "you weight every micro-batch equally (1 / number of micro-batches). Each mean loss "
            "averages over ITS OWN masked tokens, and the micro-batches hold different numbers of "
            "them: scale micro-batch i by n_i / N (its masked tokens / all masked tokens)",
        ),
        (
            "by_rows",
            "you weight by rows: the loss averages over masked TOKENS, not rows, so weight by "
            "each micro-batch's share of the masked tokens, n_i / N",
        ),
        (
            "counts",
            "these are the token counts n_i themselves: the sum of n_i x mean_i is the SUM over "
            "all masked tokens, N times the big batch's mean; divide by N",
        ),
        (
            "other_reduction",
            "this is the scale for summed losses: a mean loss already divides by n_i, so scale "
            "it by n_i / N",
        ),
        ("inverse", "the scale is inverted: n_i / N, not N / n_i"),
    ),
    "sum": (
        (
            "other_reduction",
            "a summed loss already weighs every masked token once: multiplying by n_i / N counts "
            "the tokens of large micro-batches twice. Divide every summed loss by N",
        ),
        ("one", "summed losses added up give N times the big batch's mean: divide each by N"),
        (
            "equal",
            "1 / number of micro-batches is not it: a summed loss needs 1 / N, N = all masked tokens",
        ),
        ("counts", "a summed loss is scaled by 1 / N, whatever its own number of tokens"),
    ),
}


def _scale_cases() -> list[tuple[str, list[torch.Tensor]]]:
    """(what, micro-batch labels): the visible uneven split, uneven rows, and the edges."""
    _, micro = _accumulation_setup()
    labels = torch.cat([m["labels"] for m in micro])  # 12 rows; 1, 2 or 6 masked tokens per row
    empty = torch.full_like(labels[:2], IGNORE_INDEX)
    return [
        ("micro-batches of 1, 5 and 6 rows", [labels[:1], labels[1:6], labels[6:]]),
        ("three micro-batches of 4 rows", [m["labels"] for m in micro]),
        ("ONE micro-batch (the whole batch)", [labels]),
        ("a micro-batch with no masked token", [labels[:6], empty, labels[6:]]),
    ]


def _as_floats(got: Any, k: int) -> list[float]:
    if isinstance(got, torch.Tensor):
        got = got.tolist() if got.dim() == 1 else got
    expect(
        isinstance(got, list | tuple) and len(got) == k,
        f"return one scale per micro-batch, a list of {k} numbers; got {got!r}.",
    )
    expect(
        all(isinstance(x, int | float) and not isinstance(x, bool) for x in got),
        f"the scales must be numbers (floats), got {got!r}.",
    )
    return [float(x) for x in got]


def check_loss_scales(loss_scales: Callable) -> None:
    """`loss_scales(micro_batch_labels, reduction)` -> one float per micro-batch: the factor its
    loss ("mean" or "sum" over its masked tokens) is multiplied by before backward(), so that the
    accumulated gradient is the big batch's (mean over ALL its masked tokens)."""
    for reduction in ("mean", "sum"):
        for what, labels in _scale_cases():
            counts = [int((x != IGNORE_INDEX).sum()) for x in labels]
            rows = [x.shape[0] for x in labels]
            given = [x.clone() for x in labels]
            got = run_learner_code(loss_scales, given, reduction)
            name = getattr(loss_scales, "__name__", "loss_scales")
            with at_edge("inputs left unmodified"):
                for before, after in zip(labels, given):
                    expect_unchanged(before, after, "micro_batch_labels", name)
            got = _as_floats(got, len(labels))
            want = _reference_scales(counts, rows, reduction)
            where = (
                f"reduction={reduction!r}, {what} (masked tokens {counts}, rows {rows}): you "
                f"return {[round(x, 4) for x in got]}, expected {[round(x, 4) for x in want]}"
            )
            empty_ok = reduction == "sum"  # a summed empty loss is 0: any finite scale is right
            if all(
                abs(g - w) < 1e-9 or (empty_ok and n == 0 and math.isfinite(g))
                for g, w, n in zip(got, want, counts)
            ):
                continue
            if 0 in counts and reduction == "mean":
                i = counts.index(0)
                expect(
                    got[i] == 0.0,
                    f"{where}: micro-batch {i} has no masked token, so its mean loss is 0 / 0 = "
                    "NaN: give it scale 0.0, which tells the loop to skip it (0 x NaN is still "
                    "NaN); the other micro-batches share the N tokens.",
                )
            for kind, message in _SCALE_MISTAKES[reduction]:
                if all(
                    abs(g - w) < 1e-9
                    for g, w in zip(got, _reference_scales(counts, rows, reduction, kind))
                ):
                    raise ExerciseError(f"{where}: {message}.")
            raise ExerciseError(f"{where}.")
    # the proof: these scales make accumulated gradients equal the big batch's
    model, micro = _accumulation_setup()
    big = {k: torch.cat([m[k] for m in micro]) for k in micro[0]}
    model.zero_grad()
    model(**big).loss.backward()
    reference = _gradients(model)
    scales = _as_floats(
        run_learner_code(loss_scales, [m["labels"].clone() for m in micro], "mean"), len(micro)
    )
    model.zero_grad()
    for m, scale in zip(micro, scales):
        (model(**m).loss * scale).backward()
    diff = _max_diff(_gradients(model), reference)
    model.zero_grad()
    for m in micro:
        (model(**m).loss / len(micro)).backward()
    naive = _max_diff(_gradients(model), reference)
    scale = max(g.abs().max().item() for g in reference)
    expect(
        diff <= 1e-5 * scale,
        f"the accumulated gradient differs from the big batch's by {diff:.1e}.",
    )
    passed(
        f"mean and summed losses, uneven rows, one micro-batch and an empty one. On a real "
        f"RobertaForMaskedLM your scales give the big batch's gradient (max |difference| "
        f"{diff:.1e}); equal weights would be off by {naive:.1e}."
    )


# ----- exercises 5 and 6: where a byte-level token may end (design), and back to text -------------

_BYTE_TEXTS = (
    "plain ASCII, with  two spaces\tand a tab\n",
    "café, naïve, Ångström",  # 2-byte UTF-8 characters
    "漢字とかな",  # 3-byte characters
    "emoji 🙂 and a family 👨‍👩‍👧 (joined by zero-width joiners)",  # 4-byte characters
    "e\u0301 is e + a combining accent",  # a character in two code points
)


def _cut_variants(symbols: str, kind: str = "right") -> list[int]:
    """Where a byte-level symbol string may be cut; `kind` reproduces the typical slips."""
    from course_lib.tokenization.byte_level import bytes_to_unicode

    to_byte = {s: b for b, s in bytes_to_unicode().items()}
    data = [to_byte[c] for c in symbols]
    inside = range(1, len(data))
    if kind == "every":
        return list(inside)
    if kind == "ends":
        return [i for i in range(len(data) + 1) if i == len(data) or data[i] & 0xC0 != 0x80]
    if kind == "characters":
        return list(range(1, len(bytes(data).decode("utf-8"))))
    if kind == "ascii_symbol":
        return [i for i in inside if ord(symbols[i]) < 128]
    if kind == "ascii_byte":
        return [i for i in inside if data[i] < 128]
    return [i for i in inside if data[i] & 0xC0 != 0x80]  # not a continuation byte 10xxxxxx


_CUT_MISTAKES = (
    (
        "every",
        "you allow a cut between any two symbols, also inside a character: é is 2 bytes and 🙂 "
        "4, and half a character decodes to nothing. A cut may not fall before a continuation "
        "byte (0b10xxxxxx, 0x80-0xBF)",
    ),
    (
        "ends",
        "0 and len(symbols) are not cuts (nothing is cut there): return the positions strictly "
        "inside",
    ),
    (
        "characters",
        "these are positions between the decoded text's characters; the cuts are positions in "
        "the SYMBOL string, one symbol per byte",
    ),
    (
        "ascii_symbol",
        "you judged the symbol, not its byte: bytes_to_unicode() gives some one-byte characters "
        "a non-ASCII symbol (a space is 'Ġ', a newline 'Ċ'). Map each symbol back to its byte "
        "first",
    ),
    (
        "ascii_byte",
        "only ASCII bytes may start a piece in your answer, but the FIRST byte of a multi-byte "
        "character (0b11xxxxxx) starts a character too; only continuation bytes (0b10xxxxxx) "
        "cannot",
    ),
)


def _check_cuts_on(safe_cuts: Callable, text: str) -> list[int]:
    from course_lib.tokenization.byte_level import to_byte_symbols as reference

    symbols = reference(text)
    got = run_learner_code(safe_cuts, symbols)
    expect(
        isinstance(got, list | tuple) and all(isinstance(i, int) for i in got),
        f"return a list of ints (positions in the symbol string), got {got!r}.",
    )
    got, want = sorted(got), _cut_variants(symbols)
    if got == want:
        return got
    where = f"safe_cuts of {text!r} ({len(symbols)} symbols) gives {got}, expected {want}"
    for kind, message in _CUT_MISTAKES:
        if got == _cut_variants(symbols, kind):
            raise ExerciseError(f"{where}: {message}.")
    raise ExerciseError(
        f"{where}. Each piece between two cuts must decode as UTF-8 on its own, and every "
        "such position is a cut."
    )


def check_safe_cuts(safe_cuts: Callable) -> None:
    """`safe_cuts(symbols)` -> the sorted positions 0 < i < len(symbols) at which a string of
    GPT-2 byte symbols can be cut so that every piece decodes as UTF-8 on its own (a byte-level
    token boundary that does not split a character)."""
    pieces = 0
    for text in _BYTE_TEXTS:
        cuts = _check_cuts_on(safe_cuts, text)
        pieces += len(cuts) + 1
    edges = (
        ("an empty string", ""),
        ("one character of one byte", "a"),
        ("one character of four bytes", "🙂"),
        ("spaces and newlines only (their symbols are not ASCII: 'Ġ', 'Ċ')", "  \n \n"),
    )
    for description, text in edges:
        with at_edge(f"{description}, {text!r}"):
            _check_cuts_on(safe_cuts, text)
    passed(
        f"your cuts split the test texts into {pieces} pieces, each decoding on its own: a "
        "byte-level BPE token that ends at one of them never cuts a character in two; any other "
        "boundary would leave bytes that decode to nothing alone."
    )


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
    for description, text in (("the empty string", ""), ("one symbol (a space, 'Ġ')", " ")):
        with at_edge(description):
            back = run_learner_code(from_byte_symbols, reference(text))
            expect(back == text, f"{reference(text)!r} came back as {back!r}, expected {text!r}.")
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
        given = dict(corpus)
        out = run_learner_code(bpe_merge_step, given)
        with at_edge("inputs left unmodified"):
            expect(
                given == corpus,
                f"`{getattr(bpe_merge_step, '__name__', 'bpe_merge_step')}` modified the "
                "word_freqs dict it was given: the caller keeps the corpus before the merge "
                "(to record it, or to try another merge). Build and return a new dict.",
            )
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
