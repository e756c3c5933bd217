"""build_optimizer: AdamW with the fused kernel where torch has one, same numbers as the loop."""

import pytest
import torch
from training_helpers import tiny_mlm

from course_lib.training.optim import build_optimizer

pytestmark = pytest.mark.usefixtures("one_thread")


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int = 5) -> None:
    torch.manual_seed(2)  # the same dropout masks in both runs
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 64, (4, 12), generator=g)
    labels = torch.where(torch.rand(4, 12, generator=g) < 0.3, ids, torch.full_like(ids, -100))
    for _ in range(steps):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_fused_adamw_on_cpu_matches_the_reference_loop():
    """The fused kernel (one pass over all tensors) is used on CPU and follows the same
    trajectory as torch's for-loop AdamW, with the same groups, to float32 rounding."""
    fused_model, loop_model = tiny_mlm(), tiny_mlm()
    fused = build_optimizer(fused_model, lr=1e-2, weight_decay=0.01)
    assert fused.defaults["fused"] is True
    groups = build_optimizer(loop_model, lr=1e-2, weight_decay=0.01).param_groups
    loop = torch.optim.AdamW(
        [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups],
        lr=1e-2,
        betas=fused.defaults["betas"],
        eps=fused.defaults["eps"],
        foreach=False,
    )
    _train(fused_model, fused)
    _train(loop_model, loop)
    start = tiny_mlm().state_dict()
    for (name, a), b in zip(fused_model.named_parameters(), loop_model.parameters()):
        assert not torch.equal(a, start[name]), f"{name} was not trained"
        assert torch.allclose(a, b, rtol=0, atol=1e-6), name


def test_bad_learning_rate_is_named():
    with pytest.raises(ValueError, match="lr=0 is invalid"):
        build_optimizer(tiny_mlm(), lr=0)
