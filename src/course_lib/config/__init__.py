"""Model configuration: one validated dataclass per family, with the published presets.

Every family's config is BERT's plus what that family changes, so they live together here and
any module can import them without importing a model. Every field is checked when the config is
created, so a typo fails on the line that made it, naming the field, the value and what is valid.
"""

from __future__ import annotations

from typing import Any, TypeVar

from course_lib.config.albert import SHARING, AlbertConfig
from course_lib.config.bert import ACTIVATIONS, BertConfig, is_number, require
from course_lib.config.deberta import POSITION_TERMS, DebertaConfig
from course_lib.config.distilbert import DistilBertConfig
from course_lib.config.electra import ElectraConfig
from course_lib.config.modernbert import ModernBertConfig
from course_lib.config.roberta import RobertaConfig

CONFIG_CLASSES: dict[str, type[BertConfig]] = {
    cls.model_type: cls
    for cls in (
        BertConfig,
        RobertaConfig,
        AlbertConfig,
        DebertaConfig,
        DistilBertConfig,
        ElectraConfig,
        ModernBertConfig,
    )
}

C = TypeVar("C")


def config_from_dict(data: dict[str, Any]) -> BertConfig:
    """Rebuild any family's config from `config.to_dict()` (its `model_type` says which)."""
    model_type = data.get("model_type", "bert")
    if model_type not in CONFIG_CLASSES:
        raise ValueError(f"unknown model_type {model_type!r}; known: {sorted(CONFIG_CLASSES)}.")
    return CONFIG_CLASSES[model_type].from_dict(data)


def tiny_config(
    config_class: type[C],
    vocab_size: int,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 128,
    **overrides: Any,
) -> C:
    """A lab- or exercise-sized config of any family, with no dropout (so runs with one seed
    differ only by data and init): `tiny_config(AlbertConfig, 512, embedding_size=16)`."""
    sizes: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden_size,
        "max_position_embeddings": max_positions,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    sizes.update(overrides)
    return config_class(**sizes)


__all__ = [
    "ACTIVATIONS",
    "CONFIG_CLASSES",
    "POSITION_TERMS",
    "SHARING",
    "AlbertConfig",
    "BertConfig",
    "DebertaConfig",
    "DistilBertConfig",
    "ElectraConfig",
    "ModernBertConfig",
    "RobertaConfig",
    "config_from_dict",
    "is_number",
    "require",
    "tiny_config",
]
