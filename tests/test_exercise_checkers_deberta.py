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
    check_enhanced_mask_decoder,
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


# ----- the enhanced mask decoder's forward pass (a design exercise) --------------------------------


def emd(start=-2, positions="first", keys="H", steps=None, in_place=False):
    """A learner's decoder with one decision made differently."""

    def enhanced_mask_decoder(last_layer, hidden_states, position_table, n_steps):
        h = hidden_states[start]
        p = position_table[: h.shape[1]]
        if in_place:
            query = h
            query += p  # also changes h, the keys and values
        else:
            query = h + p if positions == "first" else h
        for _ in range(n_steps if steps is None else steps):
            if positions == "every step":
                query = query + p
            if keys == "H":
                query = last_layer(h, query_states=query)
            elif keys == "H + P":
                query = last_layer(h + p, query_states=query)
            elif keys == "query":
                query = last_layer(query)
            else:  # swapped roles
                query = last_layer(query, query_states=h)
        return query + p if positions == "end" else query

    return enhanced_mask_decoder


def test_emd_checker_accepts_the_decoder(capsys):
    check_enhanced_mask_decoder(emd())
    assert "exactly what DebertaForMaskedLM's does" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda layer, hs, table, n: hs[-1], "the encoder's output unchanged"),
        (emd(start=-1), r"you started from the encoder's output.*hidden_states\[-2\]"),
        (emd(start=0), r"you started from hidden_states\[-4\]"),
        (emd(positions="none"), "no absolute positions"),
        (emd(positions="every step"), "added the positions at every step"),
        (emd(positions="end"), "after the decoder"),
        (emd(keys="H + P"), "reached the keys and values too"),
        (emd(keys="query"), "keys and values changed from step to step"),
        (emd(keys="swapped"), "the roles are swapped"),
        (emd(steps=2), r"\(2 layers, steps = 3\) you ran the layer 2 time\(s\)"),
        (emd(in_place=True), "changed `hidden_states` in place"),
        (lambda layer, hs, table, n: emd()(layer, hs, table, n)[0], r"\[batch, seq, hidden\]"),
        (lambda layer, hs, table, n: emd()(layer, hs, table, n) * 1.01, "The recipe"),
    ],
)
def test_emd_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_enhanced_mask_decoder(wrong)


def test_emd_checker_runs_other_cases():
    """Hidden tests pass other (layers, steps, tokens): one layer (H is the embeddings' output),
    a single token, and a length other than 11, which a table sliced to 11 rows gets wrong."""
    check_enhanced_mask_decoder(emd(), cases=((1, 1, 1), (2, 4, 5)))

    def eleven_rows(last_layer, hidden_states, position_table, n_steps):
        h = hidden_states[-2]
        query = h + position_table[:11]  # the visible cases' length, not h.shape[1]
        for _ in range(n_steps):
            query = last_layer(h, query_states=query)
        return query

    check_enhanced_mask_decoder(eleven_rows)
    with pytest.raises(ExerciseError, match="size of tensor a"):
        check_enhanced_mask_decoder(eleven_rows, cases=((2, 4, 5),))
    with pytest.raises(
        ExerciseError, match=r"\(2 layers, steps = 4, 5 tokens\) you ran the layer 2"
    ):
        check_enhanced_mask_decoder(emd(steps=2), cases=((2, 4, 5),))
