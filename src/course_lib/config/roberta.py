"""RoBERTa's config: BERT's fields with fairseq's defaults (positions after the pad index)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from course_lib.config.bert import BertConfig, require


@dataclass
class RobertaConfig(BertConfig):
    """BertConfig with RoBERTa's defaults; field names match `transformers.RobertaConfig`."""

    vocab_size: int = 50265
    max_position_embeddings: int = 514  # 512 tokens + the offset of pad_token_id + 1
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    classifier_dropout: float | None = None  # None: use hidden_dropout_prob (as transformers)
    model_type: ClassVar[str] = "roberta"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        "roberta-base": dict(num_hidden_layers=12, hidden_size=768),
        "roberta-large": dict(num_hidden_layers=24, hidden_size=1024),
    }

    def validate(self) -> None:
        super().validate()
        require(
            self.max_position_embeddings > self.pad_token_id + 1,
            "max_position_embeddings",
            self.max_position_embeddings,
            f"positions start at pad_token_id + 1 = {self.pad_token_id + 1}, so it must be larger",
        )
        require(
            self.classifier_dropout is None or 0.0 <= self.classifier_dropout < 1.0,
            "classifier_dropout",
            self.classifier_dropout,
            "expected None (use hidden_dropout_prob) or a probability in [0, 1)",
        )

    @property
    def classifier_dropout_prob(self) -> float:
        return (
            self.hidden_dropout_prob if self.classifier_dropout is None else self.classifier_dropout
        )
