"""ModernBERT's config: its own dataclass, with the field names of `transformers.ModernBertConfig`.

It does not subclass BertConfig because half of BERT's fields would be wrong for it: no position
table (rotary positions), no segment types, no biases, separate dropouts per sublayer, and
transformers names the activation `hidden_activation` and the norm epsilon `norm_eps`. It shares
BertConfig's base, EncoderConfig (the size fields, validate on creation, the size checks,
`from_preset`, `replace`, `to_dict`/`from_dict`, `head_dim`), so checkpoints and
`config_from_dict` treat it like every family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from course_lib.config.bert import (
    EncoderConfig,
    is_int,
    require,
    require_activations,
    require_bools,
    require_positive_ints,
    require_positive_numbers,
    require_probabilities,
)


@dataclass
class ModernBertConfig(EncoderConfig):
    """Sizes and switches of a ModernBERT encoder; defaults are ModernBERT-base as released.

    `global_attn_every_n_layers=3`: layers 0, 3, 6, ... attend globally with rotary base
    `global_rope_theta`; the others attend within a window of `local_attention` tokens (each
    token sees `local_attention // 2` on either side) with base `local_rope_theta`.
    `max_position_embeddings` is only a length limit: rotary positions have no table.
    `unpad` is course_lib's switch (no transformers field): pack the real tokens of a batch and
    attend per sequence, skipping every padding position; the outputs are the same.
    The sizes are EncoderConfig's; ModernBERT-base keeps BERT-base's hidden size (768) and heads
    (12) and changes the other four.
    """

    vocab_size: int = 50368
    num_hidden_layers: int = 22
    intermediate_size: int = 1152
    max_position_embeddings: int = 8192
    hidden_activation: str = "gelu"
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

    def validate(self) -> None:
        """The sizes every encoder has, then ModernBERT's own fields."""
        super().validate()
        require_positive_ints(self, "global_attn_every_n_layers")
        require(
            self.head_dim % 2 == 0,
            "num_attention_heads",
            self.num_attention_heads,
            f"the head size hidden_size / num_attention_heads = {self.head_dim} must be even: "
            f"rotary embeddings turn its features in pairs",
        )
        require(
            is_int(self.local_attention)
            and self.local_attention >= 2
            and self.local_attention % 2 == 0,
            "local_attention",
            self.local_attention,
            "expected an even window >= 2 (each token sees local_attention // 2 on either side)",
        )
        require_activations(self, "hidden_activation", "classifier_activation")
        require_probabilities(self, "attention_dropout", "embedding_dropout", "mlp_dropout")
        require_positive_numbers(self, "initializer_cutoff_factor", "norm_eps")
        require_positive_numbers(self, "global_rope_theta", "local_rope_theta")
        require_bools(self, "norm_bias", "attention_bias", "mlp_bias", "unpad")
        require_bools(self, "decoder_bias", "classifier_bias")

    def is_global(self, layer: int) -> bool:
        """Whether layer `layer` attends to the whole sequence (else: its local window)."""
        return layer % self.global_attn_every_n_layers == 0
