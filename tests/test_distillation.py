"""The distillation objective against direct formulas, its teacher handling, and its fit with the engine."""

import copy

import pytest
import torch
import torch.nn.functional as F
from training_helpers import ToyCollator, toy_examples

from course_lib.config import BertConfig
from course_lib.models.bert import BertForMaskedLM
from course_lib.objectives.distillation import (
    DistillationObjective,
    hidden_cosine_loss,
    init_student_from_teacher,
    kl_distillation_loss,
)
from course_lib.training import Trainer, TrainingConfig

VOCAB = 64  # training_helpers' toy vocabulary


def random_logits(rows=8, vocab=50, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=g) * scale, torch.randn(
        rows, vocab, generator=g
    ) * scale


# --- the two distillation terms -------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 2.0, 5.0])
def test_kl_term_equals_the_direct_formula(temperature):
    student, teacher = random_logits()
    p_t = torch.softmax(teacher / temperature, dim=-1)
    p_s = torch.softmax(student / temperature, dim=-1)
    direct = (p_t * (p_t.log() - p_s.log())).sum(-1).mean() * temperature**2
    assert kl_distillation_loss(student, teacher, temperature).item() == pytest.approx(
        direct.item(), rel=1e-5
    )
    # the reference script's formulation: nn.KLDivLoss(batchmean) on softmax targets, times T^2
    reference = torch.nn.KLDivLoss(reduction="batchmean")(
        F.log_softmax(student / temperature, -1), p_t
    )
    assert kl_distillation_loss(student, teacher, temperature).item() == pytest.approx(
        reference.item() * temperature**2, rel=1e-5
    )


def test_kl_term_is_zero_only_when_the_distributions_agree():
    student, teacher = random_logits()
    assert kl_distillation_loss(teacher, teacher, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    # a constant shift of the logits leaves the softmax unchanged
    assert kl_distillation_loss(teacher + 3.0, teacher, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    assert kl_distillation_loss(student, teacher, 2.0).item() > 0.1


def test_t_squared_keeps_gradient_sizes_comparable_across_temperatures():
    student, teacher = random_logits()
    norms = {}
    for t in (2.0, 4.0, 8.0, 16.0, 64.0):
        x = student.clone().requires_grad_()
        kl_distillation_loss(x, teacher, t).backward()
        norms[t] = x.grad
    scaled = [g.norm().item() for g in norms.values()]
    unscaled = [g.norm().item() / t**2 for t, g in norms.items()]
    assert max(scaled) / min(scaled) < 1.7  # with T^2: the same order of magnitude
    assert max(unscaled) / min(unscaled) > 500  # without it: the gradient falls as 1/T^2
    # why: for large T the T^2-scaled gradient tends to a T-free limit, the gradient of matching
    # centred logits, (z_s - mean z_s - z_t + mean z_t) / (vocab * rows); the error shrinks as 1/T
    diff = (student - student.mean(-1, keepdim=True)) - (teacher - teacher.mean(-1, keepdim=True))
    limit = diff / (student.shape[1] * student.shape[0])
    assert ((norms[64.0] - limit).norm() / limit.norm()).item() < 0.05
    assert ((norms[16.0] - limit).norm() / limit.norm()).item() > 0.05


def test_kl_term_with_nothing_masked_is_a_differentiable_zero():
    empty = torch.zeros(0, 50, requires_grad=True)
    loss = kl_distillation_loss(empty, torch.zeros(0, 50), 2.0)
    loss.backward()
    assert loss.item() == 0.0 and empty.grad.shape == (0, 50)


def test_cosine_term_equals_cosine_embedding_loss_on_real_tokens():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(2, 7, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0
    real = mask.bool()
    expected = torch.nn.CosineEmbeddingLoss()(s[real], t[real], torch.ones(int(real.sum())))
    assert hidden_cosine_loss(s, t, mask).item() == pytest.approx(expected.item(), rel=1e-5)
    s2 = s.clone()
    s2[1, 5] = 100.0  # padding positions do not count
    assert hidden_cosine_loss(s2, t, mask).item() == pytest.approx(expected.item(), rel=1e-5)
    assert hidden_cosine_loss(2.0 * t, t, mask).item() == pytest.approx(
        0.0, abs=1e-6
    )  # direction only


def test_mismatched_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="same vocabulary"):
        kl_distillation_loss(torch.zeros(3, 10), torch.zeros(3, 11), 2.0)
    with pytest.raises(ValueError, match="alpha_cos=0"):
        hidden_cosine_loss(torch.zeros(1, 2, 8), torch.zeros(1, 2, 16), torch.ones(1, 2))


# --- the objective --------------------------------------------------------------------------------


def tiny_teacher(seed=0) -> BertForMaskedLM:
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = BertForMaskedLM(config)
    with torch.no_grad():  # why: an untrained head predicts near-uniformly, which would make the
        model.mlm_head.decoder.bias.normal_(0.0, 2.0)  # KL term tiny; give it confident opinions
    return model


def mlm_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    ids[mask == 0] = 0
    labels = torch.full_like(ids, -100)
    for row, col in [(0, 2), (0, 7), (1, 1), (1, 6), (2, 3)]:
        labels[row, col] = ids[row, col]
        ids[row, col] = 3  # [MASK]
    return dict(
        input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels
    )


@pytest.mark.parametrize("restrict_ce_to_mask", [False, True])
def test_objective_is_the_weighted_sum_of_the_three_terms(restrict_ce_to_mask):
    teacher = tiny_teacher()
    student = init_student_from_teacher(tiny_teacher(seed=1))  # not the teacher's weights
    objective = DistillationObjective(
        teacher,
        temperature=3.0,
        alpha_ce=5.0,
        alpha_mlm=2.0,
        alpha_cos=1.0,
        restrict_ce_to_mask=restrict_ce_to_mask,
    )
    batch = mlm_batch()
    student.eval()
    loss, metrics = objective(student, batch)
    assert set(metrics) == {"ce_loss", "mlm_loss", "cos_loss"}
    assert all(not m.requires_grad for m in metrics.values())
    with torch.no_grad():  # full logits ([batch, seq, vocab]): the models run without labels
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        s = student(**{k: v for k, v in inputs.items() if k != "token_type_ids"})
        t = teacher(**inputs)
        masked = batch["labels"] != -100
        real = batch["attention_mask"].bool()
        # the reference distiller.py: L_ce over attention_mask rows unless --restrict_ce_to_mask
        rows = masked if restrict_ce_to_mask else real
        assert int(rows.sum()) == (5 if restrict_ce_to_mask else 33 - 3 - 6)
        log_p_t = torch.log_softmax(t.mlm_logits[rows] / 3.0, -1)
        log_p_s = torch.log_softmax(s.mlm_logits[rows] / 3.0, -1)
        ce = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean() * 9.0
        mlm = F.cross_entropy(s.mlm_logits[masked], batch["labels"][masked])
        cos = (
            1 - F.cosine_similarity(s.last_hidden_state[real], t.last_hidden_state[real], dim=-1)
        ).mean()
    assert metrics["ce_loss"].item() == pytest.approx(ce.item(), rel=1e-5)
    assert metrics["mlm_loss"].item() == pytest.approx(mlm.item(), rel=1e-5)
    assert metrics["cos_loss"].item() == pytest.approx(cos.item(), rel=1e-5)
    assert loss.item() == pytest.approx(5 * ce.item() + 2 * mlm.item() + cos.item(), rel=1e-5)
    # a zero weight drops the term (and its cost) entirely
    loss_no_cos, metrics = DistillationObjective(teacher, alpha_cos=0.0)(student, batch)
    assert "cos_loss" not in metrics


def test_all_tokens_is_the_default_and_differs_from_masked_only():
    teacher = tiny_teacher()
    student = init_student_from_teacher(tiny_teacher(seed=1)).eval()
    batch = mlm_batch()
    default = DistillationObjective(teacher)
    assert default.restrict_ce_to_mask is False
    _, every = default(student, batch)
    _, explicit = DistillationObjective(teacher, restrict_ce_to_mask=False)(student, batch)
    _, masked_only = DistillationObjective(teacher, restrict_ce_to_mask=True)(student, batch)
    assert every["ce_loss"].item() == explicit["ce_loss"].item()
    assert abs(every["ce_loss"].item() - masked_only["ce_loss"].item()) > 1e-3
    # the other two terms do not depend on where L_ce is taken
    for key in ("mlm_loss", "cos_loss"):
        assert every[key].item() == pytest.approx(masked_only[key].item(), rel=1e-6)
    with pytest.raises(ValueError, match="restrict_ce_to_mask='yes' is invalid"):
        DistillationObjective(teacher, restrict_ce_to_mask="yes")


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("restrict_ce_to_mask", [False, True])
def test_both_ce_modes_are_exact_under_gradient_accumulation(restrict_ce_to_mask):
    """4 micro-batches of 8 = one batch of 32 (loss, gradients, weights after the step), with
    L_ce over the real tokens (share of the step's real tokens) or the masked ones (share of its
    masked tokens). The micro-batches hold different numbers of each (checked there)."""
    from test_exact_accumulation import _assert_same_step, _one_step, _setup

    def objective():
        objective = _setup("distilbert-triple")[2]  # the same teacher every call
        objective.restrict_ce_to_mask = restrict_ce_to_mask
        return objective

    big = _one_step("distilbert-triple", accumulation=1, objective=objective())
    _assert_same_step(_one_step("distilbert-triple", accumulation=4, objective=objective()), big)


def test_a_copy_of_the_teacher_has_zero_distillation_terms():
    teacher = tiny_teacher()
    student = copy.deepcopy(teacher).eval()
    _, metrics = DistillationObjective(teacher)(student, mlm_batch())
    assert metrics["ce_loss"].item() == pytest.approx(0.0, abs=1e-6)
    assert metrics["cos_loss"].item() == pytest.approx(0.0, abs=1e-6)
    assert metrics["mlm_loss"].item() > 1.0  # an untrained model still gets the tokens wrong


def test_teacher_runs_in_eval_mode_without_gradients():
    teacher = tiny_teacher().train()
    student = init_student_from_teacher(teacher)
    objective = DistillationObjective(teacher)
    assert not teacher.training
    teacher.train()  # switched back by someone: the objective still runs it in eval mode
    seen = []
    teacher.register_forward_hook(
        lambda m, i, o: seen.append((m.training, torch.is_grad_enabled()))
    )
    loss, _ = objective(student, mlm_batch())
    loss.backward()
    assert seen == [(False, False)]
    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is not None for p in student.parameters() if p.requires_grad)


def test_distillation_pulls_the_student_towards_the_teacher():
    teacher = tiny_teacher(seed=1)
    torch.manual_seed(2)
    student = init_student_from_teacher(tiny_teacher(seed=2)).eval()  # unrelated weights
    objective = DistillationObjective(teacher, alpha_mlm=0.0)
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-2)
    batch = mlm_batch()
    first = None
    for _ in range(20):
        loss, metrics = objective(student, batch)
        first = first or {k: v.item() for k, v in metrics.items()}
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    _, last = objective(student, batch)
    assert last["ce_loss"].item() < 0.3 * first["ce_loss"]
    assert last["cos_loss"].item() < 0.3 * first["cos_loss"]


def test_objective_errors_name_the_problem():
    teacher = tiny_teacher()
    with pytest.raises(ValueError, match="temperature=0"):
        DistillationObjective(teacher, temperature=0)
    with pytest.raises(ValueError, match="alpha_ce=-1"):
        DistillationObjective(teacher, alpha_ce=-1)
    with pytest.raises(ValueError, match="all loss weights are 0"):
        DistillationObjective(teacher, alpha_ce=0, alpha_mlm=0, alpha_cos=0)
    batch = mlm_batch()
    with pytest.raises(ValueError, match="same module"):
        DistillationObjective(teacher)(teacher, batch)
    batch.pop("labels")
    with pytest.raises(ValueError, match=r"needs batch\['labels'\]"):
        DistillationObjective(teacher)(init_student_from_teacher(teacher), batch)


# --- with the training engine ---------------------------------------------------------------------


def test_objective_plugs_into_the_trainer():
    teacher = tiny_teacher()
    teacher_state = copy.deepcopy(teacher.state_dict())
    student = init_student_from_teacher(teacher)
    student_before = copy.deepcopy(student.state_dict())
    trainer = Trainer(
        student,
        toy_examples(32),
        ToyCollator(),  # gives token_type_ids too: the student without segments must cope
        TrainingConfig(
            max_steps=3, batch_size=8, lr=3e-3, log_every=1, progress=False, precision="fp32"
        ),
        eval_dataset=toy_examples(16, seed=1),
        objective=DistillationObjective(teacher),
    )
    history = trainer.train()
    assert len(history) == 3
    for row in history:
        parts = 5 * row["train_ce_loss"] + 2 * row["train_mlm_loss"] + row["train_cos_loss"]
        assert row["train_loss"] == pytest.approx(parts, rel=1e-5)
    assert 0.0 < trainer.evaluate()["eval_mlm_loss"] < 10.0
    assert not teacher.training
    assert all(torch.equal(v, teacher.state_dict()[k]) for k, v in teacher_state.items())
    assert any(not torch.equal(v, student.state_dict()[k]) for k, v in student_before.items())
