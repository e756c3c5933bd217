"""Exact big batches: 4 micro-batches of 8 (one process, or 2 processes x 2) give the same loss,
gradients and weights after the step as one batch of 32, for MLM+NSP, MLM+SOP and distillation.

The micro-batches hold different numbers of masked tokens (and of real tokens, for DistilBERT's
cosine term), so averaging their mean losses is *not* the big batch: the Trainer weights each one
by its share of the step's targets. The collator below masks every example by its own id, so the
big batch and its micro-batches see exactly the same masks; it pads to a fixed width, so the
only difference left is the order of floating-point sums.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from training_helpers import FIRST_WORD, MASK, PAD, VOCAB, tiny_config, toy_examples

from course_lib.models import BertForMaskedLM, BertForPreTraining
from course_lib.models.albert import AlbertConfig, AlbertForPreTraining
from course_lib.objectives.distillation import DistillationObjective, init_student_from_teacher
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.engine import ModelLoss, count_targets

pytestmark = pytest.mark.usefixtures("one_thread")

WIDTH = 24  # toy sequences have at most 22 tokens
CASES = ("bert-mlm+nsp", "albert-mlm+sop", "distilbert-triple")


class ExampleMaskCollator:
    """Masks ~20% of each example's words (at least one) from a generator seeded by its id, so
    the masks do not depend on how examples are grouped into batches; pads to WIDTH."""

    def __init__(self, sentence_key: str | None = None):
        self.sentence_key = sentence_key

    def __call__(self, examples: list[dict], generator: torch.Generator | None = None) -> dict:
        ids = torch.full((len(examples), WIDTH), PAD, dtype=torch.long)
        labels = torch.full_like(ids, -100)
        for row, example in enumerate(examples):
            tokens = torch.tensor(example["input_ids"])
            ids[row, : len(tokens)] = tokens
            own = torch.Generator().manual_seed(1000 + example["id"])
            chosen = (torch.rand(len(tokens), generator=own) < 0.2) & (tokens >= FIRST_WORD)
            chosen[1] = True
            labels[row, : len(tokens)] = torch.where(chosen, tokens, -100)
        batch = {
            "input_ids": ids.masked_fill(labels != -100, MASK),
            "attention_mask": (ids != PAD).long(),
            "token_type_ids": torch.zeros_like(ids),
            "labels": labels,
        }
        if self.sentence_key:
            batch[self.sentence_key] = torch.tensor([e["sentence_order_label"] for e in examples])
        return batch


def _examples() -> list[dict]:
    return [{**e, "id": i} for i, e in enumerate(toy_examples(64, sentence_labels=True))]


def _setup(case: str):
    """(model, collator, objective, objective name) with dropout off, the same init every call."""
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    if case == "bert-mlm+nsp":
        model = BertForPreTraining(tiny_config(**no_dropout))
        return model, ExampleMaskCollator("next_sentence_label"), ModelLoss(), "mlm+nsp"
    if case == "albert-mlm+sop":
        sizes = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64)
        config = AlbertConfig(
            vocab_size=VOCAB,
            embedding_size=16,
            num_hidden_layers=2,
            max_position_embeddings=32,
            classifier_dropout_prob=0.0,  # the SOP head's own dropout
            **sizes,
            **no_dropout,
        )
        model = AlbertForPreTraining(config)
        return model, ExampleMaskCollator("sentence_order_label"), ModelLoss(), "mlm+sop"
    teacher = BertForMaskedLM(tiny_config(**no_dropout))
    with torch.no_grad():  # a confident teacher, so that the KL term is not negligible
        teacher.mlm_head.decoder.bias.normal_(0.0, 2.0)
    torch.manual_seed(1)  # a student that disagrees with the teacher: every term matters
    student = init_student_from_teacher(BertForMaskedLM(tiny_config(**no_dropout)))
    return student, ExampleMaskCollator(), DistillationObjective(teacher), "mlm"


def _one_step(case: str, accumulation: int, objective=None) -> dict[str, torch.Tensor]:
    """Loss, gradients (before the optimizer step) and weights after one step of batch 32."""
    model, collator, default_objective, name = _setup(case)
    config = TrainingConfig(
        objective=name,
        max_steps=1,
        batch_size=32 // accumulation // _world_size(),
        gradient_accumulation_steps=accumulation,
        lr=1e-3,
        schedule="constant",
        warmup=0.0,
        max_grad_norm=None,
        log_every=1,
        progress=False,
        precision="fp32",
        device="cpu",
    )
    trainer = Trainer(
        model, _examples(), collator, config, objective=objective or default_objective
    )
    grads: dict[str, torch.Tensor] = {}

    def keep_gradients(optimizer, args, kwargs):
        for key, param in trainer.model.named_parameters():
            if param.grad is not None:
                grads[f"grad.{key}"] = param.grad.detach().clone()

    trainer.optimizer.register_step_pre_hook(keep_gradients)
    history = trainer.train()
    record = history[0]
    weights = {
        f"weight.{k}": v.detach().clone()
        for k, v in trainer.model.named_parameters()  # tied weights once
    }
    metrics = {
        k: torch.tensor(v, dtype=torch.float64)
        for k, v in record.items()
        if k == "train_loss" or (k.startswith("train_") and k.endswith("_loss"))
    }
    return {**grads, **weights, **metrics}


def _world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def _relative(a: dict, b: dict, prefix: str) -> float:
    keys = sorted(k for k in b if k == prefix or (prefix.endswith(".") and k.startswith(prefix)))
    assert keys and all(k in a for k in keys)
    diff = torch.cat([(a[k].double() - b[k].double()).flatten() for k in keys]).norm()
    return float(diff / torch.cat([b[k].double().flatten() for k in keys]).norm())


def _assert_same_step(got: dict, big: dict) -> None:
    losses = [k for k in big if k.startswith("train_")]
    assert "train_loss" in losses and len(losses) >= 2  # the total and its parts
    for key in losses:
        assert float(got[key]) == pytest.approx(float(big[key]), rel=1e-6), key
    assert _relative(got, big, "grad.") <= 1e-6
    total = torch.cat([v.flatten() for k, v in big.items() if k.startswith("grad.")]).norm()
    for key in big:  # and no tensor with a real gradient is off (e.g. only the sentence head);
        # some are zero but for rounding noise (key biases: softmax ignores a constant shift)
        if key.startswith("grad.") and big[key].norm() >= 1e-3 * total:
            assert _relative(got, big, key) <= 1e-5, key
    assert _relative(got, big, "weight.") <= 1e-6
    for key in big:  # an Adam step moves a weight by about lr = 1e-3; 1e-6 is 0.1% of that
        if key.startswith("weight."):
            torch.testing.assert_close(got[key], big[key], rtol=1e-6, atol=1e-6, msg=key)


def test_micro_batches_hold_different_numbers_of_targets():
    """The premise: otherwise averaging means would be exact and the tests below prove nothing."""
    collator = ExampleMaskCollator()
    counts = [count_targets(collator(_examples()[i : i + 8])) for i in range(0, 32, 8)]
    assert len({c["mlm"] for c in counts}) > 1 and len({c["tokens"] for c in counts}) > 1


def test_a_micro_batch_without_masked_tokens_adds_a_differentiable_zero():
    model, collator, objective, _ = _setup("bert-mlm+nsp")
    batch = collator(_examples()[:8])
    batch["labels"][:] = -100
    counts = objective.target_counts(batch)
    assert counts["mlm"] == 0 and counts["sentence"] == 8
    loss, metrics = objective(model, batch, shares={"mlm": 0.0, "sentence": 0.25, "tokens": 0.1})
    assert metrics["mlm_loss"].item() == 0.0
    assert loss.item() == pytest.approx(0.25 * model(**batch).nsp_loss.item(), rel=1e-6)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("case", CASES)
def test_accumulation_4x8_equals_one_batch_of_32(case):
    big = _one_step(case, accumulation=1)
    _assert_same_step(_one_step(case, accumulation=4), big)


class PlainObjective:
    """The same loss without `target_counts`: the Trainer falls back to averaging the means."""

    def __init__(self, objective):
        self.objective = objective

    def __call__(self, model, batch):
        return self.objective(model, batch)


@pytest.mark.parametrize("case", CASES)
def test_averaging_micro_batch_means_is_measurably_not_the_big_batch(case):
    _, _, objective, _ = _setup(case)
    big = _one_step(case, accumulation=1, objective=PlainObjective(objective))
    naive = _one_step(case, accumulation=4, objective=PlainObjective(copy.copy(objective)))
    assert _relative(naive, big, "grad.") > 1e-3  # a thousand times the tolerance above


def _worker(rank: int, world_size: int, tmp: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=world_size
    )
    try:
        for case in CASES:
            result = _one_step(case, accumulation=2)
            save_file({k: v.contiguous() for k, v in result.items()}, f"{tmp}/{case}-{rank}.st")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_x_accumulation_2x8_equal_one_batch_of_32(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path)), nprocs=2, join=True)
    for case in CASES:
        rank0, rank1 = (load_file(str(tmp_path / f"{case}-{r}.st")) for r in (0, 1))
        for key, value in rank0.items():
            assert torch.equal(value, rank1[key]), f"{case}: ranks disagree on {key}"
        _assert_same_step(rank0, _one_step(case, accumulation=1))
