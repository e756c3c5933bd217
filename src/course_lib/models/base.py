"""What every course_lib model shares: weight initialisation, the config, parameter counts."""

from __future__ import annotations

from torch import nn

from course_lib.config.bert import BertConfig, EncoderConfig


class PreTrainedEncoder(nn.Module):
    """Base class: stores the config and initialises weights as BERT does (N(0, 0.02), zero bias)."""

    config_class: type[EncoderConfig] = BertConfig

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise ValueError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got "
                f"{type(config).__name__}."
            )
        self.config = config

    def init_weights(self) -> None:
        """Initialise every submodule, then re-tie shared weights."""
        self.apply(self._init_module)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        """Distinct parameters (a tied tensor counted once, as `model.parameters()` does)."""
        return sum(p.numel() for p in self.parameters())
