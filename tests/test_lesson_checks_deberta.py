"""The checks of DeBERTa's lesson build cells (chapter 04, notebooks 01-04, 11, 12): each says
"Not written yet" on the stub and hands back the library's version, names typical wrong answers
(including answers right only at typical sizes), and accepts the master notebook's answer."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lesson_masters
import pytest
import torch

from course_lib.exercises import lessons_deberta as checks
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import deberta as lab04
from course_lib.labs import deberta_positions as dp
from course_lib.modules.relative_position import c2p_index, p2c_index

ROOT = Path(__file__).resolve().parents[1]
MASTERS = ROOT / "chapters" / "04_deberta_distil" / "instructor"


def master_answer(notebook: str, name: str, **namespace: Any) -> Callable:
    """`name` as the master's build cell defines it, exec'd with what the lesson has imported."""
    return lesson_masters.master_answer(
        "04_deberta_distil",
        notebook,
        name,
        IGNORE_INDEX=IGNORE_INDEX,
        lab04=lab04,
        dp=dp,
        c2p_index=c2p_index,
        **namespace,
    )


def stub(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError()


def verdict(check: checks.BuildCheck, candidate: Callable, capsys) -> tuple[Any, str]:
    returned = check(candidate)
    return returned, capsys.readouterr().out


def assert_rejected(check: checks.BuildCheck, candidate: Callable, message: str, capsys) -> None:
    returned, out = verdict(check, candidate, capsys)
    assert returned is check.fallback
    assert out.startswith("✗ "), out
    assert re.search(message, out), out
    assert "uses the library's" in out


# (check, notebook, name, extra namespace of the master's cell)
MASTER_ANSWERS = [
    (checks.check_delta_by_hand, "01_relative_positions.ipynb", "delta_by_hand", {}),
    (checks.check_log_bucket, "01_relative_positions.ipynb", "my_log_bucket", {}),
    (
        checks.check_relative_position,
        "01_relative_positions.ipynb",
        "my_relative_position",
        {"my_log_bucket": checks._log_bucket},
    ),
    (
        checks.check_disentangled_scores,
        "02_disentangled_attention.ipynb",
        "my_disentangled_scores",
        {},
    ),
    (
        checks.check_enhanced_mask_decoder,
        "03_enhanced_mask_decoder.ipynb",
        "my_enhanced_mask_decoder",
        {},
    ),
    (checks.check_discovery_step, "04_deberta_ablation.ipynb", "my_discovery_step", {}),
    (checks.check_look_back, "11_deberta_labs_attention.ipynb", "my_look_back", {}),
    (checks.check_pointed_at, "11_deberta_labs_attention.ipynb", "my_pointed_at", {}),
    (checks.check_shift_task, "12_deberta_labs_positions.ipynb", "my_shift_task", {}),
]


@pytest.mark.parametrize(
    "check, notebook, name, namespace", MASTER_ANSWERS, ids=[m[2] for m in MASTER_ANSWERS]
)
def test_the_masters_answer_is_correct(check, notebook, name, namespace, capsys):
    answer = master_answer(notebook, name, **namespace)
    returned, out = verdict(check, answer, capsys)
    assert returned is answer, out
    assert out.startswith("✓ Correct!"), out


@pytest.mark.parametrize(
    "check", [m[0] for m in MASTER_ANSWERS], ids=[m[2] for m in MASTER_ANSWERS]
)
def test_a_stub_is_not_written_yet_and_the_library_stands_in(check, capsys):
    returned, out = verdict(check, stub, capsys)
    assert returned is check.fallback
    assert out == check.stub_output("stub")
    assert out.startswith("· Not written yet: `stub` — ") and check.todo in out


# ----- the references written in the checker module equal the model and the experiment --------


def _tiny_deberta(**changes: Any) -> Any:
    from course_lib import DebertaConfig
    from course_lib.models.deberta import DebertaForMaskedLM

    torch.manual_seed(0)
    config = DebertaConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, max_relative_positions=32,
        position_buckets=8, **changes,
    )  # fmt: skip
    return DebertaForMaskedLM(config).eval()


def test_disentangled_scores_equal_the_models_terms():
    model = _tiny_deberta()
    backbone = model.backbone
    attention = backbone.encoder.layers[0].attention
    ids = torch.randint(5, 100, (2, 20))  # 20 tokens: distances beyond the 8 buckets' exact range
    with torch.no_grad():
        terms = backbone.attention_terms(ids)[0]
        x = backbone.embeddings(ids)
        table, rel = backbone.encoder.relative_inputs(ids.shape[1], ids.device)
        heads = attention.split_heads
        scores = checks.disentangled_scores(
            heads(attention.query(x)),
            heads(attention.key(x)),
            heads(attention.query(table[None])),
            heads(attention.key(table[None])),
            rel,
            model.config.relative_span,
        )
    assert torch.allclose(scores, terms["c2c"] + terms["c2p"] + terms["p2c"], atol=1e-5)


def test_enhanced_mask_decoder_equals_the_models():
    model = _tiny_deberta(use_emd=True, emd_steps=2)
    with torch.no_grad():
        model.backbone.embeddings.position_embeddings.weight.normal_(0, 1)
    ids = torch.randint(5, 100, (2, 9))
    encoder = model.backbone.encoder
    layer = encoder.layers[-1]
    table, relative = encoder.relative_inputs(ids.shape[1], ids.device)
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        states = checks.enhanced_mask_decoder(
            lambda x, query_states: layer(
                x, None, False, table, relative, query_states=query_states
            )[0],
            out.hidden_states[-2],
            model.backbone.embeddings.position_embeddings.weight,
            model.config.emd_steps,
        )
        logits = model.mlm_head(states)
    assert torch.allclose(logits, out.mlm_logits, atol=1e-5)


def test_discovery_step_equals_the_experiments_on_the_committed_runs():
    results = json.loads(
        (ROOT / "experiments/04_deberta_distil/results/deberta_ablation.json").read_text()
    )
    bag = [r for r in results["runs"] if r["arm"] == "no-positions"]
    track = {
        row["step"]: statistics.fmean(
            p["eval_mlm_loss"] for r in bag for p in r["curve"] if p["step"] == row["step"]
        )
        for row in bag[0]["curve"]
    }
    ours = {
        (r["arm"], r["seed"]): checks.discovery_step(
            r["curve"], track, results["discovery"]["margin"]
        )
        for r in results["runs"]
        if r["arm"] != "no-positions"
    }
    assert ours == {(d["arm"], d["seed"]): d["step"] for d in results["discovery"]["runs"]}
    assert any(step is None for step in ours.values()) and any(ours.values())


# ----- typical wrong answers, each named --------------------------------------------------------


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda i, j, k: i - j + k, "nothing is clipped"),
        (lambda i, j, k: (j - i + k).clamp(0, 2 * k - 1), r"you computed δ\(j, i\)"),
        (lambda i, j, k: (i - j + k).clamp(0, 2 * k), "off by one at the clip"),
        (lambda i, j, k: (i - j).clamp(0, 2 * k - 1), "not shifted by k"),
        # right for short sequences (no distance beyond the left end): only one side clipped
        (lambda i, j, k: (i - j + k).clamp(min=0), "only one side is clipped"),
        (lambda i, j, k: (i - j + k).clamp(0, 2 * k - 1).float() + 0.5, "whole numbers"),
    ],
)
def test_delta_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_delta_by_hand, wrong, message, capsys)


def _buckets(distance, bucket_size, max_position, *, dtype=torch.float32, rounding=torch.ceil,
             mid=None, top=None):  # fmt: skip
    mid = bucket_size // 2 if mid is None else mid
    top = (max_position - 1) if top is None else top
    far = distance.abs() > mid
    size = distance.abs().to(dtype).clamp(min=mid)
    squeezed = mid + rounding(
        torch.log(size / mid) / torch.log(torch.tensor(top / mid, dtype=dtype)) * (mid - 1)
    )
    return torch.where(far, distance.sign() * squeezed.long(), distance)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda d, b, m: _buckets(d, b, m).abs(), "keep the sign"),
        (lambda d, b, m: d.clone(), "nothing is squeezed"),
        # right at deberta-v3's and the chapter's settings; float64 differs at (32, 129)
        (lambda d, b, m: _buckets(d, b, m, dtype=torch.float64), "float64"),
        (lambda d, b, m: _buckets(d, b, m, rounding=torch.floor), r"\(ceil\), not floor"),
        (lambda d, b, m: _buckets(d, b, m, top=m), "not max_position"),
        # right for every even bucket count: mid = bucket_size / 2 differs only for odd ones
        (lambda d, b, m: _buckets(d, b, m, mid=b / 2), r"an integer, not 4\.5"),
    ],
)
def test_log_bucket_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_log_bucket, wrong, message, capsys)


def test_log_bucket_in_place_abs_is_named(capsys):
    def in_place(distance, bucket_size, max_position):
        sign = distance.sign()
        distance.abs_()
        return sign * _buckets(distance, bucket_size, max_position)

    assert_rejected(checks.check_log_bucket, in_place, "in place", capsys)


def _plain(q, k):
    return torch.arange(q)[:, None] - torch.arange(k)[None, :]


@pytest.mark.parametrize(
    "wrong, message",
    [
        # right for every sequence up to bucket_size // 2 tokens (the lesson's 5 x 5 example)
        (lambda q, k, b, m: _plain(q, k), "not bucketed"),
        (lambda q, k, b, m: checks._log_bucket(-_plain(q, k), b, m), "sign is flipped"),
        # right for square matrices only
        (lambda q, k, b, m: checks._log_bucket(_plain(q, q), b, m), r"return \[q_len, k_len\]"),
    ],
)
def test_relative_position_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_relative_position, wrong, message, capsys)


def _scores(variant: str) -> Callable:
    def scores(q, k, q_r, k_r, rel, span):
        rows = rel + span if variant == "no clip" else c2p_index(rel, span)
        grid = rows.expand(*q.shape[:2], *rows.shape)
        c2c = q @ k.transpose(-1, -2)
        c2p = torch.gather(q @ k_r.transpose(-1, -2), -1, grid)
        by_key = k @ q_r.transpose(-1, -2)
        if variant == "paper":
            paper = p2c_index(rel, span, paper=True).expand(*q.shape[:2], *rows.shape)
            p2c = torch.gather(by_key, -1, paper.transpose(-1, -2)).transpose(-1, -2)
        elif variant == "not transposed":
            p2c = torch.gather(by_key, -1, grid)
        elif variant == "key weights":
            by_key = k @ k_r.transpose(-1, -2)
            p2c = torch.gather(by_key, -1, grid.transpose(-1, -2)).transpose(-1, -2)
        else:
            p2c = torch.gather(by_key, -1, grid.transpose(-1, -2)).transpose(-1, -2)
        d = q.shape[-1]
        return (c2c + c2p + p2c) / math.sqrt(d if variant == "sqrt d" else 3 * d)

    return scores


@pytest.mark.parametrize(
    "variant, message",
    [
        ("paper", r"row δ\(j, i\), the paper's equation 4"),
        ("not transposed", "must hold key j's content"),
        ("key weights", "projects the table with the QUERY weights"),
        ("sqrt d", r"divided by sqrt\(d\)"),
        # right while every distance is within the span (short sequences): crashes beyond it
        ("no clip", r"beyond the span 3: clip the rows to 0 \.\. 2 span - 1 = 5"),
    ],
)
def test_disentangled_scores_mistakes(variant, message, capsys):
    assert_rejected(checks.check_disentangled_scores, _scores(variant), message, capsys)


def _emd(variant: str) -> Callable:
    def decoder(last_layer, hidden, table, steps):
        p = table[: hidden.shape[1]]
        if variant == "in place":
            hidden += p
            query = hidden
        else:
            query = hidden if variant == "every step" else hidden + p
        for _ in range(2 if variant == "two passes" else steps):
            if variant == "every step":
                query = query + p
            query = last_layer(query) if variant == "own output" else last_layer(hidden, query)
        return query

    return decoder


@pytest.mark.parametrize(
    "variant, message",
    [
        ("in place", "changed `hidden` in place"),
        # right for the paper's 2 steps only
        ("two passes", r"ran 2 time\(s\); run it `steps` = 1 times"),
        ("every step", "added at every step"),
        ("own output", "keys and values changed from pass to pass"),
    ],
)
def test_enhanced_mask_decoder_mistakes(variant, message, capsys):
    assert_rejected(checks.check_enhanced_mask_decoder, _emd(variant), message, capsys)


def _first_below(curve, track, margin=0.1):
    for row in curve:
        if row["eval_mlm_loss"] <= track[row["step"]] - margin:
            return row["step"]
    return None


def _strict(curve, track, margin=0.1):
    found = None
    for row in reversed(curve):
        if not row["eval_mlm_loss"] < track[row["step"]] - margin:
            break
        found = row["step"]
    return found


def _reverses_in_place(curve, track, margin=0.1):
    curve.reverse()
    return checks.discovery_step(list(reversed(curve)), track, margin)


@pytest.mark.parametrize(
    "wrong, message",
    [
        # right on every run that never comes back to the track (most of the committed runs)
        (_first_below, "does not stay below it after that"),
        (_strict, r"exactly `margin` below the track counts"),
        (lambda curve, track, margin=0.1: checks.discovery_step(curve, track), "not a fixed 0.1"),
        (_reverses_in_place, "changed the curve it was given"),
    ],
)
def test_discovery_step_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_discovery_step, wrong, message, capsys)


def _look_back(offset_plus=1, window=True, symbol=True, right=False, length=None) -> Callable:
    def labels(ids):
        out = torch.full_like(ids, IGNORE_INDEX)
        for b in range(ids.shape[0]):
            for i in range(lab04.N_OFFSETS if window else 0, length or ids.shape[1]):
                offset = int(ids[b, i]) // lab04.N_SYMBOLS + offset_plus
                source = i + offset if right else i - offset
                if 0 <= source < ids.shape[1]:
                    token = int(ids[b, source])
                    out[b, i] = token % lab04.N_SYMBOLS if symbol else token
        return out

    return labels


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_look_back(offset_plus=0), "one token too close"),
        (_look_back(window=False), r"positions 0 \.\. 5 get no label"),
        (_look_back(symbol=False), "SYMBOL of the token read"),
        (_look_back(right=True), "read to the right"),
        # right on the lab's rows of 24 tokens only
        (_look_back(length=lab04.LENGTH), "stop at position 24, the lab's length"),
    ],
)
def test_look_back_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_look_back, wrong, message, capsys)


def _pointed_at(any_pointer=False, window=True) -> Callable:
    def labels(ids):
        out = torch.full_like(ids, IGNORE_INDEX)
        for b in range(ids.shape[0]):
            for i in range(lab04.N_OFFSETS if window else 0, ids.shape[1]):
                pointers = [j for j in range(i) if j + int(ids[b, j]) // lab04.N_SYMBOLS + 1 == i]
                if len(pointers) == 1 or (any_pointer and pointers):
                    out[b, i] = int(ids[b, pointers[0]]) % lab04.N_SYMBOLS
        return out

    return labels


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_pointed_at(any_pointer=True), "several pointers"),
        (_pointed_at(window=False), r"positions 0 \.\. 5 get no label \(-100\) even"),
    ],
)
def test_pointed_at_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_pointed_at, wrong, message, capsys)


def _shift(high=dp.N_CONTENT, right=False, fixed=None, own_generator=False) -> Callable:
    def task(batch, length, generator, shift=3):
        s = fixed or shift
        g = torch.Generator().manual_seed(0) if own_generator else generator
        ids = torch.randint(0, high, (batch, length), generator=g) + dp.N_SPECIAL
        labels = torch.full_like(ids, IGNORE_INDEX)
        if right:
            labels[:, : length - s] = ids[:, s:]
        else:
            labels[:, s:] = ids[:, : length - s]
        return ids, labels

    return task


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_shift(high=dp.N_CONTENT - 1), "upper bound is exclusive"),
        (_shift(right=True), r"nothing `shift` = 3 places to their left"),
        # right at the lab's shift of 3 only
        (_shift(fixed=3), "Use the `shift` argument"),
        (_shift(own_generator=True), "not a seed of your own"),
        (
            lambda batch, length, generator, shift=3: (
                torch.randint(0, dp.N_CONTENT + dp.N_SPECIAL, (batch, length), generator=generator),
                torch.full((batch, length), IGNORE_INDEX),
            ),
            "is not a content word",
        ),
    ],
)
def test_shift_task_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_shift_task, wrong, message, capsys)
