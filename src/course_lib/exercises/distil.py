"""Chapter 04 (DistilBERT) exercise checkers, four design tasks on the chapter's two ideas (the
loss that learns from a teacher, the student that starts as a copy of it): the distillation
term's gradient predicted in closed form, the weight each token gets in the cosine term, the
student's parameter count, and a test that tells a correctly initialised student from near
misses. Each names the mistake it recognises (tests/test_exercise_checkers_distil.py)."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import BertConfig, tiny_config
from course_lib.counting import count_parameters
from course_lib.exercises.core import (
    ExerciseError,
    at_edge,
    expect,
    expect_tensor,
    expect_unchanged,
    passed,
    run_learner_code,
)
from course_lib.models.bert import BertForMaskedLM
from course_lib.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from course_lib.objectives.distillation import (
    hidden_cosine_loss,
    init_student_from_teacher,
    kl_distillation_loss,
)

# ----- exercise 1: the distillation term's gradient, predicted ------------------------------------


def _kl_gradient(
    student: Tensor,
    teacher: Tensor,
    t: float,
    *,
    factor: str = "T",
    sign: int = 1,
    mean: bool = True,
    soft: bool = True,
) -> Tensor:
    """d/d student_logits of T^2 KL(p_t || p_s) averaged over rows: T (p_s - p_t) / n; the
    switches reproduce the typical slips."""
    scale = t if soft else 1.0
    p_s, p_t = (student / scale).softmax(-1), (teacher / scale).softmax(-1)
    size = {"T": t, "1/T": 1 / t, "T^2": t**2, "1": 1.0}[factor]
    return sign * size * (p_s - p_t) / (student.shape[0] if mean else 1)


_GRADIENT_MISTAKES: tuple[tuple[dict, str], ...] = (
    (
        {"factor": "1/T"},
        "the T^2 of the loss is missing: KL at temperature T has gradient (p_s - p_t) / T, and the "
        "loss multiplies it by T^2 (Hinton et al.: so that the soft term's gradients keep their "
        "size when T changes), leaving T (p_s - p_t) / n",
    ),
    (
        {"factor": "T^2"},
        "the chain rule's 1/T is missing: the softmax reads z / T, so d/dz brings a factor 1/T; "
        "T^2 x 1/T leaves T",
    ),
    (
        {"factor": "1"},
        "the gradient has no temperature factor: T^2 (from the loss) x 1/T (from z / T) = T",
    ),
    (
        {"sign": -1},
        "the sign is flipped: the gradient of KL(p_t || p_s) in the student's logits is p_student "
        "- p_teacher (a descent step then moves the student toward the teacher)",
    ),
    (
        {"mean": False},
        "the gradient is n times too large: the loss is a MEAN over the n rows, so each row "
        "carries 1/n",
    ),
    (
        {"soft": False},
        "the probabilities are not softened: the loss compares softmax(z / T) of both models, "
        "and so does its gradient",
    ),
)


def _gradient_case(
    distillation_gradient: Callable, student: Tensor, teacher: Tensor, t: float
) -> Tensor:
    given_s, given_t = student.clone(), teacher.clone()
    got = expect_tensor(
        run_learner_code(distillation_gradient, given_s, given_t, t), "distillation_gradient"
    )
    name = getattr(distillation_gradient, "__name__", "distillation_gradient")
    expect_unchanged(student, given_s, "student_logits", name)
    expect_unchanged(teacher, given_t, "teacher_logits", name)
    expect(
        tuple(got.shape) == tuple(student.shape),
        f"return one number per logit, the student's shape {tuple(student.shape)}; got "
        f"{tuple(got.shape)}.",
    )
    got = got.detach().float()
    expect(
        bool(torch.isfinite(got).all()),
        "the gradient contains NaN or inf: exp of large logits overflows; softmax subtracts each "
        "row's maximum first (use .softmax(-1) or subtract it yourself).",
    )
    return got


def _autograd_reference(student: Tensor, teacher: Tensor, t: float) -> Tensor:
    x = student.clone().requires_grad_()
    kl_distillation_loss(x, teacher, t).backward()
    return x.grad


def check_distillation_gradient(distillation_gradient: Callable) -> None:
    """`distillation_gradient(student_logits, teacher_logits, temperature)` -> the gradient of
    the distillation term T^2 KL(p_t || p_s) (rows averaged) in the student's logits, [n, vocab],
    in closed form (no autograd)."""
    g = torch.Generator().manual_seed(11)
    student, teacher = (torch.randn(6, 40, generator=g) * 3 for _ in range(2))
    temps = (2.0, 4.0, 1.0)
    results = []
    for t in temps:
        got = _gradient_case(distillation_gradient, student, teacher, t)
        want = _autograd_reference(student, teacher, t)
        assert torch.allclose(want, _kl_gradient(student, teacher, t), atol=1e-6)
        results.append((t, got, want))
    wrong = [(t, got, want) for t, got, want in results if not torch.allclose(got, want, atol=1e-6)]
    if wrong:
        hints = [
            hint
            for flags, hint in _GRADIENT_MISTAKES
            if all(
                torch.allclose(got, _kl_gradient(student, teacher, t, **flags), atol=1e-6)
                for t, got, _ in results
            )
        ]
        t, got, want = wrong[0]
        ratio = float(got.norm() / want.norm())
        raise ExerciseError(
            f"at T = {t:g} your gradient differs from autograd's on the library's loss (its norm "
            f"is {ratio:.3g} x the right one)"
            + (
                ": " + "; or ".join(hints) + "."
                if hints
                else ". Differentiate step by step: the loss, the KL, the softmax of z / T."
            )
        )
    edges = (
        ("one row of two logits at T = 0.5", torch.randn(1, 2, generator=g) * 3, 0.5),
        ("large logits (|z| in the hundreds, T = 1)", torch.randn(3, 5, generator=g) * 300, 1.0),
    )
    for description, logits, t in edges:
        other = torch.randn(logits.shape, generator=g) * logits.abs().max() / 3
        with at_edge(description):
            got = _gradient_case(distillation_gradient, logits, other, t)
            want = _autograd_reference(logits, other, t)
            expect(
                torch.allclose(got, want, atol=1e-5),
                f"the gradient differs from autograd's by up to {float((got - want).abs().max()):.2g}.",
            )
    sizes = [float(w.norm()) for _, _, w in results]
    passed(
        "your closed form equals autograd's gradient at T = 1, 2, 4, for one row and for large "
        f"logits. Its norm: {sizes[2]:.3f} at T = 1, {sizes[0]:.3f} at T = 2, {sizes[1]:.3f} at "
        "T = 4 (without the T^2 the last would be 16 x smaller)."
    )


# ----- exercise 2: how much each token weighs in the cosine term ---------------------------------


def _weights(attention_mask: Tensor, kind: str = "token") -> Tensor:
    real = attention_mask.bool().float()
    b, t = real.shape
    if kind == "token":
        return real / real.sum()
    if kind == "sentence":
        return real / real.sum(1, keepdim=True) / b
    if kind == "sentence_sum":
        return real / real.sum(1, keepdim=True)
    if kind == "all":
        return torch.full_like(real, 1 / (b * t))
    if kind == "real_over_all":
        return real / (b * t)
    return real  # "unnormalised"


_WEIGHT_MISTAKES = (
    (
        "sentence",
        "you average within each sentence, then over sentences: a token of a short sentence then "
        "weighs more than one of a long sentence. The cosine term is a mean over all real tokens "
        "of the batch: each real token weighs 1 / (number of real tokens)",
    ),
    (
        "sentence_sum",
        "each sentence's weights sum to 1, so the batch's sum to B: the loss is one mean over all "
        "real tokens of the batch, its weights sum to 1",
    ),
    (
        "all",
        "padding gets weight: the mean runs over the real tokens only (attention_mask == 1), and "
        "a padding position weighs 0",
    ),
    (
        "real_over_all",
        "you divide by every position, padding included: the real tokens' weights then sum to "
        "less than 1. Divide by the number of REAL tokens",
    ),
    (
        "unnormalised",
        "these are the mask itself: a mean divides by how many real tokens there are",
    ),
)


def _weights_case(token_weights: Callable, attention_mask: Tensor) -> Tensor:
    given = attention_mask.clone()
    got = expect_tensor(run_learner_code(token_weights, given), "token_weights")
    expect_unchanged(
        attention_mask, given, "attention_mask", getattr(token_weights, "__name__", "f")
    )
    want = _weights(attention_mask)
    expect(
        tuple(got.shape) == tuple(want.shape),
        f"return one weight per position, shape {tuple(want.shape)}; got {tuple(got.shape)}"
        + (" (do not .squeeze())" if got.numel() == want.numel() else "")
        + ".",
    )
    got = got.detach().double()
    expect(
        bool(torch.isfinite(got).all()),
        "some weights are NaN or inf: a row with no real token divides 0 by 0 in a per-row mean.",
    )
    if torch.allclose(got, want.double(), atol=1e-7):
        return got
    for kind, message in _WEIGHT_MISTAKES:
        if torch.allclose(got, _weights(attention_mask, kind).double(), atol=1e-7):
            raise ExerciseError(message + ".")
    padded = ~attention_mask.bool()
    expect(
        not bool(got[padded].any()),
        f"padding positions get weight (up to {float(got[padded].abs().max()):.3g}): they are not "
        "tokens, their weight is 0.",
    )
    raise ExerciseError(
        f"the weights sum to {float(got.sum()):.4g} and range {float(got.min()):.3g} .. "
        f"{float(got.max()):.3g}; expected every real token {float(want.max()):.4g}."
    )


def check_cosine_token_weights(token_weights: Callable) -> None:
    """`token_weights(attention_mask)` -> [B, T] float: the weight of each position in
    DistilBERT's cosine term, so that the loss is sum(weights * (1 - cos)) (library:
    hidden_cosine_loss)."""
    mask = torch.zeros(4, 10, dtype=torch.long)
    for row, length in enumerate((3, 7, 10, 5)):
        mask[row, :length] = 1
    got = _weights_case(token_weights, mask)
    edges = (
        ("a row of padding only", torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])),
        ("a batch of one without padding", torch.ones(1, 4, dtype=torch.long)),
        ("left padding", torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])),
    )
    for description, edge_mask in edges:
        with at_edge(f"{description} (attention_mask {edge_mask.tolist()})"):
            _weights_case(token_weights, edge_mask)
    # the proof: with these weights the sum is the library's loss
    g = torch.Generator().manual_seed(3)
    s, t = torch.randn(4, 10, 8, generator=g), torch.randn(4, 10, 8, generator=g)
    mine = float((got * (1 - F.cosine_similarity(s, t, dim=-1)).double()).sum())
    library = float(hidden_cosine_loss(s, t, mask))
    expect(
        abs(mine - library) < 1e-5,
        f"sum(weights * (1 - cos)) = {mine:.5f}, but the library's loss is {library:.5f}.",
    )
    short, long = float(got[0, 0]), float(got[2, 0])
    per_sentence = float(_weights(mask, "sentence")[0, 0] / _weights(mask, "sentence")[2, 0])
    passed(
        f"every real token weighs {short:.4f} in a batch of 25 real tokens, in a 3-token "
        f"sentence as in a 10-token one ({long:.4f}); sum(weights x (1 - cos)) is the library's "
        f"loss ({library:.4f}). A per-sentence mean would weigh the short sentence's tokens "
        f"{per_sentence:.2f} x more."
    )


# ----- exercise 3: what the student keeps ------------------------------------------------------

_STUDENT_DIMS = (  # V, H, L, I, P, T, k: bert-base's half, small ones, one layer, T = 1 and 3
    (30522, 768, 12, 3072, 512, 2, 6),
    (1000, 64, 4, 100, 128, 2, 2),
    (500, 32, 6, 48, 40, 3, 1),
    (50, 8, 3, 16, 8, 1, 3),
)


def _student_count(
    V: int,  # noqa: N803
    H: int,  # noqa: N803
    L: int,  # noqa: N803
    I: int,  # noqa: N803, E741
    P: int,  # noqa: N803
    T: int,  # noqa: N803
    k: int,
    *,
    segment: bool = False,
    pooler: bool = False,
    decoder_weight: bool = False,
    head: bool = True,
    decoder_bias: bool = True,
    teacher_depth: bool = False,
    embedding_ln: bool = True,
) -> int:
    """DistilBertForMaskedLM's parameters; the switches reproduce the typical slips."""
    embeddings = (V + P + (T if segment else 0)) * H + (2 * H if embedding_ln else 0)
    layer = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 4 * H
    mlm = (H * H + H + 2 * H if head else 0) + (V if decoder_bias else 0)
    mlm += V * H if decoder_weight else 0
    return embeddings + (L if teacher_depth else k) * layer + mlm + (H * H + H if pooler else 0)


_STUDENT_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"segment": True}, "you count a token-type table (T x H): DistilBERT dropped it"),
    ({"pooler": True}, "you count a pooler (H x H + H): DistilBERT has none"),
    (
        {"decoder_weight": True},
        "the decoder's V x H weight is counted twice: it IS the word-embedding matrix (tied)",
    ),
    ({"teacher_depth": True}, "you count the teacher's L layers: the student has k"),
    ({"head": False}, "the MLM head's transform (dense H x H + H and its LayerNorm 2H) is missing"),
    ({"head": False, "decoder_bias": False}, "the MLM head is missing (H x H + H + 2H + V)"),
    ({"decoder_bias": False}, "the decoder's bias (V, one per token) is missing"),
    ({"embedding_ln": False}, "the LayerNorm after the embeddings (2H) is missing"),
    (
        {"segment": True, "pooler": True},
        "you count BERT's token-type table and pooler: DistilBERT dropped both",
    ),
)


def check_student_parameters(student_parameters: Callable) -> None:
    """`student_parameters(V, H, L, I, P, T, k)` -> parameters of the DistilBertForMaskedLM
    student with k layers, initialised from a BertForMaskedLM teacher of sizes V, H, L, I, P, T."""
    results = []
    for dims in _STUDENT_DIMS:
        V, H, L, I, P, T, k = dims  # noqa: N806, E741
        config = DistilBertConfig(
            vocab_size=V,
            hidden_size=H,
            num_hidden_layers=k,
            num_attention_heads=4 if H % 4 == 0 else 1,
            intermediate_size=I,
            max_position_embeddings=P,
        )
        reference = count_parameters(config, "DistilBertForMaskedLM")["total"]
        assert reference == _student_count(*dims), dims  # the mistake table starts from the truth
        got = run_learner_code(student_parameters, *dims)
        expect(
            isinstance(got, numbers.Integral) and not isinstance(got, bool),
            f"return an int, got {got!r} ({type(got).__name__}).",
        )
        results.append((dims, int(got), reference))
    wrong = [r for r in results if r[1] != r[2]]
    if not wrong:
        teacher = count_parameters(BertConfig(), "BertForMaskedLM")[
            "total"
        ]  # bert-base's MLM model
        student = results[0][2]
        passed(
            f"every configuration, one layer and T = 1, 3 included. The 6-layer student of "
            f"bert-base has {student:,} parameters, {student / teacher:.0%} of the teacher's "
            f"{teacher:,}: the embeddings stay whole, so halving the layers keeps more than half."
        )
        return
    hints = [
        hint
        for flags, hint in _STUDENT_MISTAKES
        if all(got == _student_count(*d, **flags) for d, got, _ in results)
    ]
    (V, H, L, I, P, T, k), got, want = wrong[0]  # noqa: N806, E741
    where = (
        f"for V={V}, H={H}, L={L}, I={I}, P={P}, T={T}, k={k} you get {got:,}, expected "
        f"{want:,} (off by {got - want:+,})"
    )
    if not hints and k == 1 and all(g == w for d, g, w in results if d[-1] != 1):
        hints = ["right for several layers but not for ONE: a student of k = 1 has one layer"]
    raise ExerciseError(
        where
        + (
            ": " + "; or ".join(hints) + "."
            if hints
            else ". Go through the student's parts: embeddings, k layers, the MLM head."
        )
    )


# ----- exercise 4: a test that knows a correct initialisation ---------------------------------


def _tiny_teacher(pre_layer_norm: bool, seed: int) -> BertForMaskedLM:
    torch.manual_seed(seed)
    # Six layers for a student to choose from; no dropout (the teacher only runs in eval mode).
    config = tiny_config(BertConfig, 50, 16, layers=6, heads=2, max_positions=20)
    teacher = BertForMaskedLM(config.replace(intermediate_size=32, pre_layer_norm=pre_layer_norm))
    with torch.no_grad():  # LayerNorms and biases start at 1 / 0: make every tensor distinctive
        for p in teacher.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return teacher.eval()


def _perturb(student: DistilBertForMaskedLM, name: str, amount: float = 0.0) -> None:
    """Parameter `name` of the student re-drawn (amount 0) or nudged by `amount`."""
    p = student.get_parameter(name)
    with torch.no_grad():
        if amount:
            p.add_(amount)
        else:
            p.copy_(torch.randn_like(p) * 0.02)


def _feed_forward_bias(student: DistilBertForMaskedLM, layer: int) -> str:
    """The name of the last feed-forward bias of student layer `layer` (whatever the module
    calls its maps)."""
    prefix = f"backbone.encoder.layers.{layer}.feed_forward."
    return [
        n for n, _ in student.named_parameters() if n.startswith(prefix) and n.endswith("bias")
    ][-1]


def _share_layer(teacher: BertForMaskedLM, student: DistilBertForMaskedLM, i: int, j: int) -> None:
    student.backbone.encoder.layers[i] = teacher.backbone.encoder.layers[j]


def _student_panel() -> list[tuple[bool, str, bool, list[int], Callable | None]]:
    """(right?, what the case is, pre-LN teacher?, layers claimed, how the student is spoiled)."""
    return [
        (
            True,
            "a correct student (post-LN teacher, layers [0, 2, 3, 5])",
            False,
            [0, 2, 3, 5],
            None,
        ),
        (True, "a correct student from layers in reversed order [5, 1]", True, [5, 1], None),
        (True, "a correct one-layer student (layers [4])", False, [4], None),
        (
            False,
            "a student whose layer i is teacher layer layers[i] + 1 (layers [0, 2, 3] claimed, "
            "[1, 3, 4] copied)",
            False,
            [0, 2, 3],
            "shifted",
        ),
        (
            False,
            "a student with its word embeddings left random",
            False,
            [0, 2, 3, 5],
            lambda t, s: _perturb(s, "backbone.embeddings.word_embeddings.weight"),
        ),
        (
            False,
            "a student with its position embeddings left random",
            False,
            [0, 2, 3, 5],
            lambda t, s: _perturb(s, "backbone.embeddings.position_embeddings.weight"),
        ),
        (
            False,
            "a student whose MLM decoder bias was not copied",
            False,
            [0, 2, 3, 5],
            lambda t, s: _perturb(s, "mlm_head.decoder.bias"),
        ),
        (
            False,
            "a student whose MLM head transform (mlm_head.dense) was not copied",
            False,
            [0, 2, 3, 5],
            lambda t, s: _perturb(s, "mlm_head.dense.weight"),
        ),
        (
            False,
            "a pre-LN student whose final LayerNorm (backbone.encoder.final_norm) was not copied",
            True,
            [1, 3, 5],
            lambda t, s: _perturb(s, "backbone.encoder.final_norm.weight"),
        ),
        (
            False,
            "a student whose layer 1 feed-forward bias is off by 1e-4 (a near miss)",
            False,
            [0, 2, 3, 5],
            lambda t, s: _perturb(s, _feed_forward_bias(s, layer=1), 1e-4),
        ),
        (
            False,
            "a student that holds the teacher's own layer 2 module (same tensors, not a copy: "
            "training the student would change the teacher)",
            False,
            [0, 2, 3, 5],
            lambda t, s: _share_layer(t, s, 1, 2),
        ),
    ]


def check_copied_student_test(is_copied_from: Callable) -> None:
    """`is_copied_from(teacher, student, layers)` -> True when `student` (a DistilBertForMaskedLM)
    is exactly the initialisation of DistilBERT from `teacher` (a BertForMaskedLM) with teacher
    layer layers[i] as student layer i, its own copies of every tensor; False otherwise."""
    teachers = {pre_ln: _tiny_teacher(pre_ln, seed=3) for pre_ln in (False, True)}
    for right, what, pre_ln, layers, spoil in _student_panel():
        teacher = teachers[pre_ln]
        copied = [j + 1 for j in layers] if spoil == "shifted" else layers
        student = init_student_from_teacher(teacher, copied)
        if callable(spoil):
            spoil(teacher, student)
        before = {k: v.clone() for k, v in teacher.state_dict().items()}
        got = run_learner_code(is_copied_from, teacher, student, list(layers))
        expect(
            isinstance(got, bool | torch.Tensor)
            and (not isinstance(got, torch.Tensor) or got.numel() == 1),
            f"return True or False, got {got!r}.",
        )
        expect(
            all(torch.equal(before[k], v) for k, v in teacher.state_dict().items()),
            "your test changed the teacher's weights: a test only reads.",
        )
        if bool(got) != right:
            raise ExerciseError(
                f"your test {'rejects' if right else 'accepts'} {what}"
                + (
                    ": it is right, so the test must say True (compare each student tensor with "
                    "its teacher tensor by name: student layer i <- teacher layer layers[i])."
                    if right
                    else ". "
                    + _NEAR_MISS_HINT.get(what.split(" (")[0], "Compare every tensor exactly.")
                )
            )
    passed(
        f"your test accepts the {sum(r for r, *_ in _student_panel())} correct students "
        "(reversed layers and a one-layer student among them) and rejects all "
        f"{sum(not r for r, *_ in _student_panel())} spoiled ones: wrong layers, an embedding, "
        "the head, the final LayerNorm, a 1e-4 near miss, a shared module."
    )


_NEAR_MISS_HINT = {
    "a student whose layer i is teacher layer layers[i] + 1": "Student layer i must equal "
    "teacher layer layers[i], not just some teacher layer.",
    "a student with its word embeddings left random": "The embeddings are copied too.",
    "a student with its position embeddings left random": "Every embedding table is copied: "
    "word AND position.",
    "a student whose MLM decoder bias was not copied": "The MLM head is part of the copy.",
    "a student whose MLM head transform": "The MLM head is part of the copy.",
    "a pre-LN student whose final LayerNorm": "A pre-LN model ends with a LayerNorm "
    "(encoder.final_norm): it is copied too.",
    "a student whose layer 1 feed-forward bias is off by 1e-4": "A copy is bit-identical: "
    "compare with torch.equal, not a tolerance.",
    "a student that holds the teacher's own layer 2 module": "Equal values are not enough: "
    "a copy lives in its own storage (compare data_ptr(), or `is`).",
}


__all__ = [
    "check_copied_student_test",
    "check_cosine_token_weights",
    "check_distillation_gradient",
    "check_student_parameters",
]
