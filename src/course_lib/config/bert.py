"""BERT's config (the base of every family's) and the validation helpers all configs share.

Every field is checked when the config is created, so a typo fails on the line that made it,
with a message that names the field, the value and what would be valid.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from course_lib.activations import ACTIVATION_FUNCTIONS

ACTIVATIONS = tuple(ACTIVATION_FUNCTIONS)  # the names a config accepts for hidden_act
# The sizes every family's config has: EncoderConfig declares them (BERT-base's defaults) and
# checks them as positive integers.
ENCODER_SIZES = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
)


def require(ok: bool, name: str, value: Any, valid: str) -> None:
    if not ok:
        raise ValueError(f"{name}={value!r} is invalid: {valid}.")


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool or a string such as "0.02"."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_int(value: Any) -> bool:
    """An int that is not a bool (True is an int to Python, never a size to a config)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_each(
    config: Any, names: tuple[str, ...], ok: Callable[[Any], bool], valid: str
) -> None:
    """`require` with one rule for several fields of `config`."""
    for name in names:
        value = getattr(config, name)
        require(ok(value), name, value, valid)


def require_positive_ints(config: Any, *names: str) -> None:
    require_each(config, names, lambda v: is_int(v) and v > 0, "expected a positive integer")


def require_probabilities(config: Any, *names: str) -> None:
    """Dropout rates: a probability in [0, 1)."""
    valid = "expected a probability in [0, 1)"
    require_each(config, names, lambda v: is_number(v) and 0.0 <= v < 1.0, valid)


def require_positive_numbers(config: Any, *names: str) -> None:
    valid = "expected a finite number > 0"
    require_each(config, names, lambda v: is_number(v) and v > 0, valid)


def require_bools(config: Any, *names: str) -> None:
    require_each(config, names, lambda v: isinstance(v, bool), "expected True or False")


def require_activations(config: Any, *names: str) -> None:
    valid = f"expected one of {ACTIVATIONS}"
    require_each(config, names, lambda v: isinstance(v, str) and v in ACTIVATIONS, valid)


@dataclass
class EncoderConfig:
    """The contract every family's config keeps: validated when created, published sizes by
    preset name, a validated `replace`, and the `to_dict`/`from_dict` round trip.

    The sizes every encoder has (ENCODER_SIZES) are declared here once, with BERT-base's
    defaults, so they are every config's first fields; a family redeclares only those whose
    default differs (a redeclared field keeps its place). The other fields are the subclasses':
    every family also has pad_token_id and initializer_range, checked here; its `validate` calls
    this one and adds its own checks.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    model_type: ClassVar[str]
    presets: ClassVar[dict[str, dict[str, int]]] = {}

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        require_positive_ints(self, *ENCODER_SIZES)
        if self.hidden_size % self.num_attention_heads:
            divisors = [
                h for h in range(1, min(self.hidden_size, 64) + 1) if self.hidden_size % h == 0
            ]
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}: each head gets "
                f"hidden_size / num_attention_heads features; valid head counts for this "
                f"hidden size include {divisors}."
            )
        require(
            is_int(self.pad_token_id) and 0 <= self.pad_token_id < self.vocab_size,
            "pad_token_id",
            self.pad_token_id,
            f"expected an id in [0, vocab_size={self.vocab_size})",
        )
        require_positive_numbers(self, "initializer_range")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> Self:
        """A published size by name (e.g. 'bert-base'); where the preset does not say, heads =
        hidden / 64 and FFN = 4 x hidden."""
        if name not in cls.presets:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(cls.presets)}.")
        sizes: dict[str, Any] = dict(cls.presets[name])
        hidden = sizes["hidden_size"]
        sizes.setdefault("num_attention_heads", max(1, hidden // 64))
        sizes.setdefault("intermediate_size", 4 * hidden)
        sizes.update(overrides)
        return cls(**sizes)

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": self.model_type, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = dict(data)
        found = data.pop("model_type", cls.model_type)
        if found != cls.model_type:
            raise ValueError(
                f"this config is for model_type={found!r}, not {cls.model_type!r}; "
                f"load it with the {found} config class."
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown config fields {unknown}; valid fields are {sorted(names)}.")
        return cls(**data)


@dataclass
class BertConfig(EncoderConfig):
    """Sizes and switches of a BERT encoder; field names match `transformers.BertConfig`.

    The sizes (vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
    intermediate_size, max_position_embeddings) come first, from EncoderConfig, whose defaults
    are BERT-base's.
    """

    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    num_labels: int = 2
    # Not in the original BERT: pre-LN (LayerNorm before each sublayer) trains more stably
    # with short schedules and high learning rates, which the CPU recipe uses (see Cramming).
    pre_layer_norm: bool = False
    model_type: ClassVar[str] = "bert"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        # The 24 compact BERTs (Turc et al. 2019) and the two originals: layers / hidden.
        "bert-tiny": dict(num_hidden_layers=2, hidden_size=128),
        "bert-mini": dict(num_hidden_layers=4, hidden_size=256),
        "bert-small": dict(num_hidden_layers=4, hidden_size=512),
        "bert-medium": dict(num_hidden_layers=8, hidden_size=512),
        "bert-base": dict(num_hidden_layers=12, hidden_size=768),
        "bert-large": dict(num_hidden_layers=24, hidden_size=1024),
    }

    def validate(self) -> None:
        """The sizes every encoder has, then BERT's own fields."""
        super().validate()
        require_positive_ints(self, "num_labels")
        require(
            is_int(self.type_vocab_size) and self.type_vocab_size >= 0,
            "type_vocab_size",
            self.type_vocab_size,
            "expected an integer >= 0 (0 means no segment embeddings)",
        )
        require_activations(self, "hidden_act")
        require_probabilities(self, "hidden_dropout_prob", "attention_probs_dropout_prob")
        require_positive_numbers(self, "layer_norm_eps")
        require_bools(self, "pre_layer_norm")
