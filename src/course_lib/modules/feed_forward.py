"""The position-wise feed-forward network: expand to the intermediate size, activate, project back."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import BertConfig


def gelu_tanh(x: Tensor) -> Tensor:
    """GPT-2's tanh approximation of GELU (transformers calls it 'gelu_new')."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


_ACTIVATIONS = {
    # exact erf form, as transformers' "gelu"; the original TF BERT code used the tanh
    # approximation ("gelu_new" here); they differ by at most ~5e-4
    "gelu": F.gelu,
    "gelu_new": gelu_tanh,
    "relu": F.relu,
    "silu": F.silu,
    "tanh": torch.tanh,
}


def get_activation(name: str):
    """The activation function registered under `name` (see config.ACTIVATIONS)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}"
        ) from None


class FeedForward(nn.Module):
    """hidden -> intermediate (4x wider) -> activation -> hidden, the same for every position."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = get_activation(config.hidden_act)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.act(self.up(x)))
