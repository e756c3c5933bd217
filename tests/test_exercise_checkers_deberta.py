"""The chapter 04 DeBERTa checkers accept correct answers and reject typical mistakes with
specific feedback."""

import math

import pytest
import torch

from course_lib.exercises import ExerciseError
from course_lib.exercises.deberta import (
    check_c2p,
    check_delta,
    check_enhanced_mask_decoder,
    check_log_bucket,
    check_p2c,
    check_translation_invariance_test,
)

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


# ----- log buckets


def good_log_bucket(rel, bucket_size, max_position):
    mid = bucket_size // 2
    sign = torch.sign(rel)
    abs_pos = torch.where(rel.abs() < mid, torch.tensor(mid - 1), rel.abs()).float()
    log_pos = (
        torch.ceil(
            torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)
        )
        + mid
    )
    return torch.where(rel.abs() <= mid, rel.float(), log_pos * sign).long()


def bucket_with(rounding=torch.ceil, top_offset=1, keep_sign=True):
    def log_bucket(rel, bucket_size, max_position):
        mid = bucket_size // 2
        abs_pos = rel.abs().clamp(min=1).float()
        scale = math.log((max_position - top_offset) / mid)
        log_pos = rounding(torch.log(abs_pos / mid) / scale * (mid - 1)) + mid
        signed = log_pos * (torch.sign(rel) if keep_sign else 1)
        exact = rel.float() if keep_sign else rel.abs().float()
        return torch.where(rel.abs() <= mid, exact, signed)

    return log_bucket


def test_log_bucket_checker_accepts_a_correct_answer(capsys):
    check_log_bucket(good_log_bucket)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda rel, b, m: rel, "no compression"),
        (bucket_with(keep_sign=False), "the sign is lost"),
        (bucket_with(rounding=torch.floor), r"rounds the logarithmic part UP \(ceil\)"),
        (bucket_with(rounding=torch.round), "rounded to the nearest"),
        (bucket_with(top_offset=0), "the log scale is off"),
        (lambda rel, b, m: good_log_bucket(rel, b, m)[1:], "one bucket per distance"),
        (lambda rel, b, m: torch.log1p(rel.abs().float()), "whole numbers"),
        # compressing too early: distances below bucket_size // 2 go wrong, named as such
        (lambda rel, b, m: good_log_bucket(rel, b // 2, m), "must stay exact"),
    ],
)
def test_log_bucket_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_log_bucket(wrong)


# ----- c2p / p2c gathers


def rows_of(rel, span):
    return (rel + span).clamp(0, 2 * span - 1)


def good_c2p(query, key_r, rel, span):
    scores = query @ key_r.transpose(-1, -2)
    return torch.gather(scores, -1, rows_of(rel, span).expand(query.shape[0], *rel.shape))


def good_p2c(key, query_r, rel, span):
    # entry (i, j): key j against row δ(i, j); a loop written the obvious way
    heads, n, _ = key.shape
    rows = rows_of(rel, span)
    out = torch.empty(heads, n, n)
    for i in range(n):
        for j in range(n):
            out[:, i, j] = (key[:, j] * query_r[:, rows[i, j]]).sum(-1)
    return out


def test_gather_checkers_accept_correct_answers(capsys):
    check_c2p(good_c2p)
    check_p2c(good_p2c)
    assert capsys.readouterr().out.count("Correct!") == 2


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


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda k, qr, rel, s: good_p2c(k, qr, -rel, s), "paper's equation 4"),
        (lambda k, qr, rel, s: good_c2p(k, qr, rel, s), "used the content of token i"),
        (lambda k, qr, rel, s: good_p2c(k, qr, rel, s).transpose(-1, -2), "transposed"),
        (lambda k, qr, rel, s: good_p2c(k, qr, rel, s) / math.sqrt(3 * k.shape[-1]), "scaled"),
        (lambda k, qr, rel, s: good_p2c(k, qr, rel, s) + 1.0, r"key\[h, j\] · query_r"),
    ],
)
def test_p2c_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_p2c(wrong)


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
