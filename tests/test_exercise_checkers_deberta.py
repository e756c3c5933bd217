"""The chapter 04 DeBERTa checkers accept correct answers and reject typical mistakes with
specific feedback."""

import math

import pytest
import torch

from course_lib.exercises import ExerciseError
from course_lib.exercises.deberta import (
    check_bucket_ranges,
    check_c2p,
    check_clipped_pairs,
    check_delta,
    check_emd_trace,
    check_translation_invariance_test,
)
from course_lib.modules.relative_position import log_bucket_position

# ----- δ(i, j)


def good_delta(i, j, k):
    return (i - j + k).clamp(0, 2 * k - 1)


def stub(*args):
    raise NotImplementedError()


def test_delta_checker_accepts_a_correct_answer(capsys):
    check_delta(good_delta)
    assert "Correct!" in capsys.readouterr().out
    # a float answer with whole numbers is fine too
    check_delta(lambda i, j, k: good_delta(i, j, k).float())


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda i, j, k: good_delta(j, i, k), r"you computed δ\(j, i\)"),
        (lambda i, j, k: i - j + k, "no clipping"),
        (lambda i, j, k: (i - j).clamp(0, 2 * k - 1), "not shifted: add k"),
        (lambda i, j, k: (i - j + k).clamp(0, 2 * k), "off by one at the clip"),
        (lambda i, j, k: (i - j + k).clamp(0, 2 * k - 1)[:1], "should broadcast"),
        (lambda i, j, k: (i - j + k + 0.5).clamp(0, 2 * k - 1), "whole numbers"),
        (
            lambda i, j, k: (i - j + k).clamp(1, 2 * k - 1),
            r"δ\(i=\d+, j=\d+\) with k=2 should be 0",
        ),
    ],
)
def test_delta_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_delta(wrong)


# ----- which distances share a log bucket (a design exercise)


def good_bucket_ranges(bucket_size, max_position, lowest=None, highest=None):
    """Brute force with the library's buckets over every distance the sequence has."""
    top = max_position - 1
    lowest, highest = -top if lowest is None else lowest, top if highest is None else highest
    rel = torch.arange(lowest, highest + 1)
    ranges = {}
    for d, b in zip(rel.tolist(), log_bucket_position(rel, bucket_size, max_position).tolist()):
        lo, hi = ranges.get(int(b), (d, d))
        ranges[int(b)] = (min(lo, d), max(hi, d))
    return ranges


def reasoned_bucket_ranges(bucket_size, max_position):
    """The same answer reasoned out in plain Python: bucket each positive distance with the
    formula, then mirror the ranges for the negative side (lists instead of tuples are fine)."""
    mid, top = bucket_size // 2, max_position - 1
    ranges = {0: [0, 0]}
    for d in range(1, top + 1):
        k = d if d <= mid else mid + math.ceil(math.log(d / mid) / math.log(top / mid) * (mid - 1))
        lo, hi = ranges.get(k, (d, d))
        ranges[k] = [min(lo, d), max(hi, d)]
    ranges.update({-k: [-hi, -lo] for k, (lo, hi) in list(ranges.items()) if k > 0})
    return ranges


def shifted(bucket, change):
    """The right answer with one bucket's range changed by `change(lo, hi)`."""

    def bucket_ranges(bucket_size, max_position):
        ranges = good_bucket_ranges(bucket_size, max_position)
        b = bucket(bucket_size)
        ranges[b] = change(*ranges[b])
        return ranges

    return bucket_ranges


def boundary_off_by_one(bucket_size, max_position):
    """Bucket mid takes mid and mid + 1, the next bucket starts one later: no overlap, no gap."""
    ranges = good_bucket_ranges(bucket_size, max_position)
    mid = bucket_size // 2
    ranges[mid] = (mid, mid + 1)
    ranges[mid + 1] = (mid + 2, ranges[mid + 1][1])
    return ranges


def test_bucket_ranges_checker_accepts_correct_answers(capsys):
    check_bucket_ranges(good_bucket_ranges)
    check_bucket_ranges(reasoned_bucket_ranges)
    assert capsys.readouterr().out.count("Correct!") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda b, m: good_bucket_ranges(b, m, lowest=0), "only buckets >= 0"),
        (lambda b, m: good_bucket_ranges(b, m, -m, m), "not reachable"),
        (shifted(lambda b: b // 2 + 2, lambda lo, hi: (lo - 1, hi)), "the ranges overlap"),
        (shifted(lambda b: b // 2 + 2, lambda lo, hi: (lo + 1, hi)), "is in no bucket"),
        (boundary_off_by_one, "off by one at the exact/log boundary"),
        (lambda b, m: {**good_bucket_ranges(b, m), b: (0, 0)}, "does not exist"),
        (lambda b, m: [(0, 0)], "return a dict"),
        (lambda b, m: dict.fromkeys(range(-b + 1, b), 3), "give a pair"),
    ],
)
def test_bucket_ranges_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_bucket_ranges(wrong)


# ----- c2p / p2c gathers


def rows_of(rel, span):
    return (rel + span).clamp(0, 2 * span - 1)


def good_c2p(query, key_r, rel, span):
    scores = query @ key_r.transpose(-1, -2)
    return torch.gather(scores, -1, rows_of(rel, span).expand(query.shape[0], *rel.shape))


def test_c2p_checker_accepts_a_correct_answer(capsys):
    check_c2p(good_c2p)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda q, kr, rel, s: good_c2p(q, kr, -rel, s), r"you read row δ\(j, i\)"),
        (lambda q, kr, rel, s: good_c2p(q, kr, rel, s) / math.sqrt(q.shape[-1]), "scaled"),
        (lambda q, kr, rel, s: good_c2p(q, kr, rel, s).transpose(-1, -2), "transposed"),
        (
            lambda q, kr, rel, s: torch.gather(
                q @ kr.transpose(-1, -2), -1, rel.clamp(0, 2 * s - 1).expand(q.shape[0], *rel.shape)
            ),
            "add span to the distance",
        ),
        (
            lambda q, kr, rel, s: torch.gather(
                q @ kr.transpose(-1, -2), -1, (rel + s).expand(q.shape[0], *rel.shape)
            ),
            "clip the rows to 0 .. 7",
        ),
        (lambda q, kr, rel, s: good_c2p(q, kr, rel, s)[0], r"expected \[heads, query, key\]"),
    ],
)
def test_c2p_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_c2p(wrong)


# ----- where p2c's window clips, in the code and in the paper (a design exercise)


def clipped(n, span, code_of=lambda d, s: (d < -s) | (d >= s), paper="mirror"):
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    code = code_of(d, span)
    return code, (code.T if paper == "mirror" else code)


def test_clipped_pairs_checker_accepts_a_correct_answer(capsys):
    check_clipped_pairs(clipped)

    # a loop over the pairs, using the rows themselves, is fine too
    def by_rows(n, span):
        code = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            for j in range(n):
                code[i, j] = good_delta(torch.tensor(i), torch.tensor(j), span) != i - j + span
        return code, code.T.clone()

    check_clipped_pairs(by_rows)
    assert capsys.readouterr().out.count("Correct!") == 2


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda n, s: clipped(n, s, code_of=lambda d, s: d.abs() > s), "not symmetric"),
        (lambda n, s: clipped(n, s, code_of=lambda d, s: d.abs() >= s), "is row 0 exactly"),
        (lambda n, s: clipped(n, s, code_of=lambda d, s: (d > s) | (d <= -s)), "mirrored"),
        (lambda n, s: clipped(n, s, paper="same"), "the paper's mask equals the code's"),
        (lambda n, s: clipped(n, s, code_of=lambda d, s: d > 100), r"should be True"),
        (lambda n, s: clipped(n, s)[0], "return a pair"),
        (lambda n, s: tuple(m.int() for m in clipped(n, s)), "should be boolean"),
        (lambda n, s: tuple(m[1:] for m in clipped(n, s)), r"should be \[n, n\]"),
    ],
)
def test_clipped_pairs_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_clipped_pairs(wrong)


# ----- writing the translation-invariance test (a design exercise) --------------------------------


def invariance_test(shifts=range(1, 40), exact=False, own_block=True):
    """A learner's test: a random phrase, alone and after `shift` filler tokens; compare blocks."""

    def translation_invariant(score_fn, vocab_size):
        g = torch.Generator().manual_seed(0)
        phrase = torch.randint(vocab_size, (6,), generator=g)
        alone = score_fn(phrase)
        for shift in shifts:
            filler = torch.randint(vocab_size, (shift,), generator=g)
            ids = torch.cat([filler, phrase, torch.randint(vocab_size, (2,), generator=g)])
            scores = score_fn(ids)
            at = shift if own_block else 0
            block = scores[at : at + 6, at : at + 6]
            same = torch.equal(block, alone) if exact else torch.allclose(block, alone, atol=1e-5)
            if not same:
                return False
        return True

    return translation_invariant


def test_invariance_checker_accepts_a_good_test(capsys):
    check_translation_invariance_test(invariance_test())
    assert "rejects every score function that sees absolute positions" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda fn, v: True, "says every score function is invariant"),
        (lambda fn, v: False, "not invariant"),
        (invariance_test(exact=True), "use torch.allclose"),
        (invariance_test(own_block=False), "the wrong block"),
        (invariance_test(shifts=range(2, 40, 2)), "parity of the position"),
        (invariance_test(shifts=range(1, 6)), "only past position 20"),
        (lambda fn, v: torch.tensor(True), "return True or False"),
    ],
)
def test_invariance_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_translation_invariance_test(wrong)


# ----- a trace of the enhanced mask decoder (a design exercise) ------------------------------------


def good_trace(steps):
    trace, queries = [("H", "H")], "H+P"
    for step in range(1, steps + 1):
        trace.append((queries, "H"))
        queries = f"out{step}"
    return trace


def trace_with(**change):
    def emd_trace(steps):
        trace = [] if change.get("no_encoder") else [("H", "H")]
        queries = "H" if change.get("no_positions") else "H+P"
        for step in range(1, steps + 1):
            keys = queries if change.get("self_attention") else "H+P" if change.get("kp") else "H"
            trace.append((queries, keys))
            queries = f"out{step}+P" if change.get("every") else f"out{step}"
        return trace[: change.get("cap")]

    return emd_trace


def test_emd_trace_checker_accepts_the_trace(capsys):
    check_emd_trace(good_trace)
    assert "hooks record inside a real DebertaForMaskedLM" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (trace_with(no_encoder=True), "the encoder's own pass is missing"),
        (trace_with(every=True), "positions enter at every pass"),
        (trace_with(kp=True), "keys and values carry the positions"),
        (trace_with(self_attention=True), "keys and values change from pass to pass"),
        (trace_with(no_positions=True), "no absolute positions"),
        (lambda n: [(k, q) for q, k in good_trace(n)], "queries and keys are swapped"),
        (
            lambda n: (
                [("H", "H")]
                + [
                    (q.replace("H", "encoder_out"), k.replace("H", "encoder_out"))
                    for q, k in good_trace(n)[1:]
                ]
            ),
            "starts from the encoder's output",
        ),
        (trace_with(cap=3), r"three decoder passes \(steps = 3\).*runs 4 times"),
        (lambda n: good_trace(2), r"one decoder pass \(steps = 1\).*use the argument"),
        (lambda n: "H H+P", "return a list of \\(queries, keys_values\\) pairs"),
        (lambda n: good_trace(n)[:-1] + [("out9", "H")], "call 2 should be"),
    ],
)
def test_emd_trace_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_emd_trace(wrong)


# ----- the edges: answers right only at the typical sizes are rejected, naming the edge ---------


def delta_from_arange(i, j, k):
    """Builds 0..n-1 itself instead of using the positions it is given."""
    n = i.shape[0]
    return good_delta(torch.arange(n)[:, None], torch.arange(n)[None, :], k)


def delta_clip_2k(i, j, k):
    """Keeps at least three rows (clamps to max(2k - 1, 2)): right for k >= 2, not for k = 1."""
    return (i - j + k).clamp(0, max(2 * k - 1, 2))


@pytest.mark.parametrize(
    "checker, wrong, message",
    [
        (check_delta, delta_from_arange, "positions that do not start at 0"),
        (check_delta, delta_clip_2k, r"the smallest table \(k = 1"),
        (check_c2p, lambda *a: good_c2p(*a).squeeze(), r"one head.*do not \.squeeze"),
    ],
    ids=lambda x: getattr(x, "__name__", None) if callable(x) else None,
)
def test_an_answer_right_only_at_typical_sizes_is_rejected_at_its_edge(checker, wrong, message):
    with pytest.raises(ExerciseError, match=message):
        checker(wrong)
