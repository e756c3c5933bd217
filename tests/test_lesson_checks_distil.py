"""Chapter 04's DistilBERT build checks (course_lib.exercises.lessons_distil): each fails on its
stub with what to write, names typical wrong answers (including ones right only at typical
sizes) with specific messages, returns the library's version for them, and accepts the master's
answer."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from lesson_masters import master_answer

from course_lib.exercises import lessons_distil as ld
from course_lib.labs import distil
from course_lib.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from course_lib.objectives.distillation import default_student_layers, init_student_from_teacher

CHAPTER = "04_deberta_distil"
INSTRUCTOR = Path(__file__).resolve().parents[1] / "chapters" / CHAPTER / "instructor"


def stub(*args, **kwargs):
    raise NotImplementedError()


CHECKS = {  # name -> (check, the library's fallback)
    "soften": (ld.check_soften, ld.library_soften),
    "distillation_loss": (ld.check_distillation_loss, ld.library_distillation_loss),
    "student_from_teacher": (ld.check_student_from_teacher, init_student_from_teacher),
    "fold_segment": (ld.check_fold_segment, ld.library_fold_segment),
    "posterior": (ld.check_posterior, ld.library_posterior),
    "choose_masked": (ld.check_choose_masked, distil.choose_masked),
}


@pytest.mark.parametrize("name", CHECKS)
def test_a_stub_is_not_written_yet_and_the_library_takes_over(name, capsys):
    check, fallback = CHECKS[name]
    assert check(stub) is fallback
    out = capsys.readouterr().out
    assert out == check.stub_output("stub")
    assert out.startswith("· Not written yet: `stub` — " + check.todo)
    assert "uses the library's" in out


# ----- typical wrong answers ---------------------------------------------------------------------


def soften_times_t(logits, t):
    return (logits * t).softmax(-1)


def soften_in_place(logits, t):  # right on a fresh tensor, but it eats the lesson's logits
    logits /= t
    return logits.softmax(-1)


def soften_naive_exp(logits, t):  # right while logits are small
    e = (logits / t).exp()
    return e / e.sum(-1, keepdim=True)


def soften_after(logits, t):
    return logits.softmax(-1) / t


def soften_dim0(logits, t):  # right for one row only
    return (logits / t).softmax(0)


def triple(
    student,
    teacher,
    batch,
    t,
    a_ce,
    a_mlm,
    a_cos,
    masked_only,
    *,
    grad_teacher=False,
    per_row_cos=False,
    fixed_weights=False,
):
    """The master's triple loss with one planted mistake switched on."""
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    with torch.set_grad_enabled(grad_teacher):
        t_out = teacher(input_ids=ids, attention_mask=mask)
    s_out = student(input_ids=ids, attention_mask=mask)
    real, masked = mask.bool(), labels != -100
    rows = masked if masked_only else real
    log_s = F.log_softmax(s_out.mlm_logits[rows] / t, -1)
    log_t = F.log_softmax(t_out.mlm_logits[rows] / t, -1)
    l_ce = t**2 * (log_t.exp() * (log_t - log_s)).sum(-1).mean()
    l_mlm = F.cross_entropy(s_out.mlm_logits[masked], labels[masked])
    cos = F.cosine_similarity(s_out.last_hidden_state, t_out.last_hidden_state, dim=-1)
    if per_row_cos:  # a mean per sentence, then over sentences
        l_cos = torch.stack([(1 - cos[b][real[b]]).mean() for b in range(len(cos))]).mean()
    else:
        l_cos = (1 - cos[real]).mean()
    if fixed_weights:
        a_ce, a_mlm, a_cos = 5.0, 2.0, 1.0
    terms = {"ce_loss": l_ce, "mlm_loss": l_mlm, "cos_loss": l_cos}
    return a_ce * l_ce + a_mlm * l_mlm + a_cos * l_cos, terms


def planted(**mistake):
    def loss(
        student,
        teacher,
        batch,
        T=2.0,
        alpha_ce=5.0,
        alpha_mlm=2.0,
        alpha_cos=1.0,
        ce_on_masked_only=False,
    ):
        if mistake.get("always_masked"):
            ce_on_masked_only = True
        return triple(
            student,
            teacher,
            batch,
            T,
            alpha_ce,
            alpha_mlm,
            alpha_cos,
            ce_on_masked_only,
            **{k: v for k, v in mistake.items() if k != "always_masked"},
        )

    return loss


def _student(teacher, layers, *, final_norm=True, keep_segments=False):
    t = teacher.backbone
    sizes = {k: v for k, v in t.config.to_dict().items() if k != "model_type"}
    types = sizes["type_vocab_size"] if keep_segments else 0
    student = DistilBertForMaskedLM(
        DistilBertConfig(**{**sizes, "num_hidden_layers": len(layers), "type_vocab_size": types})
    )
    s = student.backbone
    for name in ("word_embeddings", "position_embeddings", "LayerNorm"):
        getattr(s.embeddings, name).load_state_dict(getattr(t.embeddings, name).state_dict())
    for i, j in enumerate(layers):
        s.encoder.layers[i].load_state_dict(t.encoder.layers[j].state_dict())
    if final_norm:
        s.encoder.final_norm.load_state_dict(t.encoder.final_norm.state_dict())
    for name in ("dense", "LayerNorm"):
        getattr(student.mlm_head, name).load_state_dict(
            getattr(teacher.mlm_head, name).state_dict()
        )
    with torch.no_grad():
        student.mlm_head.decoder.bias.copy_(teacher.mlm_head.decoder.bias)
    return student


def init_pre_ln_only(teacher, layers=None):  # right for pre-LN teachers only
    layers = default_student_layers(teacher.config.num_hidden_layers) if layers is None else layers
    return _student(teacher, layers)


def init_every_other(teacher, layers=None):  # 0, 2, ...: drops the last layer
    n = teacher.config.num_hidden_layers
    layers = list(range(0, n, 2)) if layers is None else layers
    return _student(teacher, layers, final_norm=teacher.backbone.encoder.final_norm is not None)


def init_ignores_layers(teacher, layers=None):  # right whenever the default is asked for
    layers = default_student_layers(teacher.config.num_hidden_layers)
    return _student(teacher, layers, final_norm=teacher.backbone.encoder.final_norm is not None)


def init_keeps_segments(teacher, layers=None):
    layers = default_student_layers(teacher.config.num_hidden_layers) if layers is None else layers
    return _student(
        teacher,
        layers,
        final_norm=teacher.backbone.encoder.final_norm is not None,
        keep_segments=True,
    )


def _fold(table_name, row):
    def fold(model, teacher):
        types = teacher.backbone.embeddings.token_type_embeddings.weight
        segment = types.sum(0) if row == "all" else types[row]
        with torch.no_grad():
            getattr(model.backbone.embeddings, table_name).weight += segment
        return model

    return fold


def fold_no_return(model, teacher):
    ld.library_fold_segment(model, teacher)


def _forward_backward(hmm, x, seen, *, own=False):
    """A vectorised forward-backward with a planted mistake switched on."""
    tokens = torch.tensor(x)
    like = torch.where(
        torch.tensor(seen)[:, None], hmm.emission.T[tokens], torch.ones(1, dtype=torch.float64)
    )
    length = len(x)
    alpha = [hmm.start]
    for t in range(length - 1):
        alpha.append((alpha[t] * like[t]) @ hmm.transition)
    beta = [torch.ones(hmm.states, dtype=torch.float64)] * length
    for t in range(length - 2, -1, -1):
        beta[t] = hmm.transition @ (like[t + 1] * beta[t + 1])
    state = torch.stack(alpha) * torch.stack(beta)
    if own:
        state = state * like
    p = state @ hmm.emission
    return p / p.sum(-1, keepdim=True)


def masked_never_last(n, length, generator, rate=0.15):  # right except at the last column
    chosen = torch.rand(n, length, generator=generator) < rate
    chosen[torch.arange(n), torch.randint(0, length - 1, (n,), generator=generator)] = True
    return chosen


def masked_unforced(n, length, generator, rate=0.15):  # right whenever a row draws one anyway
    return torch.rand(n, length, generator=generator) < rate


def masked_global_rng(n, length, generator, rate=0.15):
    chosen = torch.rand(n, length) < rate
    chosen[torch.arange(n), torch.randint(0, length, (n,))] = True
    return chosen


WRONG = [  # (check, wrong answer, the message that names it)
    ("soften", soften_times_t, "you multiplied the logits by T"),
    ("soften", soften_in_place, "changed the logits it was given"),
    ("soften", soften_naive_exp, "logits of 1000, T = 1: your soft targets hold NaN"),
    ("soften", soften_after, "sums to 0.50 = 1/T"),
    ("soften", soften_dim0, r"a batch of 3 rows .* \(dim=0\)"),
    ("distillation_loss", planted(always_masked=True), "over the masked positions only"),
    ("distillation_loss", planted(grad_teacher=True), "the teacher received gradients"),
    (
        "distillation_loss",
        planted(per_row_cos=True),
        "L_cos is NaN. Row 2 of the batch is padding only",
    ),
    ("distillation_loss", planted(fixed_weights=True), "weights 5 / 2 / 1 whatever the arguments"),
    ("student_from_teacher", init_pre_ln_only, "post-LN teacher has no final LayerNorm"),
    ("student_from_teacher", init_every_other, "holds teacher layer 2, expected teacher layer 3"),
    (
        "student_from_teacher",
        init_ignores_layers,
        "layers=\\[2\\]: a student with ONE layer: the student has 2",
    ),
    ("student_from_teacher", init_keeps_segments, "DistilBERT has no segment embeddings"),
    ("fold_segment", _fold("word_embeddings", 0), "you changed the word embeddings"),
    ("fold_segment", _fold("position_embeddings", 1), "you added segment row 1"),
    ("fold_segment", _fold("position_embeddings", "all"), "you added every segment row"),
    ("fold_segment", fold_no_return, "return the model"),
    ("posterior", lambda h, x, s: _forward_backward(h, x, s, own=True), "you used x_i itself"),
    (
        "posterior",
        lambda h, x, s: _forward_backward(h, x, [True] * len(x)),
        "a masked token counted as seen",
    ),
    (
        "posterior",
        lambda h, x, s: _forward_backward(h, x, s).squeeze(),
        "a sequence of ONE token",
    ),
    ("choose_masked", masked_never_last, r"never lands on column\(s\) \[6\]"),
    ("choose_masked", masked_unforced, "rows have nothing masked"),
    ("choose_masked", masked_global_rng, "seeded alike chose different positions"),
]


@pytest.mark.parametrize(("name", "wrong", "message"), WRONG)
def test_a_typical_mistake_is_named_and_the_library_takes_over(name, wrong, message, capsys):
    check, fallback = CHECKS[name]
    assert check(wrong) is fallback
    out = capsys.readouterr().out
    assert out.startswith("✗ ")
    assert re.search(message, out), out
    assert "uses the library's" in out


def test_a_check_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ld.check_student_from_teacher(init_every_other)
    assert torch.equal(torch.rand(3), expected)


def test_the_library_fold_makes_a_full_copy_the_teacher(capsys):
    assert ld.check_fold_segment(ld.library_fold_segment) is ld.library_fold_segment
    assert capsys.readouterr().out.startswith("✓ Correct!")


# ----- the masters' answers ----------------------------------------------------------------------

MASTERS = {  # notebook -> {answer name: check}
    "06_distillation_idea.ipynb": {
        "soften": ld.check_soften,
        "my_distillation_loss": ld.check_distillation_loss,
    },
    "07_student_from_teacher.ipynb": {
        "my_student_from_teacher": ld.check_student_from_teacher,
        "fold_segment": ld.check_fold_segment,
    },
    "13_distil_labs.ipynb": {
        "my_posterior": ld.check_posterior,
        "my_choose_masked": ld.check_choose_masked,
    },
}
NAMESPACE = {
    "DistilBertConfig": DistilBertConfig,
    "DistilBertForMaskedLM": DistilBertForMaskedLM,
    "default_student_layers": default_student_layers,
    "distil": distil,
}


@pytest.mark.parametrize(
    ("notebook", "name"), [(nb, name) for nb, names in MASTERS.items() for name in names]
)
def test_the_masters_answer_is_correct(notebook, name, capsys):
    candidate = master_answer(CHAPTER, notebook, name, **NAMESPACE)
    assert MASTERS[notebook][name](candidate) is candidate
    assert capsys.readouterr().out.startswith("✓ Correct!")


def test_every_build_cell_of_the_masters_is_checked():
    for notebook, names in MASTERS.items():
        nb = nbformat.read(INSTRUCTOR / notebook, as_version=4)
        builds = [c for c in nb.cells if "build" in c.metadata.get("tags", [])]
        assert len(builds) == len(names), notebook
        for cell in builds:
            assert any(f"def {n}(" in cell.source for n in names), cell.source[:80]
