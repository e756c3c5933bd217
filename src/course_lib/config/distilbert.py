"""DistilBERT's config: BERT's field names with DistilBERT's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from course_lib.config.bert import BertConfig, require, require_probabilities


@dataclass
class DistilBertConfig(BertConfig):
    """BertConfig with DistilBERT's defaults: 6 layers, no segment types, and its two head dropouts."""

    num_hidden_layers: int = 6
    type_vocab_size: int = 0
    qa_dropout: float = 0.1
    seq_classif_dropout: float = 0.2
    model_type: ClassVar[str] = "distilbert"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        "distilbert-base": dict(num_hidden_layers=6, hidden_size=768),
    }

    def validate(self) -> None:
        super().validate()
        require(
            self.type_vocab_size == 0,
            "type_vocab_size",
            self.type_vocab_size,
            "DistilBERT has no segment embeddings; expected 0",
        )
        require_probabilities(self, "qa_dropout", "seq_classif_dropout")
