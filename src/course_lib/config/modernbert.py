"""ModernBERT's config: its own dataclass, with the field names of `transformers.ModernBertConfig`.

It does not subclass BertConfig because half of BERT's fields would be wrong for it: no position
table (rotary positions), no segment types, no biases, separate dropouts per sublayer, and
transformers names the activation `hidden_activation` and the norm epsilon `norm_eps`. It keeps
BertConfig's contract (validate on creation, `from_preset`, `replace`, `to_dict`/`from_dict`,
`head_dim`, `model_type`), so checkpoints and `config_from_dict` treat it like every family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from course_lib.config.bert import ACTIVATIONS, BertConfig, is_number, require


@dataclass
class ModernBertConfig:
    """Sizes and switches of a ModernBERT encoder; defaults are ModernBERT-base as released.

    `global_attn_every_n_layers=3`: layers 0, 3, 6, ... attend globally with rotary base
    `global_rope_theta`; the others attend within a window of `local_attention` tokens (each
    token sees `local_attention // 2` on either side) with base `local_rope_theta`.
    `max_position_embeddings` is only a length limit: rotary positions have no table.
    `unpad` is course_lib's switch (no transformers field): pack the real tokens of a batch and
    attend per sequence, skipping every padding position; the outputs are the same.
    """

    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int = 50283
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    attention_bias: bool = False
    attention_dropout: float = 0.0
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    unpad: bool = False
    model_type: ClassVar[str] = "modernbert"
    # No segment embeddings: check_inputs accepts token_type_ids only when they are all 0.
    type_vocab_size: ClassVar[int] = 0
    presets: ClassVar[dict[str, dict[str, int]]] = {
        # answerdotai/ModernBERT-base and -large config.json (Warner et al. 2024, Table 8)
        "modernbert-base": dict(
            hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152
        ),
        "modernbert-large": dict(
            hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, intermediate_size=2624
        ),
    }

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "max_position_embeddings",
            "global_attn_every_n_layers",
        ):
            value = getattr(self, name)
            require(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                value,
                "expected a positive integer",
            )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}: each head gets hidden_size / num_attention_heads "
                f"features."
            )
        require(
            self.head_dim % 2 == 0,
            "num_attention_heads",
            self.num_attention_heads,
            f"the head size hidden_size / num_attention_heads = {self.head_dim} must be even: "
            f"rotary embeddings turn its features in pairs",
        )
        require(
            isinstance(self.local_attention, int)
            and not isinstance(self.local_attention, bool)
            and self.local_attention >= 2
            and self.local_attention % 2 == 0,
            "local_attention",
            self.local_attention,
            "expected an even window >= 2 (each token sees local_attention // 2 on either side)",
        )
        for name in ("hidden_activation", "classifier_activation"):
            value = getattr(self, name)
            require(value in ACTIVATIONS, name, value, f"expected one of {ACTIVATIONS}")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout"):
            value = getattr(self, name)
            require(
                is_number(value) and 0.0 <= value < 1.0,
                name,
                value,
                "expected a probability in [0, 1)",
            )
        for name in (
            "initializer_range",
            "initializer_cutoff_factor",
            "norm_eps",
            "global_rope_theta",
            "local_rope_theta",
        ):
            value = getattr(self, name)
            require(is_number(value) and value > 0, name, value, "expected a finite number > 0")
        for name in (
            "norm_bias",
            "attention_bias",
            "mlp_bias",
            "decoder_bias",
            "classifier_bias",
            "unpad",
        ):
            value = getattr(self, name)
            require(isinstance(value, bool), name, value, "expected True or False")
        require(
            isinstance(self.pad_token_id, int)
            and not isinstance(self.pad_token_id, bool)
            and 0 <= self.pad_token_id < self.vocab_size,
            "pad_token_id",
            self.pad_token_id,
            f"expected an id in [0, vocab_size={self.vocab_size})",
        )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def is_global(self, layer: int) -> bool:
        """Whether layer `layer` attends to the whole sequence (else: its local window)."""
        return layer % self.global_attn_every_n_layers == 0

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ModernBertConfig:
        """A published size by name ('modernbert-base' or 'modernbert-large')."""
        if name not in cls.presets:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(cls.presets)}.")
        return cls(**{**cls.presets[name], **overrides})

    # BERT's own methods, unchanged: `replace` (a validated copy) and the dictionary round trip.
    replace = BertConfig.replace
    to_dict = BertConfig.to_dict
    from_dict = classmethod(BertConfig.from_dict.__func__)
