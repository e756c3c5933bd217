"""The position-wise feed-forward network: expand to the intermediate size, activate, project back."""

from __future__ import annotations

from torch import Tensor, nn

from course_lib.activations import ACTIVATION_FUNCTIONS
from course_lib.config import BertConfig


def get_activation(name: str):
    """The activation function registered under `name` (course_lib.activations)."""
    try:
        return ACTIVATION_FUNCTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; choose one of {sorted(ACTIVATION_FUNCTIONS)}"
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
