"""ALBERT's config: BERT's fields plus the embedding size E and the sharing plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from course_lib.config.bert import (
    BertConfig,
    require,
    require_positive_ints,
    require_probabilities,
)

# The four strategies the ALBERT paper compares (Table 4): what is shared across layers.
SHARING = ("all", "attention", "ffn", "none")


@dataclass
class AlbertConfig(BertConfig):
    """BERT's fields plus embedding size E, sharing strategy and layer groups.

    Defaults are ALBERT-base as released (v2): vocabulary 30000, `gelu_new`, no dropout inside
    the encoder (the paper found removing it helps, section 4.9), all-shared, one group.
    `embedding_projection=None` projects E -> H only when E != H, as the original code does;
    transformers always keeps the projection, so `from_transformers` sets it to True.
    """

    vocab_size: int = 30000
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    embedding_size: int = 128
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    sharing: str = "all"
    embedding_projection: bool | None = None
    classifier_dropout_prob: float = 0.1
    model_type: ClassVar[str] = "albert"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        # Table 1 of the paper; heads follow the released configs (xlarge 16, xxlarge 64).
        "albert-base": dict(num_hidden_layers=12, hidden_size=768),
        "albert-large": dict(num_hidden_layers=24, hidden_size=1024),
        "albert-xlarge": dict(num_hidden_layers=24, hidden_size=2048, num_attention_heads=16),
        "albert-xxlarge": dict(num_hidden_layers=12, hidden_size=4096, num_attention_heads=64),
    }

    def validate(self) -> None:
        """BERT's checks, then ALBERT's fields and how they combine."""
        super().validate()
        require_positive_ints(self, "embedding_size", "num_hidden_groups", "inner_group_num")
        require(self.sharing in SHARING, "sharing", self.sharing, f"expected one of {SHARING}")
        if self.num_hidden_layers % self.num_hidden_groups:
            valid = [
                g for g in range(1, self.num_hidden_layers + 1) if self.num_hidden_layers % g == 0
            ]
            raise ValueError(
                f"num_hidden_layers={self.num_hidden_layers} is not divisible by "
                f"num_hidden_groups={self.num_hidden_groups}: each group shares its weights over "
                f"num_hidden_layers / num_hidden_groups consecutive layers; valid group counts "
                f"for {self.num_hidden_layers} layers are {valid}."
            )
        if self.sharing == "none" and (self.num_hidden_groups, self.inner_group_num) != (1, 1):
            raise ValueError(
                f"sharing='none' gives every layer its own weights, so num_hidden_groups="
                f"{self.num_hidden_groups} and inner_group_num={self.inner_group_num} would have "
                f"no effect; leave both at 1 and set the depth with num_hidden_layers."
            )
        require(
            self.embedding_projection in (None, True, False),
            "embedding_projection",
            self.embedding_projection,
            "expected True, False or None (None: project only when embedding_size != hidden_size)",
        )
        if self.embedding_projection is False and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"embedding_projection=False needs embedding_size == hidden_size, got "
                f"{self.embedding_size} != {self.hidden_size}: the E -> H projection is what "
                f"lets the embeddings be smaller than the hidden states."
            )
        require_probabilities(self, "classifier_dropout_prob")

    @property
    def has_embedding_projection(self) -> bool:
        """Whether the embeddings are projected E -> H (always when E != H)."""
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def depth(self) -> int:
        """Layers applied in one forward pass: each of the num_hidden_layers runs its group's
        inner_group_num distinct layers in turn."""
        return self.num_hidden_layers * self.inner_group_num
