# ruff: noqa: E741, N803  (V, H, L, I, P, T: the paper's letters)
"""The chapter 04 (DistilBERT) checkers accept correct answers and reject typical mistakes, each
with the message that names it, and answers right only at typical sizes at their edge."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.exercises import ExerciseError
from course_lib.exercises.core import check_own_work
from course_lib.exercises.distil import (
    check_copied_student_test,
    check_cosine_token_weights,
    check_distillation_gradient,
    check_student_parameters,
)


def stub(*args):
    raise NotImplementedError()


# --- exercise 1: the distillation term's gradient --------------------------------------------


def good_gradient(student, teacher, t):
    p_s, p_t = (student / t).softmax(-1), (teacher / t).softmax(-1)
    return t * (p_s - p_t) / student.shape[0]


def gradient_by_hand_exp(student, teacher, t):
    """softmax as exp / sum without the row maximum: right until the logits are large."""
    e_s, e_t = (student / t).exp(), (teacher / t).exp()
    return t * (e_s / e_s.sum(-1, keepdim=True) - e_t / e_t.sum(-1, keepdim=True)) / len(student)


def gradient_squeezed(student, teacher, t):
    return good_gradient(student, teacher, t).squeeze()


def test_gradient_checker_accepts_the_closed_form(capsys):
    check_distillation_gradient(good_gradient)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda s, te, t: good_gradient(s, te, t) / t**2, r"T\^2 of the loss is missing"),
        (lambda s, te, t: good_gradient(s, te, t) * t, "chain rule's 1/T is missing"),
        (lambda s, te, t: good_gradient(s, te, t) / t, "no temperature factor"),
        (lambda s, te, t: -good_gradient(s, te, t), "sign is flipped"),
        (lambda s, te, t: good_gradient(s, te, t) * len(s), "n times too large"),
        (lambda s, te, t: t * (s.softmax(-1) - te.softmax(-1)) / len(s), "not softened"),
        (lambda s, te, t: good_gradient(s, te, t)[0], "one number per logit"),
        (gradient_by_hand_exp, r"large logits.*NaN or inf"),
        (gradient_squeezed, r"one row of two logits.*one number per logit"),
    ],
)
def test_gradient_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_distillation_gradient(wrong)


def test_gradient_by_autograd_is_not_own_work():
    def by_autograd(student, teacher, t):
        from course_lib.objectives.distillation import kl_distillation_loss

        x = student.clone().requires_grad_()
        return torch.autograd.grad(kl_distillation_loss(x, teacher, t), x)[0]

    check_distillation_gradient(by_autograd)  # right values: only the hidden test tells
    with pytest.raises(ExerciseError, match="ready-made"):
        check_own_work(
            by_autograd,
            check_distillation_gradient,
            "course_lib.objectives.distillation",
            torch.autograd.grad,
            torch.Tensor.backward,
        )
    check_own_work(good_gradient, check_distillation_gradient, torch.autograd.grad)


# --- exercise 2: the weight of each token in the cosine term ----------------------------------


def good_weights(attention_mask):
    real = attention_mask.float()
    return real / real.sum()


def per_sentence(attention_mask):
    real = attention_mask.float()
    return real / real.sum(1, keepdim=True) / real.shape[0]


def per_sentence_safe(attention_mask):
    """A per-sentence mean that avoids 0/0: still the wrong weights."""
    real = attention_mask.float()
    return real / real.sum(1, keepdim=True).clamp(min=1) / real.shape[0]


def test_weights_checker_accepts_the_token_mean(capsys):
    check_cosine_token_weights(good_weights)
    out = capsys.readouterr().out
    assert "Correct!" in out and "0.0400" in out  # 25 real tokens


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (per_sentence_safe, "average within each sentence"),
        (lambda m: m.float() / m.float().sum(1, keepdim=True).clamp(min=1), "sum to B"),
        (lambda m: torch.full(m.shape, 1 / m.numel()), "padding gets weight"),
        (lambda m: m.float() / m.numel(), "divide by every position"),
        (lambda m: m.float(), "the mask itself"),
        (lambda m: good_weights(m)[:, :-1], "one weight per position"),
        (lambda m: good_weights(m) + (1 - m) * 0.01, "padding positions get weight"),
    ],
)
def test_weights_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_cosine_token_weights(wrong)


def test_weights_edges_reject_answers_right_only_at_typical_sizes():
    # the per-sentence mean itself is caught at the typical mask; a per-row formula that is
    # right there but divides 0 by 0 is caught at the row of padding only
    def token_mean_by_rows(m):
        real = m.float()
        per_row = real / real.sum(1, keepdim=True)  # NaN on a row of padding only
        return per_row * real.sum(1, keepdim=True) / real.sum()

    with pytest.raises(ExerciseError, match=r"a row of padding only.*NaN"):
        check_cosine_token_weights(token_mean_by_rows)
    with pytest.raises(ExerciseError, match=r"a batch of one.*\.squeeze"):
        check_cosine_token_weights(lambda m: good_weights(m).squeeze())

    def in_place(m):
        m.mul_(1)
        m[m == 0] = 0
        m += 0
        out = good_weights(m.clone())
        m.zero_()
        return out

    with pytest.raises(ExerciseError, match="modified its input `attention_mask`"):
        check_cosine_token_weights(in_place)


# --- exercise 3: the student's parameters -------------------------------------------------------


def good_student(V, H, L, I, P, T, k):  # noqa: E741, N803
    layer = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 4 * H
    return (V + P) * H + 2 * H + k * layer + (H * H + H + 2 * H) + V


def test_student_checker_accepts_the_count(capsys):
    check_student_parameters(good_student)
    out = capsys.readouterr().out
    assert "Correct!" in out and "66,985,530" in out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) + T * H, "token-type"),
        (lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) + H * H + H, "pooler"),
        (lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) + V * H, "counted twice"),
        (lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, L), "teacher's L layers"),
        (lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) - V, "decoder's bias"),
        (
            lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) - H * H - 3 * H,
            "transform",
        ),
        (
            lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, k) + T * H + H * H + H,
            "dropped both",
        ),
        (lambda *d: float(good_student(*d)), "return an int"),
        (
            lambda V, H, L, I, P, T, k: good_student(V, H, L, I, P, T, max(k, 2)),
            "k = 1 has one layer",
        ),
    ],
)
def test_student_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_student_parameters(wrong)


# --- exercise 4: a test of the initialisation -----------------------------------------------


def good_is_copied_from(teacher, student, layers):
    t = dict(teacher.named_parameters())
    if len(student.backbone.encoder.layers) != len(layers):
        return False
    for name, p in student.named_parameters():
        parts = name.split(".")
        if name.startswith("backbone.encoder.layers."):
            parts[3] = str(layers[int(parts[3])])
        q = t.get(".".join(parts))
        if q is None or q.shape != p.shape or not torch.equal(p, q) or p.data_ptr() == q.data_ptr():
            return False
    return True


def ignores_layers(teacher, student, layers):
    """Every student layer equals SOME teacher layer: the order is not checked."""
    t = dict(teacher.named_parameters())
    for name, p in student.named_parameters():
        if name.startswith("backbone.encoder.layers."):
            parts = name.split(".")
            if not any(
                torch.equal(p, t[".".join(parts[:3] + [str(j)] + parts[4:])])
                for j in range(len(teacher.backbone.encoder.layers))
            ):
                return False
    return True


def layers_only(teacher, student, layers):
    tl = teacher.backbone.encoder.layers
    return all(
        all(torch.equal(a, b) for a, b in zip(s.parameters(), tl[j].parameters()))
        for s, j in zip(student.backbone.encoder.layers, layers)
    )


def with_tolerance(teacher, student, layers):
    t = dict(teacher.named_parameters())
    for name, p in student.named_parameters():
        parts = name.split(".")
        if name.startswith("backbone.encoder.layers."):
            parts[3] = str(layers[int(parts[3])])
        if not torch.allclose(p, t[".".join(parts)], atol=1e-3):
            return False
    return True


def values_only(teacher, student, layers):
    t = dict(teacher.named_parameters())
    for name, p in student.named_parameters():
        parts = name.split(".")
        if name.startswith("backbone.encoder.layers."):
            parts[3] = str(layers[int(parts[3])])
        if not torch.equal(p, t[".".join(parts)]):
            return False
    return True


def test_copied_student_checker_accepts_a_right_test(capsys):
    check_copied_student_test(good_is_copied_from)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda t, s, l: True, "accepts a student whose layer i is teacher layer"),
        (lambda t, s, l: False, "rejects a correct student"),
        (ignores_layers, r"accepts a student whose layer i.*layers\[i\]"),
        (layers_only, "accepts a student with its word embeddings left random"),
        (with_tolerance, "near miss.*torch.equal"),
        (values_only, "holds the teacher's own layer 2 module.*data_ptr"),
        (lambda t, s, l: "yes", "return True or False"),
    ],
)
def test_copied_student_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_copied_student_test(wrong)


def test_a_test_built_on_the_librarys_init_is_not_own_work():
    from course_lib.objectives.distillation import init_student_from_teacher

    def by_library(teacher, student, layers):
        ref = init_student_from_teacher(teacher, layers)
        return good_is_copied_from(teacher, student, layers) and all(
            torch.equal(a, b) for a, b in zip(ref.parameters(), student.parameters())
        )

    with pytest.raises(ExerciseError, match="ready-made.*init_student_from_teacher"):
        check_own_work(
            by_library,
            check_copied_student_test,
            "course_lib.objectives.distillation:init_student_from_teacher",
        )


def test_cosine_weights_match_the_library_loss():
    from course_lib.objectives.distillation import hidden_cosine_loss

    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    s, t = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    mine = (good_weights(mask) * (1 - F.cosine_similarity(s, t, dim=-1))).sum()
    assert torch.allclose(mine, hidden_cosine_loss(s, t, mask), atol=1e-6)
