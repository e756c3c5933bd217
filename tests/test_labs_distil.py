"""Chapter 04 distillation labs: the HMM language, its exact posterior, the ideal BERT teacher,
and every lab's fast preset."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.labs import describe, distil, get_lab, labs_of, run_lab
from course_lib.objectives.distillation import kl_distillation_loss

LABS = ("soft_vs_hard_targets", "distil_temperature", "distil_all_tokens")


def tiny_hmm(seed: int = 0) -> distil.HMM:
    return distil.make_hmm(torch.Generator().manual_seed(seed), states=3, vocab=3, home_tokens=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_backward_equals_enumeration(seed: int) -> None:
    hmm = tiny_hmm(seed)
    g = torch.Generator().manual_seed(100 + seed)
    tokens = distil.sample_hmm(hmm, 6, 4, g)
    visible = torch.rand(6, 4, generator=g) < 0.6
    visible[0] = True  # every token visible: leave-one-out posteriors
    visible[1] = torch.tensor([True, False, False, True])  # two masked neighbours
    visible[2] = False  # nothing visible: the prior marginal of each position
    exact = distil.exact_posterior(hmm, tokens, visible)
    brute = distil.brute_force_posterior(hmm, tokens, visible)
    assert exact.shape == (6, 4, 3)
    assert torch.allclose(exact, brute, atol=1e-12, rtol=0)


def test_posterior_ignores_the_token_at_its_own_position() -> None:
    hmm = tiny_hmm()
    tokens = distil.sample_hmm(hmm, 1, 5, torch.Generator().manual_seed(3))
    visible = torch.ones(1, 5, dtype=torch.bool)
    other = tokens.clone()
    other[0, 2] = (other[0, 2] + 1) % hmm.vocab
    a = distil.exact_posterior(hmm, tokens, visible)[0, 2]
    b = distil.exact_posterior(hmm, other, visible)[0, 2]
    assert torch.equal(a, b)


def test_generator_is_a_valid_structured_hmm() -> None:
    hmm = distil.make_hmm(torch.Generator().manual_seed(0))
    for matrix in (hmm.transition, hmm.emission):
        assert torch.allclose(matrix.sum(-1), torch.ones(len(matrix), dtype=torch.float64))
        assert (matrix > 0).all()
    # each state follows one successor with probability >= stay (the cycle)
    assert (hmm.transition.max(-1).values >= 0.7).all()
    g = torch.Generator().manual_seed(1)
    tokens = distil.sample_hmm(hmm, 3000, distil.LENGTH, g)
    assert tokens.shape == (3000, distil.LENGTH)
    assert tokens.min() >= 0 and tokens.max() < distil.N_TOKENS
    masked = distil.choose_masked(3000, distil.LENGTH, g)
    assert masked.any(-1).all()
    assert 0.12 < masked.float().mean() < 0.30  # 15% plus the one forced per row
    post = distil.exact_posterior(hmm, tokens, ~masked)[masked]  # (n, V)
    truth = tokens[masked]
    # calibrated: the mean surprisal of the sampled token equals the mean entropy (statistically)
    surprisal = -post.gather(-1, truth[:, None]).log().mean()
    entropy = -(post * post.log()).sum(-1).mean()
    assert abs(float(surprisal - entropy)) < 0.08
    # informative but not deterministic: context is worth a lot, yet the answer stays uncertain
    unigram = torch.bincount(tokens.flatten(), minlength=distil.N_TOKENS).double() / tokens.numel()
    kl_to_unigram = (post * (post.log() - unigram.log())).sum(-1).mean()
    assert kl_to_unigram > 0.4
    assert entropy > 1.0


def test_ideal_bert_teacher_is_the_bayes_posterior_of_80_10_10() -> None:
    hmm = tiny_hmm()
    tokens = distil.sample_hmm(hmm, 4, 4, torch.Generator().manual_seed(5))
    visible = torch.tensor([[True, False, True, True]] * 4)
    posterior = distil.brute_force_posterior(hmm, tokens, visible)
    targets = distil.ideal_bert_targets(posterior, tokens, visible)
    assert torch.equal(targets[~visible], posterior[~visible])
    # p(x = v | shown w) ∝ p(v | ctx) * p(shown w | x = v, position chosen and not masked)
    v = hmm.vocab
    channel = distil.KEEP * torch.eye(v, dtype=torch.float64) + distil.RANDOM / v  # (x, shown)
    for row, i in zip(*torch.nonzero(visible, as_tuple=True), strict=True):
        joint = posterior[row, i] * channel[:, tokens[row, i]]
        assert torch.allclose(targets[row, i], joint / joint.sum(), atol=1e-12)
        assert targets[row, i].argmax() == tokens[row, i] or targets[row, i].max() < 0.9


def test_visible_targets_carry_the_context_at_distilberts_temperature() -> None:
    """distil_all_tokens' premise: at a visible position the ideal teacher is mostly the shown
    token at T = 1, while at DistilBERT's T = 2 most of its mass is the context's distribution."""
    hmm = distil.make_hmm(torch.Generator().manual_seed(10_000))
    g = torch.Generator().manual_seed(3)
    tokens = distil.sample_hmm(hmm, 2000, distil.LENGTH, g)
    masked = distil.choose_masked(2000, distil.LENGTH, g)
    posterior = distil.exact_posterior(hmm, tokens, ~masked)
    targets = distil.ideal_bert_targets(posterior, tokens, ~masked)[~masked]  # (n, V) visible
    off = {}
    for t in (1.0, distil.DISTILBERT_T):
        tempered = torch.softmax(targets.log() / t, dim=-1)  # what the loss at T matches
        off[t] = float(1 - tempered.gather(-1, tokens[~masked][:, None]).mean())
    assert off[1.0] < 0.35 < 0.55 < off[distil.DISTILBERT_T]
    # ... and that spread is the posterior's shape: the ranking of the other tokens is the same
    spread = targets.clone().scatter_(-1, tokens[~masked][:, None], 0.0)
    context = posterior[~masked].clone().scatter_(-1, tokens[~masked][:, None], 0.0)
    assert torch.allclose(
        spread / spread.sum(-1, keepdim=True), context / context.sum(-1, keepdim=True)
    )


@pytest.mark.parametrize("temperature", [1.0, 4.0])
def test_temperature_leaves_the_minimum_where_it_was(temperature: float) -> None:
    """The lab's premise: student logits = teacher logits + c is the minimum at every T."""
    teacher = torch.randn(5, 7)
    student = (teacher + 3.0).requires_grad_()
    loss = kl_distillation_loss(student, teacher, temperature)
    loss.backward()
    assert loss.item() < 1e-5
    assert student.grad.abs().max() < 1e-5


def test_labs_are_registered_in_the_chapter() -> None:
    names = [lab.name for lab in labs_of("04_deberta_distil")]
    for name in LABS:
        assert name in names
        lab = get_lab(name)
        assert lab.why and lab.paper and "KL" in lab.metric


@pytest.mark.parametrize("name", LABS)
def test_fast_preset_runs_every_arm(name: str) -> None:
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    lab = get_lab(name)
    assert result["lab"] == name and result["chapter"] == "04_deberta_distil"
    assert list(result["arms"]) == list(lab.arms)
    for arm, values in result["arms"].items():
        assert len(values) == 1 and math.isfinite(values[0]) and values[0] >= 0, arm
    assert result["compare"] == list(lab.compare) and result["seeds"] == 1
    assert "not judged: 1 seed, the rule needs 3" in describe(result)
