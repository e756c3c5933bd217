"""The chapter 04 (DistilBERT) checkers accept correct answers and reject typical mistakes with
specific feedback."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.exercises import ExerciseError
from course_lib.exercises.distil import (
    check_copy_teacher,
    check_distillation_kl,
    check_hidden_cosine,
    check_student_layers,
)


def stub(*args):
    raise NotImplementedError()


# --- the temperature-scaled KL ----------------------------------------------------------------------


def good_kl(student, teacher, t):
    log_p_s = F.log_softmax(student / t, dim=-1)
    log_p_t = F.log_softmax(teacher / t, dim=-1)
    return (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean() * t**2


def test_kl_checker_accepts_the_formula_and_the_kldivloss_form(capsys):
    check_distillation_kl(good_kl)

    def with_kldivloss(student, teacher, t):  # how the reference training script writes it
        loss = torch.nn.KLDivLoss(reduction="batchmean")
        return loss(F.log_softmax(student / t, -1), F.softmax(teacher / t, -1)) * t**2

    check_distillation_kl(with_kldivloss)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda s, te, t: good_kl(s, te, t) / t**2, "missing the T\\^2 factor"),
        (lambda s, te, t: good_kl(te, s, t), "wrong way round"),
        (lambda s, te, t: good_kl(s, te, 1.0) * t**2, "not applied inside the softmax"),
        (lambda s, te, t: good_kl(s / t, te, 1.0) * t**2, "only the student's logits"),
        (lambda s, te, t: good_kl(s, te / t, 1.0) * t**2, "only the teacher's logits"),
        (lambda s, te, t: good_kl(s, te, t) * s.shape[0], "sum over the 6 rows"),
        (
            # what F.kl_div(..., reduction="mean") computes: the sum over every element / its count
            lambda s, te, t: (
                F.kl_div(F.log_softmax(s / t, -1), F.softmax(te / t, -1), reduction="sum")
                / s.numel()
                * t**2
            ),
            "reduction='mean'",
        ),
        (lambda s, te, t: good_kl(s.detach(), te, t), "stay differentiable"),
        (lambda s, te, t: good_kl(s, te, t) / t, "the factor is T, not T\\^2"),
        (lambda s, te, t: good_kl(s, te, t) * t, "the factor is T\\^3"),
        (lambda s, te, t: F.cross_entropy(s / t, F.softmax(te / t, -1)) * t**2, "cross-entropy"),
        (
            lambda s, te, t: (
                F.kl_div(F.softmax(s / t, -1), F.softmax(te / t, -1), reduction="batchmean") * t**2
            ),
            "LOG-probabilities",
        ),
        (lambda s, te, t: good_kl(s, te, t).reshape(1), "scalar"),
    ],
)
def test_kl_checker_names_typical_mistakes(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_distillation_kl(wrong)


# --- the hidden-state cosine ------------------------------------------------------------------------


def good_cosine(s, t, mask):
    real = mask.bool()
    return (1 - F.cosine_similarity(s[real], t[real], dim=-1)).mean()


def mean_of_means(s, t, m):
    cos = F.cosine_similarity(s, t, dim=-1)
    return torch.stack([(1 - cos[i][m[i].bool()]).mean() for i in range(len(s))]).mean()


def test_cosine_checker_accepts_a_correct_answer(capsys):
    check_hidden_cosine(good_cosine)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (
            lambda s, t, m: (1 - F.cosine_similarity(s, t, dim=-1)).mean(),
            "padding positions are counted",
        ),
        (
            lambda s, t, m: F.cosine_similarity(s[m.bool()], t[m.bool()], dim=-1).mean(),
            "return 1 - cos",
        ),
        (mean_of_means, "mean of per-sentence means"),
        (
            lambda s, t, m: (1 - F.cosine_similarity(s, t, -1))[m.bool()].sum(),
            "you sum over the real",
        ),
        (lambda s, t, m: ((1 - F.cosine_similarity(s, t, dim=-1)) * m).mean(), "padding's zeros"),
        (lambda s, t, m: (1 - F.cosine_similarity(s, t, dim=1)).mean(), "wrong dimension"),
        (lambda s, t, m: good_cosine(s, t, m).reshape(1), "scalar"),
        (lambda s, t, m: ((s - t)[m.bool()] ** 2).mean(), "expected"),
    ],
)
def test_cosine_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_hidden_cosine(wrong)


# --- which layers -----------------------------------------------------------------------------------


def good_layers(n):
    k = n // 2
    return [int(i * (n - 1) / (k - 1) + 0.5) for i in range(k)]


def test_layer_choice_checker_accepts_a_correct_answer(capsys):
    check_student_layers(good_layers)
    assert "Correct!" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (lambda n: list(range(0, n, 2)), "keep the LAST layer"),
        (lambda n: list(range(1, n, 2)), "keep the first layer"),
        (lambda n: list(range(n // 3)), "half as many"),
        # floor instead of round half up
        (
            lambda n: [int(i * (n - 1) / (n // 2 - 1)) for i in range(n // 2)],
            r"expected \[0, 2, 4, 7, 9, 11\]",
        ),
        (lambda n: 6, "return a list"),
        (lambda n: [round(i * (n - 1) / (n // 2 - 1)) for i in range(n // 2)], "round halves UP"),
        (lambda n: [(0, 1)] * (n // 2), "flat list of layer indices"),
    ],
)
def test_layer_choice_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_student_layers(wrong)


# --- copying the teacher ----------------------------------------------------------------------------


def good_copy(teacher, student, layers):
    s, t = student.backbone, teacher.backbone
    for name in ("word_embeddings", "position_embeddings", "LayerNorm"):
        getattr(s.embeddings, name).load_state_dict(getattr(t.embeddings, name).state_dict())
    for i, j in enumerate(layers):
        s.encoder.layers[i].load_state_dict(t.encoder.layers[j].state_dict())
    if t.encoder.final_norm is not None:
        s.encoder.final_norm.load_state_dict(t.encoder.final_norm.state_dict())
    student.mlm_head.dense.load_state_dict(teacher.mlm_head.dense.state_dict())
    student.mlm_head.LayerNorm.load_state_dict(teacher.mlm_head.LayerNorm.state_dict())
    student.mlm_head.decoder.bias.data.copy_(teacher.mlm_head.decoder.bias.data)


def test_copy_checker_accepts_a_correct_copy(capsys):
    check_copy_teacher(good_copy)
    assert "Correct!" in capsys.readouterr().out


def first_layers(teacher, student, layers):
    good_copy(teacher, student, list(range(len(layers))))


def no_head(teacher, student, layers):
    good_copy(teacher, student, layers)
    torch.manual_seed(0)
    student.mlm_head.dense.reset_parameters()


def no_final_norm(teacher, student, layers):
    good_copy(teacher, student, layers)
    if student.backbone.encoder.final_norm is not None:
        student.backbone.encoder.final_norm.reset_parameters()


def no_embedding_norm(teacher, student, layers):
    good_copy(teacher, student, layers)
    student.backbone.embeddings.LayerNorm.reset_parameters()


def no_position_embeddings(teacher, student, layers):
    good_copy(teacher, student, layers)
    torch.nn.init.normal_(student.backbone.embeddings.position_embeddings.weight)


def shares(teacher, student, layers):
    good_copy(teacher, student, layers)
    student.backbone.encoder.layers[0] = teacher.backbone.encoder.layers[layers[0]]


def backwards(teacher, student, layers):
    good_copy(student, teacher, list(range(len(layers))))


def unties_the_decoder(teacher, student, layers):
    good_copy(teacher, student, layers)
    student.mlm_head.decoder.weight = torch.nn.Parameter(
        teacher.mlm_head.decoder.weight.detach().clone()
    )


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stub, "not implemented yet"),
        (first_layers, "student layer 1 holds teacher layer 1, expected teacher layer 2"),
        (no_head, "copy the MLM head"),
        (no_final_norm, "pre-LN teacher ends with one more LayerNorm"),
        (no_embedding_norm, "LayerNorm that follows the embeddings"),
        (no_position_embeddings, "copy the position embeddings"),
        (shares, "shares tensors with the teacher"),
        (backwards, "teacher's weights changed"),
        (unties_the_decoder, "must stay tied"),
    ],
)
def test_copy_checker_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_copy_teacher(wrong)
