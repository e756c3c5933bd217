"""Chapter 05 (ELECTRA, ModernBERT) build checks: the lessons' "write it yourself" cells.

Each `check_*` is a `BuildCheck`: it runs the learner's function on fresh inputs, compares it
with the library (`course_lib.objectives.rtd`, `course_lib.modules.rotary`,
`course_lib.modules.unpadding`), probes the edges the lessons talk about (one masked position,
a sample equal to the original, padding and all-padding rows, large logits, one rotary pair,
left padding, inputs left unmodified) and names the first mistake it recognises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.exercises.build import BuildCheck
from course_lib.exercises.core import (
    ExerciseError,
    NotWrittenYet,
    expect,
    expect_tensor,
    run_learner_code,
)
from course_lib.labels import IGNORE_INDEX
from course_lib.models.electra import replaced_token_loss
from course_lib.modules.rotary import RotaryEmbedding, apply_rotary
from course_lib.modules.unpadding import pack
from course_lib.objectives.rtd import GDESEmbedding, corrupt, rtd_loss, sample_replacements


def _close(a: Tensor, b: Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and bool(
        torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=1e-4)
    )


def _call(what: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """run_learner_code, with the case (`what`) named in front of a crash's message."""
    try:
        return run_learner_code(fn, *args, **kwargs)
    except NotWrittenYet:
        raise
    except ExerciseError as err:
        raise ExerciseError(f"{what}: {err}") from None


def _unchanged(before: Tensor, after: Tensor, name: str, fix: str) -> None:
    expect(torch.equal(before, after), f"your function changed its input `{name}`: {fix}.")


# ----- 01 · sampling a replacement -------------------------------------------------------------


def _probe_sample(my_sample: Callable) -> str:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, generator=g, requires_grad=True)
    before = logits.detach().clone()
    got = expect_tensor(
        run_learner_code(my_sample, logits, torch.Generator().manual_seed(1)), "my_sample"
    )
    _unchanged(
        before, logits.detach(), "logits", "sample from a copy (softmax returns a new tensor)"
    )
    if tuple(got.shape) == (5, 1):
        raise ExerciseError(
            "you return shape (5, 1) for 5 masked positions: one id per row, shape (n,) — "
            "squeeze the sample dimension (.squeeze(-1))."
        )
    expect(
        tuple(got.shape) == (5,),
        f"for logits of shape (5, 7) return one token id per row, shape (5,); got {tuple(got.shape)}.",
    )
    expect(
        not got.dtype.is_floating_point and got.dtype != torch.bool,
        f"return token ids (integers), got dtype {got.dtype}.",
    )
    one = run_learner_code(my_sample, logits[:1], torch.Generator().manual_seed(1))
    expect(
        isinstance(one, Tensor) and tuple(one.shape) == (1,),
        "with ONE masked position (logits of shape (1, 7)) you return shape "
        f"{tuple(one.shape) if isinstance(one, Tensor) else type(one).__name__}, expected (1,): "
        "a bare .squeeze() drops the batch dimension too; squeeze(-1) only the sample's.",
    )
    again = [
        run_learner_code(my_sample, logits, torch.Generator().manual_seed(s)) for s in (1, 1, 2)
    ]
    expect(
        torch.equal(again[0], again[1]),
        "two calls with generators seeded alike drew different tokens: draw with the generator "
        "you are given (torch.multinomial(..., generator=generator)), so a run can be repeated.",
    )
    # The draw follows softmax(logits): 3,000 rows of the same distribution.
    probs = torch.tensor([0.6, 0.25, 0.1, 0.05, 0.0])
    rows = torch.log(probs).expand(3000, -1).clone()  # -inf where the probability is 0
    draws = run_learner_code(my_sample, rows, torch.Generator().manual_seed(3))
    draws = draws.flatten().long()
    expect(
        bool((draws >= 0).all() and (draws < 5).all()),
        f"ids must lie in [0, V) = [0, 5), got {int(draws.min())} .. {int(draws.max())}.",
    )
    freq = torch.bincount(draws, minlength=5).float() / len(draws)
    if freq[0] == 1.0:
        raise ExerciseError(
            "you always return the most likely token (the argmax): ELECTRA SAMPLES from the "
            "generator's softmax, so plausible but wrong tokens appear (torch.multinomial)."
        )
    expect(
        freq[4] == 0,
        "a token with logit -inf (probability 0) was drawn: sample from softmax(logits), which "
        "gives it exactly 0.",
    )
    expect(
        bool((freq - probs).abs().max() < 0.04),
        f"over 3,000 draws from probabilities {probs.tolist()} your frequencies are "
        f"{[round(float(f), 3) for f in freq]}: draw from softmax(logits) along the vocabulary "
        "(dim=-1).",
    )
    big = torch.tensor([[1000.0, 999.0, 0.0]]).expand(400, -1).clone()
    overflow = "exp(1000) overflows — use torch.softmax, which subtracts the row's maximum first"
    try:
        draws = run_learner_code(my_sample, big, torch.Generator().manual_seed(4)).flatten().long()
    except NotWrittenYet:
        raise
    except ExerciseError as err:
        raise ExerciseError(f"with logits [1000, 999, 0]: {err} — {overflow}.") from None
    share = float((draws == 0).float().mean())
    expect(
        0.6 < share < 0.85,
        f"with logits [1000, 999, 0] token 0 should come about 73% of the time (e^1 / (e^1 + 1)); "
        f"you drew it {share:.0%}: {overflow}.",
    )
    return (
        "one token per masked position drawn from the softmax (n = 1 and logits of 1000 included)."
    )


check_sample = BuildCheck(
    _probe_sample,
    fallback=sample_replacements,
    fallback_name="sample_replacements",
    todo="draw one token id per row of `logits` from its softmax, with `generator`; shape (n,).",
)


# ----- 01 · the discriminator's input and labels ------------------------------------------------

_MASK = 4


def _rtd_case() -> tuple[Tensor, Tensor, Tensor]:
    """input_ids (with [MASK]s and one masked position that kept its token), labels and samples.

    Row 0: position 1 shows [MASK] and the sample IS the original (label 0); position 3 kept its
    original token (the 15% rule) and the sample is that token again (label 0); position 5 a real
    replacement. Row 1 ends in padding; row 2 has nothing masked."""
    original = torch.tensor(
        [[2, 11, 12, 13, 14, 15, 3], [2, 21, 22, 23, 3, 0, 0], [2, 31, 32, 33, 34, 3, 0]]
    )
    labels = torch.full_like(original, IGNORE_INDEX)
    for r, c in ((0, 1), (0, 3), (0, 5), (1, 2)):
        labels[r, c] = original[r, c]
    input_ids = original.clone()
    input_ids[0, 1] = input_ids[0, 5] = input_ids[1, 2] = _MASK  # (0, 3) kept its own token
    sampled = torch.tensor([11, 13, 40, 27])  # row-major: (0,1) (0,3) (0,5) (1,2)
    return input_ids, labels, sampled


def _probe_corrupt(my_corrupt: Callable) -> str:
    input_ids, labels, sampled = _rtd_case()
    kept = [t.clone() for t in (input_ids, labels, sampled)]
    out = run_learner_code(my_corrupt, input_ids, labels, sampled)
    for name, before, after in zip(
        ("input_ids", "labels", "sampled"), kept, (input_ids, labels, sampled)
    ):
        _unchanged(before, after, name, "work on a copy (input_ids.clone()), the batch is reused")
    expect(
        isinstance(out, tuple) and len(out) == 2,
        "return two tensors: (the discriminator's input ids, its 0/1 labels).",
    )
    ids, disc = (expect_tensor(t, "my_corrupt") for t in out)
    want_ids, want = corrupt(input_ids, labels, sampled)
    expect(
        ids.shape == want_ids.shape and disc.shape == want.shape,
        f"both outputs have the batch's shape {tuple(want.shape)}; got {tuple(ids.shape)} and "
        f"{tuple(disc.shape)}.",
    )
    if not torch.equal(ids.long(), want_ids):
        col_major = input_ids.clone()
        col_major.T[(labels != IGNORE_INDEX).T] = sampled
        if torch.equal(ids.long(), col_major):
            raise ExerciseError(
                "the samples went in column by column: sampled[k] belongs to the k-th masked "
                "position in row-major order, the order labels != -100 selects them "
                "(corrupted[selected] = sampled)."
            )
        r, c = (int(v) for v in (ids.long() != want_ids).nonzero()[0])
        raise ExerciseError(
            f"the discriminator's input at row {r}, position {c} is {int(ids[r, c])}, expected "
            f"{int(want_ids[r, c])}: the samples replace the masked positions, every other "
            "token stays as it was."
        )
    expect(
        not disc.dtype.is_floating_point or bool(((disc == 0) | (disc == 1)).all()),
        "labels are 0 (original) or 1 (replaced).",
    )
    disc = disc.long()
    if disc[0, 3] == 1:
        raise ExerciseError(
            "row 0, position 3 was selected but kept its own token, and the generator sampled "
            "that same token: nothing was replaced, so its label is 0. Label by comparing with "
            "the original token, not by whether the position was masked."
        )
    if disc[0, 1] == 1:
        raise ExerciseError(
            "row 0, position 1 showed [MASK] and the generator sampled the original token (11): "
            "the discriminator sees the original there, label 0. Compare with the ORIGINAL "
            "(labels at masked positions), not with the [MASK] in input_ids."
        )
    expect(
        torch.equal(disc, want),
        f"labels {disc.tolist()}, expected {want.tolist()}: 1 exactly where the discriminator's "
        "token differs from the original one.",
    )
    # a batch of one in which nothing is masked: nothing to replace
    ids1, labels1 = input_ids[2:], labels[2:]
    out1 = run_learner_code(my_corrupt, ids1, labels1, sampled[:0])
    expect(
        torch.equal(out1[0].long(), ids1) and not bool(out1[1].any()),
        "a batch of one sequence with nothing masked (no samples) must come back unchanged, all "
        "labels 0.",
    )
    return "samples placed in row-major order; a sample equal to the original is labelled 0."


check_corrupt = BuildCheck(
    _probe_corrupt,
    fallback=corrupt,
    fallback_name="corrupt",
    todo="put the samples at the masked positions and label each token 1 if it differs from "
    "the original, else 0.",
)


# ----- 01 · the combined loss -------------------------------------------------------------------


def library_rtd_loss(
    gen_logits: Tensor,
    mlm_targets: Tensor,
    disc_logits: Tensor,
    disc_labels: Tensor,
    attention_mask: Tensor,
    weight: float = 50.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """(L, L_mlm, L_disc) as course_lib computes them: the generator's cross-entropy at the
    masked positions, the discriminator's binary cross-entropy over the real tokens, and
    rtd_loss = L_mlm + weight * L_disc."""
    l_mlm = F.cross_entropy(gen_logits.float(), mlm_targets)
    l_disc = replaced_token_loss(disc_logits, disc_labels, attention_mask)
    return rtd_loss(l_mlm, l_disc, weight), l_mlm, l_disc


def _probe_rtd_loss(my_rtd_loss: Callable) -> str:
    g = torch.Generator().manual_seed(7)
    gen_logits = torch.randn(4, 9, generator=g, requires_grad=True)
    targets = torch.tensor([3, 0, 8, 5])
    disc_logits = (torch.randn(3, 6, generator=g) * 2).requires_grad_()
    disc_labels = torch.tensor([[0, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]])
    for weight in (50.0, 1.0):
        out = run_learner_code(
            my_rtd_loss, gen_logits, targets, disc_logits, disc_labels, mask, weight=weight
        )
        expect(
            isinstance(out, tuple) and len(out) == 3,
            "return three scalars: (L, L_mlm, L_disc).",
        )
        loss, l_mlm, l_disc = (expect_tensor(t, "my_rtd_loss") for t in out)
        want, want_mlm, want_disc = library_rtd_loss(
            gen_logits, targets, disc_logits, disc_labels, mask, weight
        )
        expect(
            loss.dim() == 0,
            f"L must be a scalar (0-dim) tensor, got shape {tuple(loss.shape)}.",
        )
        expect(
            _close(l_mlm, want_mlm),
            f"L_mlm is {float(l_mlm.detach()):.4f}, expected {float(want_mlm.detach()):.4f}: the mean "
            "cross-entropy of the generator's logits at the masked positions against the "
            "original tokens.",
        )
        if not _close(l_disc, want_disc):
            bce = F.binary_cross_entropy_with_logits(
                disc_logits, disc_labels.float(), reduction="none"
            )
            if _close(l_disc, bce.mean()):
                raise ExerciseError(
                    "L_disc averages over every position, padding included (and row 2 is only "
                    "padding): average over the real tokens, attention_mask == 1."
                )
            if _close(l_disc, bce[mask.bool()].sum()):
                raise ExerciseError(
                    "L_disc is the SUM over the real tokens: take the mean, as the paper does."
                )
            raise ExerciseError(
                f"L_disc is {float(l_disc.detach()):.4f}, expected {float(want_disc.detach()):.4f}: binary "
                "cross-entropy of the discriminator's logits against the 0/1 labels, mean over "
                "the real tokens."
            )
        if not _close(loss, want):
            if _close(loss, weight * l_mlm + l_disc) and weight != 1.0:
                raise ExerciseError(
                    f"the weight {weight:g} multiplies L_mlm: it belongs to L_disc "
                    "(L = L_mlm + λ L_disc), which is ~20x smaller and would be drowned out."
                )
            raise ExerciseError(
                f"with weight {weight:g}: L is {float(loss.detach()):.4f}, expected "
                f"{float(want.detach()):.4f} = L_mlm + weight x L_disc (use the `weight` argument)."
            )
        expect(
            loss.requires_grad,
            "L must stay differentiable: do not call .item() or detach the logits.",
        )
    # a confident discriminator: logits of +-40, one of them wrong
    sure = torch.tensor([[40.0, -40.0, 40.0, -40.0]])
    labels = torch.tensor([[1, 0, 0, 0]])  # position 2: logit 40 but the token is original
    ones = torch.ones_like(labels)
    _, _, got = run_learner_code(my_rtd_loss, gen_logits, targets, sure, labels, ones, weight=50.0)
    want = replaced_token_loss(sure, labels, ones)
    expect(
        _close(got, want, atol=1e-3),
        f"with confident logits (+-40, one wrong) L_disc is {float(got.detach()):.3f}, expected "
        f"{float(want.detach()):.3f}: sigmoid(40) rounds to 1.0 and log(1 - 1) blows up. Use "
        "F.binary_cross_entropy_with_logits on the logits, which stays exact.",
    )
    return "L_mlm + λ L_disc at λ = 50 and 1, L_disc over real tokens only, exact at logits of ±40."


check_rtd_loss = BuildCheck(
    _probe_rtd_loss,
    fallback=library_rtd_loss,
    fallback_name="rtd_loss",
    todo="return (L_mlm + weight * L_disc, L_mlm, L_disc): the generator's cross-entropy at the "
    "masked positions and the discriminator's binary cross-entropy over the real tokens.",
)


# ----- 02 · GDES: the stop-gradient of DeBERTa-v3 ------------------------------------------------


def _probe_gdes(candidate: Any) -> str:
    torch.manual_seed(0)
    table = nn.Embedding(12, 5)
    module = run_learner_code(candidate, table)
    expect(isinstance(module, nn.Module), "GDESEmbedding(table) must build an nn.Module.")
    delta = getattr(module, "delta", None)
    expect(isinstance(delta, nn.Parameter), "keep `self.delta`, the residual E_delta, as given.")
    ids = torch.tensor([[1, 4, 4, 11], [0, 3, 7, 2]])
    start = run_learner_code(module, ids)
    start = expect_tensor(start, "forward")
    expect(
        tuple(start.shape) == (2, 4, 5),
        f"ids (B, T) = (2, 4) give embeddings (B, T, E) = (2, 4, 5), got {tuple(start.shape)}.",
    )
    expect(
        _close(start, table(ids)),
        "with E_delta still zero the discriminator must see exactly the generator's embeddings: "
        "E_D = sg(E_G) + E_delta.",
    )
    with torch.no_grad():
        delta.copy_(torch.randn_like(delta))
    out = run_learner_code(module, ids)
    expect(
        _close(out, table.weight[ids] + delta[ids]),
        "after E_delta changed, your output is not E_G[ids] + E_delta[ids]: add the residual "
        "row by row (F.embedding(ids, table) with table = sg(E_G) + E_delta).",
    )
    table.zero_grad()
    delta.grad = None
    expect(
        out.requires_grad,
        "your output carries no gradient at all: the discriminator's loss does not reach E_delta. "
        "Only E_G goes behind the stop-gradient; the residual must learn.",
    )
    out.pow(2).sum().backward()  # any loss of the discriminator
    expect(
        table.weight.grad is None or not bool(table.weight.grad.any()),
        "the discriminator's loss reached the generator's table E_G: that is plain embedding "
        "sharing (ES), the tug-of-war GDES removes. Detach E_G's weight (the stop-gradient).",
    )
    expect(
        delta.grad is not None and bool(delta.grad.any()),
        "the discriminator's loss does not reach E_delta: only E_G is behind the stop-gradient; "
        "the residual must learn.",
    )
    expect(
        table.weight.requires_grad,
        "E_G no longer requires a gradient: the generator's own MLM loss must still train it. "
        "Detach it inside forward (.detach()), do not switch it off (requires_grad_(False)).",
    )
    table(ids).sum().backward()
    expect(
        table.weight.grad is not None and bool(table.weight.grad.any()),
        "the generator's own loss no longer trains E_G.",
    )
    return "the discriminator reads sg(E_G) + E_delta: its loss trains E_delta only."


check_gdes = BuildCheck(
    _probe_gdes,
    fallback=GDESEmbedding,
    fallback_name="GDESEmbedding",
    todo="write forward: look up ids in the generator's table with a stop-gradient, plus E_delta.",
)


# ----- 03 · rotary position embeddings ---------------------------------------------------------


def library_rope(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    """x (T, d) turned by course_lib's RotaryEmbedding and apply_rotary (pairs p, p + d/2)."""
    cos, sin = RotaryEmbedding(head_dim=x.shape[-1], theta=theta)(positions)
    return apply_rotary(x, cos, sin)


def _rope_variant(x: Tensor, positions: Tensor, theta: float, kind: str) -> Tensor:
    d = x.shape[-1]
    step = 1.0 if kind == "no 2" else 2.0
    freq = theta ** (-torch.arange(0, d // 2).double() * step / d)
    angle = positions[:, None].double() * freq
    if kind == "reverse":
        angle = -angle
    if kind == "adjacent":
        a, b = x[..., 0::2].double(), x[..., 1::2].double()
        out = torch.empty_like(x, dtype=torch.float64)
        out[..., 0::2] = a * angle.cos() - b * angle.sin()
        out[..., 1::2] = a * angle.sin() + b * angle.cos()
        return out
    a, b = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


def _probe_rope(rope_by_hand: Callable) -> str:
    g = torch.Generator().manual_seed(2)
    cases = [  # (d, positions, theta, what the case is)
        (16, torch.arange(10), 10_000.0, "d = 16, positions 0..9"),
        (16, torch.tensor([5, 2, 100, 0]), 10_000.0, "positions [5, 2, 100, 0] (not 0..T-1)"),
        (2, torch.arange(6), 10_000.0, "d = 2: a single pair"),
        (6, torch.arange(7), 160_000.0, "d = 6: an odd number of pairs (3), θ = 160,000"),
        (8, torch.tensor([3]), 10_000.0, "T = 1, one vector at position 3"),
    ]
    for d, positions, theta, what in cases:
        x = torch.randn(len(positions), d, generator=g)
        before = x.clone()
        got = expect_tensor(_call(what, rope_by_hand, x, positions, theta), "rope_by_hand")
        _unchanged(before, x, "x", "build the turned vector as a new tensor")
        want = library_rope(x, positions, theta)
        expect(
            got.shape == want.shape,
            f"{what}: x of shape {tuple(x.shape)} must come back with that shape, got "
            f"{tuple(got.shape)}.",
        )
        if _close(got, want):
            continue
        if torch.allclose(got.double(), x.double(), atol=1e-6):
            raise ExerciseError(f"{what}: your output equals x — nothing was turned.")
        hints = {
            "adjacent": "you pair neighbouring features (x_0, x_1), (x_2, x_3), ... as RoFormer's "
            "paper writes it; ModernBERT (like GPT-NeoX and Llama) pairs feature p with p + d/2",
            "reverse": "every pair turns the wrong way (by -angle): (a, b) at angle φ becomes "
            "(a cos φ - b sin φ, a sin φ + b cos φ)",
            "no 2": "pair p turns at speed θ^(-p/d); RoPE's is θ^(-2p/d) (the exponent counts "
            "features two at a time: torch.arange(0, d, 2) / d)",
        }
        for kind, hint in hints.items():
            if _close(got, _rope_variant(x, positions, theta, kind)):
                raise ExerciseError(f"{what}: {hint}.")
        if _close(got, library_rope(x, torch.arange(len(positions)), theta)):
            raise ExerciseError(
                f"{what}: you turned row m by m, not by positions[m]: use the positions given."
            )
        r = int((got.double() - want.double()).abs().amax(-1).argmax())
        raise ExerciseError(
            f"{what}: row {r} is {[round(float(v), 4) for v in got[r][:4]]}..., expected "
            f"{[round(float(v), 4) for v in want[r][:4]]}...: pair p = (x_p, x_(p+d/2)) turns by "
            "positions[m] · θ^(-2p/d)."
        )
    return "equal to apply_rotary for d = 16, 6 and 2, any positions, T = 1 and θ = 160,000."


check_rope = BuildCheck(
    _probe_rope,
    fallback=library_rope,
    fallback_name="apply_rotary",
    todo="turn pair p = (x_p, x_(p+d/2)) of row m by the angle positions[m] · θ^(-2p/d).",
)


# ----- 03 · GeGLU ------------------------------------------------------------------------------


def library_geglu(x: Tensor, w_in: Tensor, w_out: Tensor) -> Tensor:
    """ModernBERT's MLP without biases: a, b = the two halves of x W_in^T; GELU(a) * b, then W_out."""
    a, b = F.linear(x, w_in).chunk(2, dim=-1)
    return F.linear(F.gelu(a) * b, w_out)


def _probe_geglu(geglu_by_hand: Callable) -> str:
    g = torch.Generator().manual_seed(4)
    cases = [  # (x shape, H, I)
        ((3, 5, 6), 6, 4, "x of shape (3, 5, 6), I = 4"),
        ((6,), 6, 4, "a single vector x of shape (6,)"),
        ((2, 6), 6, 1, "I = 1: one gated feature"),
    ]
    for shape, h, i, what in cases:
        x = torch.randn(*shape, generator=g) * 2.5
        w_in, w_out = torch.randn(2 * i, h, generator=g), torch.randn(h, i, generator=g)
        before = x.clone()
        got = expect_tensor(_call(what, geglu_by_hand, x, w_in, w_out), "geglu_by_hand")
        _unchanged(before, x, "x", "compute into new tensors")
        want = library_geglu(x, w_in, w_out)
        expect(
            got.shape == want.shape,
            f"{what}: the output has x's shape {tuple(want.shape)}, got {tuple(got.shape)}.",
        )
        if _close(got, want, atol=1e-4):
            continue
        a, b = F.linear(x, w_in).chunk(2, dim=-1)
        even, odd = F.linear(x, w_in)[..., 0::2], F.linear(x, w_in)[..., 1::2]
        variants = {
            "GELU gates the wrong half: the FIRST half of x W_in^T is a (through GELU), the "
            "second b": F.linear(F.gelu(b) * a, w_out),
            "that is the tanh approximation of GELU: ModernBERT's is the exact one (erf), "
            "F.gelu(a) with no `approximate`": F.linear(F.gelu(a, approximate="tanh") * b, w_out),
            "that is SwiGLU (SiLU as the gate): GeGLU gates with GELU": F.linear(
                F.silu(a) * b, w_out
            ),
            "GELU is applied after the product: gate first, GELU(a) * b": F.linear(
                F.gelu(a * b), w_out
            ),
            "a and b are the two HALVES of x W_in^T (chunk(2, dim=-1)), not its even and odd "
            "features": F.linear(F.gelu(even) * odd, w_out),
        }
        for message, value in variants.items():
            if value.shape == got.shape and _close(got, value, atol=1e-4):
                raise ExerciseError(f"{what}: {message}.")
        raise ExerciseError(
            f"{what}: max difference {float((got - want).abs().max()):.3g} from "
            "(GELU(a) * b) W_out^T with a, b = the halves of x W_in^T."
        )
    return "GELU(a) * b, then W_out, for any leading shape and I = 1."


check_geglu = BuildCheck(
    _probe_geglu,
    fallback=library_geglu,
    fallback_name="feed_forward (GeGLU)",
    todo="split x W_in^T into halves a and b and return (GELU(a) * b) W_out^T.",
)


# ----- 04 · unpadding --------------------------------------------------------------------------


def library_pack(x: Tensor, keep: Tensor) -> tuple[Tensor, list[int]]:
    """course_lib's unpadding.pack: the real tokens in order, and the sequences' offsets."""
    packed, packing = pack(x, keep)
    return packed, packing.cu_seqlens


def _probe_pack(my_pack: Callable) -> str:
    g = torch.Generator().manual_seed(5)
    right = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    cases = [
        (right, "right padding"),
        (right.flip(1), "LEFT padding (the real tokens at the end of each row)"),
        (torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]), "a row of padding only"),
        (torch.ones(1, 3, dtype=torch.long), "a batch of one sequence without padding"),
    ]
    for keep, what in cases:
        x = torch.randn(*keep.shape, 4, generator=g)
        before, mask_before = x.clone(), keep.clone()
        out = _call(what, my_pack, x, keep)
        _unchanged(before, x, "x", "index into it, do not write to it")
        _unchanged(mask_before, keep, "keep", "do not modify the mask")
        expect(
            isinstance(out, tuple) and len(out) == 2,
            "return two things: (the packed real tokens (N, C), cu_seqlens).",
        )
        packed, cu = out
        packed = expect_tensor(packed, "my_pack")
        cu = [int(v) for v in (cu.tolist() if isinstance(cu, Tensor) else cu)]
        want, want_cu = library_pack(x, keep)
        n = int(keep.sum())
        if packed.dim() == 2 and packed.shape[0] == keep.numel() and n != keep.numel():
            raise ExerciseError(
                f"{what}: you return {keep.numel()} rows, one per slot: `keep` holds 0/1 "
                "integers, and x[keep] indexes rows 0 and 1 instead of selecting — use "
                "x[keep.bool()]."
            )
        expect(
            tuple(packed.shape) == tuple(want.shape),
            f"{what}: {n} real tokens of {x.shape[-1]} features pack into shape {tuple(want.shape)}, "
            f"got {tuple(packed.shape)}.",
        )
        if not torch.equal(packed, want):
            raise ExerciseError(
                f"{what}: the packed rows are not the real tokens in order (row by row, left to "
                "right). Select them with the mask, wherever the padding is — do not assume it "
                "sits at the end."
            )
        if cu != want_cu:
            lengths = keep.sum(1).tolist()
            hint = "offsets start at 0 and end at N: [0, n_0, n_0 + n_1, ...]"
            if cu == lengths:
                hint = "those are the lengths; cu_seqlens are their running sums, starting at 0"
            elif cu == want_cu[1:]:
                hint = "the first offset, 0, is missing (B + 1 offsets for B sequences)"
            raise ExerciseError(f"{what}: cu_seqlens {cu}, expected {want_cu}: {hint}.")
    return "packed rows and offsets equal to unpadding.pack with right, left and all padding."


check_pack = BuildCheck(
    _probe_pack,
    fallback=library_pack,
    fallback_name="pack",
    todo="return the real tokens of x (N, C), in order, and cu_seqlens [0, n_0, n_0 + n_1, ...].",
)


__all__ = [
    "check_corrupt",
    "check_gdes",
    "check_geglu",
    "check_pack",
    "check_rope",
    "check_rtd_loss",
    "check_sample",
    "library_geglu",
    "library_pack",
    "library_rope",
    "library_rtd_loss",
]
