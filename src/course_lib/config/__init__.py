"""Model configuration: one validated dataclass per family, with the published presets.

Every family's config is BERT's plus what that family changes, so they live together here and
any module can import them without importing a model. Every field is checked when the config is
created, so a typo fails on the line that made it, naming the field, the value and what is valid.
"""

from __future__ import annotations

from typing import Any

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


def config_from_dict(data: dict[str, Any]) -> BertConfig:
    """Rebuild any family's config from `config.to_dict()` (its `model_type` says which)."""
    model_type = data.get("model_type", "bert")
    if model_type not in CONFIG_CLASSES:
        raise ValueError(f"unknown model_type {model_type!r}; known: {sorted(CONFIG_CLASSES)}.")
    return CONFIG_CLASSES[model_type].from_dict(data)


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
]
