"""The activation functions by the names configs use (transformers' names).

One table: configs validate `hidden_act` against its keys and the modules call its values, so a
new activation is added in one place. Only torch here, so `course_lib.config` can import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def gelu_tanh(x: Tensor) -> Tensor:
    """GPT-2's tanh approximation of GELU (transformers calls it 'gelu_new')."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


ACTIVATION_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    # exact erf form, as transformers' "gelu"; the original TF BERT code used the tanh
    # approximation ("gelu_new" here); they differ by at most ~5e-4
    "gelu": F.gelu,
    "gelu_new": gelu_tanh,
    "relu": F.relu,
    "silu": F.silu,
    "tanh": torch.tanh,
}


def get_activation(name: str) -> Callable[[Tensor], Tensor]:
    """The activation function registered under `name`; ValueError naming the choices otherwise."""
    try:
        return ACTIVATION_FUNCTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; choose one of {sorted(ACTIVATION_FUNCTIONS)}"
        ) from None


__all__ = ["ACTIVATION_FUNCTIONS", "gelu_tanh", "get_activation"]
