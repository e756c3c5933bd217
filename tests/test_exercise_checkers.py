# ruff: noqa: E741  (V, H, L, I, P, T: the paper's letters)
"""The chapter 01 checkers accept correct answers and reject the stub and typical mistakes, each
with the message that names it (a table of wrong answers per checker); plus the one-line
rendering of a failed check shared by every chapter."""

import inspect
import math
import subprocess
import sys
import textwrap

import pytest
import torch

from course_lib import BertConfig, count_parameters
from course_lib.exercises import ExerciseError
from course_lib.exercises.bert import (
    check_attention,
    check_embedding_sum,
    check_masking,
    check_packed_attention_mask,
    check_parameter_formula,
    check_whole_word_mask,
)
from course_lib.exercises.core import run_learner_code


def stub(*args, **kwargs):
    raise NotImplementedError()


# ----- a failed check shows its message only ----------------------------------------------------


def test_failure_renders_as_one_line_in_ipython_and_plain_text_in_scripts():
    err = ExerciseError("the mask is ignored: add it.")
    assert str(err) == "the mask is ignored: add it."
    assert err._render_traceback_() == ["ExerciseError: the mask is ignored: add it."]
    with pytest.raises(ExerciseError) as info:
        check_attention(stub)
    assert info.value._render_traceback_() == [
        "ExerciseError: `stub` is not implemented yet: replace `raise NotImplementedError()` with "
        "your code."
    ]


def test_a_crash_in_learner_code_names_the_learners_line_not_the_checkers():
    def attention(q, k, v, mask=None):
        scores = q @ k  # wrong shapes: [.., 5, 8] @ [.., 5, 8]
        return scores, scores

    with pytest.raises(ExerciseError) as info:
        check_attention(attention)
    (line,) = info.value._render_traceback_()
    assert "`attention` raised RuntimeError" in line
    assert "`scores = q @ k" in line and "course_lib" not in line
    with pytest.raises(ExerciseError, match="raised ZeroDivisionError: division by zero"):
        run_learner_code(lambda: 1 / 0)


def test_ipython_shows_the_message_without_the_checkers_source():
    """In a real IPython shell the failed check prints one line: no traceback, no checker code
    (which would give the answer away, e.g. `(scores + mask).softmax(-1)`)."""
    pytest.importorskip("IPython")
    script = textwrap.dedent("""
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_cell("from course_lib.exercises.bert import check_attention")
        ip.run_cell("def attention(q, k, v, mask=None):\\n    raise NotImplementedError()")
        ip.run_cell("check_attention(attention)")
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    text = out.stdout + out.stderr
    assert "ExerciseError: `attention` is not implemented yet" in text, text
    assert "softmax" not in text and "Traceback" not in text and "bert.py" not in text, text


# ----- exercise 1: masking ----------------------------------------------------------------------


def good_masking(ids, special, mask_id, vocab, g, p=0.15, p_mask=0.8, low=5):
    selected = (torch.rand(ids.shape, generator=g) < p) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=g)
    out = ids.clone()
    out[selected & (roll < p_mask)] = mask_id
    rnd = selected & (roll >= p_mask) & (roll < p_mask + 0.1)
    out[rnd] = torch.randint(low, vocab, (int(rnd.sum()),), generator=g)
    return out, labels


def global_rng_masking(ids, special, mask_id, vocab, g):
    return good_masking(
        ids,
        special,
        mask_id,
        vocab,
        torch.Generator().manual_seed(int(torch.randint(0, 2**30, (1,)))),
    )


def own_seed_masking(ids, special, mask_id, vocab, g):
    return good_masking(ids, special, mask_id, vocab, torch.Generator().manual_seed(0))


def global_randint_masking(ids, special, mask_id, vocab, g):
    """Selection from `generator`, but the random tokens from torch's global RNG."""
    selected = (torch.rand(ids.shape, generator=g) < 0.15) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=g)
    out = ids.clone()
    out[selected & (roll < 0.8)] = mask_id
    rnd = selected & (roll >= 0.8) & (roll < 0.9)
    out[rnd] = torch.randint(5, vocab, (int(rnd.sum()),))
    return out, labels


def no_minus_100(ids, special, mask_id, vocab, g):
    out, labels = good_masking(ids, special, mask_id, vocab, g)
    return out, ids.clone()


def inverted_labels(ids, special, mask_id, vocab, g):
    out, labels = good_masking(ids, special, mask_id, vocab, g)
    return out, torch.where(labels == -100, ids, torch.full_like(ids, -100))


def test_masking_checker_accepts_a_correct_answer(capsys):
    check_masking(good_masking)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda *a: good_masking(*a)[::-1], "the two outputs are swapped"),
        (no_minus_100, "labels are never -100"),
        (inverted_labels, "labels are inverted"),
        (
            lambda ids, sp, m, v, g: good_masking(ids, torch.zeros_like(sp), m, v, g),
            "never be selected",
        ),
        (lambda *a: good_masking(*a, p=0.2), "expected 15%"),
        (lambda *a: good_masking(*a, p_mask=0.9), r"became \[MASK\]; expected 80%"),
        (lambda *a: good_masking(*a, low=0), "must not be special tokens"),
        (global_rng_masking, "same seed gave different masks"),
        (global_randint_masking, "same seed gave different masks"),
        (own_seed_masking, "different seed gave the same masks"),
        (lambda *a: good_masking(*a)[0], "return a tuple"),
    ],
)
def test_masking_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_masking(wrong)


# ----- exercise 2: attention --------------------------------------------------------------------


def good_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    probs = (scores + (mask if mask is not None else 0)).softmax(-1)
    return probs @ v, probs


def attention_with(
    scale=None, combine=lambda s, m: s + m, dim=-1, transpose=False, out_from_scores=False
):
    def attention(q, k, v, mask=None):
        scores = (k @ q.transpose(-1, -2)) if transpose else q @ k.transpose(-1, -2)
        scores = scores / (math.sqrt(q.shape[-1]) if scale is None else scale(q.shape[-1]))
        probs = combine(scores, mask).softmax(dim)
        return (combine(scores, mask) if out_from_scores else probs) @ v, probs

    return attention


def test_attention_checker_accepts_a_correct_answer(capsys):
    check_attention(good_attention)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (attention_with(combine=lambda s, m: s * m), "the mask multiplies the scores"),
        (attention_with(combine=lambda s, m: s * (m == 0)), "padded keys still receive attention"),
        (attention_with(combine=lambda s, m: s.masked_fill(m == 0, float("-inf"))), "NaN"),
        (attention_with(scale=lambda d: 1.0), "not scaled"),
        (attention_with(scale=lambda d: d), "SQUARE ROOT"),
        (attention_with(dim=-2), "LAST"),
        (attention_with(combine=lambda s, m: s), "mask is ignored"),
        (attention_with(transpose=True), r"transposed \(K Q\^T\)"),
        (attention_with(out_from_scores=True), "multiply the PROBABILITIES"),
        (lambda *a: good_attention(*a)[::-1], "swapped"),
        (
            lambda q, k, v, m=None: (good_attention(q, k, v, m)[1].softmax(-1) * 0 + 0.3,) * 2,
            "shape",
        ),
    ],
)
def test_attention_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_attention(wrong)


# ----- exercise 3: the embedding sum ------------------------------------------------------------


def good_embed(ids, types, word, position, segment):
    return word[ids] + position[torch.arange(ids.shape[1])] + segment[types]


def test_embedding_checker_accepts_a_correct_answer(capsys):
    check_embedding_sum(good_embed)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda ids, types, w, p, s: w[ids] + s[types], "position embeddings are missing"),
        (lambda ids, types, w, p, s: w[ids] + p[: ids.shape[1]], "segment embeddings are missing"),
        (
            lambda ids, types, w, p, s: w[ids] + p[: ids.shape[1]] + s[0],
            "every token gets segment 0",
        ),
        (lambda ids, types, w, p, s: w[ids] + p[1 : ids.shape[1] + 1] + s[types], "off by one"),
        (lambda ids, types, w, p, s: w[ids] + p[ids] + s[types], "looked up by token id"),
        (lambda *a: torch.nn.functional.layer_norm(good_embed(*a), (6,)), "applied a LayerNorm"),
        (lambda ids, types, w, p, s: w[ids].sum(-1), "shape"),
        (
            lambda ids, types, w, p, s: w[types] + p[: ids.shape[1]] + s[types],
            "not word \\+ position",
        ),
    ],
)
def test_embedding_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_embedding_sum(wrong)


# ----- exercise 4: the parameter formula --------------------------------------------------------


def good_bert(V, H, L, I, P, T):  # noqa: E741, N803
    return (V + P + T) * H + 2 * H + L * (4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H) + H * H + H


def test_parameter_formula_checker_accepts_the_formula(capsys):
    assert good_bert(30522, 768, 12, 3072, 512, 2) == count_parameters(BertConfig())["total"]
    check_parameter_formula(good_bert)
    assert "109,482,240" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        # at T = 2 a missing T x H segment table is 2H, like a LayerNorm: T = 1 and 3 tell them apart
        (
            lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - T * H,
            r"off by -1,536\): the segment",
        ),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, 2), "use T, not 2"),
        (
            lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - 2 * H,
            "LayerNorm after the embeddings",
        ),
        (
            lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - L * (H * H + H),
            "three H x H projections",
        ),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - P * H, "position table"),
        (
            lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - L * 4 * H,
            "attention projections.*or.*two LayerNorms",
        ),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - L * 2 * H, "TWO LayerNorms"),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - (2 * L + 1) * H, "not H"),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - L * (I + H), "feed-forward biases"),
        (lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - H * H - H, "pooler .* is missing"),
        (
            lambda V, H, L, I, P, T: good_bert(V, H, L, I, P, T) - L * I * H - L * H,
            "two linear maps",
        ),
        (lambda *d: float(good_bert(*d)), "return an int"),
        (lambda *d: good_bert(*d) + 7, "Compare term by term"),
    ],
)
def test_parameter_formula_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_parameter_formula(wrong)


# ----- every checker, every chapter: any answer gets a message, never a crash in the checker ----

from course_lib.exercises import albert, bert, deberta, distil, roberta  # noqa: E402

ALL_CHECKERS = [
    getattr(module, name)
    for module in (bert, roberta, albert, deberta, distil)
    for name in sorted(dir(module))
    if name.startswith("check_")
]
GARBAGE = {
    "None": lambda *a, **k: None,
    "an int": lambda *a, **k: 3,
    "a string": lambda *a, **k: "x",
    "a scalar tensor": lambda *a, **k: torch.tensor(0.5),
    "NaN": lambda *a, **k: torch.tensor(float("nan")),
    "(None, None)": lambda *a, **k: (None, None),
    "its first input": lambda *a, **k: a[0],
    "its first input twice": lambda *a, **k: (a[0], a[0]),
    "a list of tuples": lambda *a, **k: [(1, 2, 3)],
    "a dict of None": lambda *a, **k: dict.fromkeys(("input_ids", "attention_mask", "labels")),
}


def test_all_checkers_are_covered():  # update the count when a chapter adds a checker
    assert len(ALL_CHECKERS) == 29


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("checker", ALL_CHECKERS, ids=lambda c: c.__name__)
def test_any_answer_gets_an_exercise_error_not_a_crash(checker):
    # a checker of several functions (e.g. encode and decode) gets the garbage for each
    n_answers = sum(
        p.default is inspect.Parameter.empty for p in inspect.signature(checker).parameters.values()
    )
    for what, answer in GARBAGE.items():
        try:
            checker(*[answer] * n_answers)
        except ExerciseError:
            continue
        except Exception as err:  # noqa: BLE001  (the point of the test)
            pytest.fail(f"{checker.__name__} crashed on an answer returning {what}: {err!r}")
        pytest.fail(f"{checker.__name__} accepted an answer returning {what}")


# ----- exercise 5: whole-word masking -----------------------------------------------------------


def _words(word_ids):
    runs = []
    for i, w in enumerate(word_ids):
        if w is None:
            continue
        if i and word_ids[i - 1] == w:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def good_wwm(word_ids, probability, generator):
    chosen = torch.zeros(len(word_ids), dtype=torch.bool)
    words = _words(word_ids)
    for word, pick in zip(words, torch.rand(len(words), generator=generator) < probability):
        chosen[word] = bool(pick)
    return chosen


def wwm_per_token(word_ids, probability, generator):
    special = torch.tensor([w is None for w in word_ids])
    return (torch.rand(len(word_ids), generator=generator) < probability) & ~special


def wwm_token_then_extend(word_ids, probability, generator):
    hit = wwm_per_token(word_ids, probability, generator)
    chosen = torch.zeros(len(word_ids), dtype=torch.bool)
    for word in _words(word_ids):
        chosen[word] = bool(hit[word].any())
    return chosen


def wwm_by_id(word_ids, probability, generator):
    ids = sorted({w for w in word_ids if w is not None})
    picked = {w for w, r in zip(ids, torch.rand(len(ids), generator=generator)) if r < probability}
    return torch.tensor([w is not None and w in picked for w in word_ids])


def wwm_with_specials(word_ids, probability, generator):
    chosen = good_wwm(word_ids, probability, generator)
    chosen[0] = bool(torch.rand(1, generator=generator) < 0.5)
    return chosen


def wwm_global_rng(word_ids, probability, generator):
    return good_wwm(word_ids, probability, torch.Generator().manual_seed(int(torch.randint(9, ()))))


def test_whole_word_mask_checker_accepts_a_solution(capsys):
    check_whole_word_mask(good_wwm)
    assert "every word is masked whole" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (wwm_per_token, "a word is split"),
        (wwm_token_then_extend, "long words are selected more often"),
        (wwm_by_id, "word ids restart at 0 in sentence B"),
        (wwm_with_specials, "special token"),
        (wwm_global_rng, "same seeded generator gave different masks"),
        (lambda w, p, g: good_wwm(w, 0.5, g), "expected 15%"),
        (lambda w, p, g: [False] * len(w), "return a bool tensor"),
    ],
)
def test_whole_word_mask_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_whole_word_mask(wrong)


# ----- exercise 6: packed attention mask --------------------------------------------------------


def good_packed(doc_ids):
    real = doc_ids >= 0
    keep = (doc_ids[:, :, None] == doc_ids[:, None, :]) & real[:, None, :]
    keep |= torch.eye(doc_ids.shape[1], dtype=torch.bool) & ~real[:, :, None]
    return keep[:, None]


def test_packed_mask_checker_accepts_a_solution(capsys):
    check_packed_attention_mask(good_packed)
    assert "exactly its own attention" in capsys.readouterr().out
    # padding may attend to all padding instead of itself: any finite choice is right
    check_packed_attention_mask(lambda d: (d[:, :, None] == d[:, None, :])[:, None])


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda d: (d >= 0)[:, None, None, :].expand(-1, 1, d.shape[1], -1), "must not see each"),
        (
            lambda d: ((d[:, :, None] == d[:, None, :]) | (d < 0)[:, None, :])[:, None],
            "attend to padding keys",
        ),
        (
            lambda d: ((d[:, :, None] == d[:, None, :]) & (d >= 0)[:, None, :])[:, None],
            "attend to nothing",
        ),
        (lambda d: good_packed(d)[:, 0], "add the head axis"),
        (lambda d: good_packed(d).float(), "bool keep-mask"),
        (
            lambda d: good_packed(d) & ~torch.eye(d.shape[1], dtype=torch.bool),
            "themselves included",
        ),
    ],
)
def test_packed_mask_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_packed_attention_mask(wrong)


def test_check_own_work_names_a_call_to_the_library_and_accepts_own_code():
    """The hidden test behind graded notebooks: a right answer that calls the library's version
    (or a checker's reference) fails with the name of what it called; the same answer written
    by hand passes, and what the learner's code calls only inside given objects is not counted."""
    import math

    import torch.nn.functional as F

    from course_lib.exercises.bert import (
        _reference_packed_mask,
        check_attention,
        check_packed_attention_mask,
    )
    from course_lib.exercises.core import ExerciseError, check_own_work

    def attention(q, k, v, mask=None):
        probs = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask).softmax(-1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), probs

    with pytest.raises(ExerciseError, match="ready-made implementation.*scaled_dot_product"):
        check_own_work(attention, check_attention, F.scaled_dot_product_attention)

    def packed_attention_mask(doc_ids):
        return _reference_packed_mask(doc_ids)

    with pytest.raises(ExerciseError, match="_reference_packed_mask"):
        check_own_work(packed_attention_mask, check_packed_attention_mask)

    def by_hand(q, k, v, mask=None):
        probs = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask).softmax(-1)
        return probs @ v, probs

    check_own_work(by_hand, check_attention, "course_lib.modules.attention")


# ----- the edges: answers right only at the typical sizes are rejected, naming the edge ---------


def masking_in_place(ids, special, mask_id, vocab, g):
    """Right values, but the caller's input_ids are overwritten."""
    out, labels = good_masking(ids, special, mask_id, vocab, g)
    ids.copy_(out)
    return ids, labels


def masking_without_last_id(ids, special, mask_id, vocab, g):
    """Random ids from randint(5, vocab - 1): the last id of the vocabulary is never drawn."""
    return good_masking(ids, special, mask_id, vocab - 1, g)


def attention_exp_without_max(q, k, v, mask=None):
    """softmax written as exp / sum, without subtracting the row maximum: inf / inf at large scores."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
    e = scores.exp()
    probs = e / e.sum(-1, keepdim=True)
    return probs @ v, probs


def attention_mask_as_b11t(q, k, v, mask=None):
    """The mask reshaped to (B, 1, 1, T): a per-query (B, 1, T, T) mask does not fit."""
    mask = mask.view(mask.shape[0], 1, 1, mask.shape[-1])
    return good_attention(q, k, v, mask)


def attention_first_mask_row(q, k, v, mask=None):
    """Only the first query's row of the mask is used for every query."""
    return good_attention(q, k, v, mask[:, :, :1, :])


def attention_squeezed(q, k, v, mask=None):
    out, probs = good_attention(q, k, v, mask)
    return out.squeeze(), probs.squeeze()


def attention_minus_inf(q, k, v, mask=None):
    """Masked keys set to -inf: a query whose keys are all padding gets 0/0 = NaN."""
    scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(mask < 0, float("-inf"))
    probs = scores.softmax(-1)
    return probs @ v, probs


def embed_interpolated(ids, types, word, position, segment):
    """Segments as row 0 + type * (row 1 - row 0): right for types 0 and 1 only."""
    seg = segment[0] + types[..., None] * (segment[1] - segment[0])
    return word[ids] + position[torch.arange(ids.shape[1])] + seg


def embed_squeezed(ids, types, word, position, segment):
    return good_embed(ids, types, word, position, segment).squeeze()


def wwm_prev_kept_over_none(word_ids, probability, generator):
    """`prev` not reset at None: a one-word sentence A (id 0) and B's first word (id 0) merge."""
    words, prev = [], None
    for i, w in enumerate(word_ids):
        if w is None:
            continue
        if w == prev:
            words[-1].append(i)
        else:
            words.append([i])
        prev = w
    chosen = torch.zeros(len(word_ids), dtype=torch.bool)
    for word, pick in zip(words, torch.rand(len(words), generator=generator) < probability):
        chosen[word] = bool(pick)
    return chosen


def packed_padding_at_end(doc_ids):
    """Real tokens taken as the first (number of real tokens) positions: wrong with left padding."""
    n_real = (doc_ids >= 0).sum(1)
    real = torch.arange(doc_ids.shape[1])[None, :] < n_real[:, None]
    keep = (doc_ids[:, :, None] == doc_ids[:, None, :]) & real[:, None, :]
    keep |= torch.eye(doc_ids.shape[1], dtype=torch.bool) & ~real[:, :, None]
    return keep[:, None]


def packed_squeezed(doc_ids):
    return good_packed(doc_ids).squeeze()[:, None]


@pytest.mark.parametrize(
    "checker, wrong, message",
    [
        # the eight answers a student found accepted (issue 38), each named by its edge
        (check_attention, attention_exp_without_max, r"large scores.*NaN or inf"),
        (
            check_attention,
            attention_mask_as_b11t,
            r"per-query mask of shape \(B, 1, T, T\).*raised",
        ),
        (check_attention, attention_first_mask_row, r"per-query mask.*probabilities differ"),
        (check_attention, attention_squeezed, r"batch of one with one head.*do not \.squeeze"),
        (check_embedding_sum, embed_interpolated, r"three segment types.*segment type \[2\]"),
        (check_packed_attention_mask, packed_padding_at_end, r"left padding"),
        (check_whole_word_mask, wwm_prev_kept_over_none, r"one-word sentence A.*reset"),
        (check_masking, masking_without_last_id, r"tiny vocabulary.*id \[6\] never appeared"),
        (
            check_masking,
            masking_in_place,
            r"inputs left unmodified.*modified its input `input_ids`",
        ),
        # more of the same edges
        (check_attention, attention_minus_inf, r"keys are all padding.*NaN"),
        (check_embedding_sum, embed_squeezed, r"batch of one.*do not \.squeeze"),
        (check_packed_attention_mask, packed_squeezed, r"batch of one.*do not \.squeeze"),
        (
            check_masking,
            lambda *a: tuple(t.squeeze() for t in good_masking(*a)),
            r"batch of one.*no \.squeeze",
        ),
    ],
    ids=lambda x: getattr(x, "__name__", None) if callable(x) else None,
)
def test_an_answer_right_only_at_typical_sizes_is_rejected_at_its_edge(checker, wrong, message):
    with pytest.raises(ExerciseError, match=message):
        checker(wrong)


def test_the_edge_answers_pass_the_typical_inputs():
    """The planted edge answers are right at the typical sizes: only the edges reject them (so
    each edge test above tests the edge, not an ordinary mistake)."""
    from course_lib.exercises import bert

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 5)
    mask[0, ..., 3:] = torch.finfo(torch.float32).min
    for answer in (
        attention_exp_without_max,
        attention_mask_as_b11t,
        attention_first_mask_row,
        attention_squeezed,
        attention_minus_inf,
    ):
        assert torch.allclose(answer(q, k, v, mask)[1], good_attention(q, k, v, mask)[1], atol=1e-6)
    ids, special = bert._masking_batch(4, 30)
    for answer in (masking_in_place, masking_without_last_id):
        out, labels = answer(ids.clone(), special, 4, 1000, torch.Generator().manual_seed(1))
        assert torch.equal(
            labels, good_masking(ids, special, 4, 1000, torch.Generator().manual_seed(1))[1]
        )
    d = bert._packed_doc_ids()
    assert torch.equal(packed_padding_at_end(d), good_packed(d))
    for row in bert._word_id_rows(50, torch.Generator().manual_seed(5)):
        assert torch.equal(
            wwm_prev_kept_over_none(row, 0.15, torch.Generator().manual_seed(2)),
            good_wwm(row, 0.15, torch.Generator().manual_seed(2)),
        )
