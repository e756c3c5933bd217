"""Parity checks shared by the family tests: a random transformers model
whose biases and LayerNorms are perturbed, and the comparisons of outputs, state dicts and losses.

Imported by module name (`from parity import ...`): pytest puts tests/ on sys.path.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.labels import IGNORE_INDEX


def perturb_biases_and_norms(model: nn.Module) -> nn.Module:
    """transformers zero-inits biases and unit-inits LayerNorms: add noise to them, so that a
    swapped or dropped key cannot go unnoticed in a comparison."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def padded_batch(vocab: int, seq: int = 13) -> dict[str, Tensor]:
    """Odd length, three rows of different real lengths (13, 9, 4 tokens), two segments."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab, (3, seq), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[0, 6:] = 1
    types[1, 5:9] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def max_diff(a: Tensor, b: Tensor) -> float:
    return (a - b).abs().max().item()


def assert_outputs_equal(
    ours: nn.Module, hf: nn.Module, batch: dict, num_layers: int, tol: float
) -> None:
    """Every hidden state and attention map, and the task outputs, within `tol` of transformers'
    (hidden states compared at real tokens only: padded positions are not defined to match)."""
    with torch.no_grad():
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert len(mine.hidden_states) == len(theirs.hidden_states) == num_layers + 1
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a[real], b[real]) < tol
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape and max_diff(a, b) < tol
    name = type(hf).__name__
    if name.endswith("Model"):
        assert max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < tol
        if getattr(theirs, "pooler_output", None) is not None:
            assert max_diff(mine.pooler_output, theirs.pooler_output) < tol
    elif name.endswith("ForMaskedLM"):
        assert mine.mlm_logits.shape == theirs.logits.shape
        assert max_diff(mine.mlm_logits, theirs.logits) < tol
    elif name.endswith("ForQuestionAnswering"):
        assert max_diff(mine.start_logits, theirs.start_logits) < tol
        assert max_diff(mine.end_logits, theirs.end_logits) < tol
    else:
        assert mine.logits.shape == theirs.logits.shape
        assert max_diff(mine.logits, theirs.logits) < tol


def assert_state_dicts_equal(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    """Same keys, bitwise-equal tensors (a conversion round trip loses nothing)."""
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def mlm_labels(input_ids: Tensor) -> Tensor:
    """IGNORE_INDEX everywhere but four positions: three copies of the input, one other token."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, [1, 4, 7]] = input_ids[0, [1, 4, 7]]
    labels[2, 2] = 17
    return labels


def assert_losses_equal(
    ours: nn.Module, hf: nn.Module, batch: dict, kwargs: dict, tol: float
) -> None:
    """The task loss within `tol` of transformers'; kwargs {"labels": "mlm"} means mlm_labels."""
    if kwargs.get("labels") == "mlm":
        kwargs = {"labels": mlm_labels(batch["input_ids"])}
    with torch.no_grad():
        mine, theirs = ours(**batch, **kwargs).loss.item(), hf(**batch, **kwargs).loss.item()
    assert abs(mine - theirs) < tol
