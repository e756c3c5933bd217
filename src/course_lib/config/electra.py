"""ELECTRA's config: BERT's fields plus the embedding size E (factorized as in ALBERT)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from course_lib.config.bert import BertConfig, require, require_positive_ints


@dataclass
class ElectraConfig(BertConfig):
    """BERT's fields plus `embedding_size` E: tokens, positions and segments are embedded in E
    dimensions and projected to H only when E != H (transformers' `embeddings_project`).

    Defaults are ELECTRA-small's discriminator as released (E = 128, H = 256, 12 layers, 4 heads,
    FFN 1024), the same as `transformers.ElectraConfig()`. The generator of the replaced-token
    detection objective is another ElectraConfig: see `generator_config`.
    """

    embedding_size: int = 128
    hidden_size: int = 256
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    model_type: ClassVar[str] = "electra"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        # The released discriminators (Clark et al. 2020, Table 6 and the released configs).
        "electra-small": dict(num_hidden_layers=12, hidden_size=256, embedding_size=128),
        "electra-base": dict(num_hidden_layers=12, hidden_size=768, embedding_size=768),
        "electra-large": dict(num_hidden_layers=24, hidden_size=1024, embedding_size=1024),
    }

    def validate(self) -> None:
        """BERT's checks, then the embedding size."""
        super().validate()
        require_positive_ints(self, "embedding_size")

    @property
    def has_embedding_projection(self) -> bool:
        """Whether the embeddings are projected E -> H (exactly when E != H, as transformers)."""
        return self.embedding_size != self.hidden_size


def generator_config(discriminator: ElectraConfig, multiplier: float = 0.25) -> ElectraConfig:
    """The paper's generator for a discriminator: hidden size, FFN size and heads multiplied by
    `multiplier` (1/4 for small and large, 1/3 for base; section 3.2 found 1/4-1/2 best), the
    same depth, vocabulary and embedding size E, so the two can share their embeddings."""
    require(
        isinstance(multiplier, (int, float)) and 0 < multiplier <= 1,
        "multiplier",
        multiplier,
        "expected a number in (0, 1]",
    )
    heads = max(1, round(discriminator.num_attention_heads * multiplier))
    head_dim = discriminator.hidden_size // discriminator.num_attention_heads
    changes: dict[str, Any] = dict(
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        intermediate_size=max(1, round(discriminator.intermediate_size * multiplier)),
    )
    return discriminator.replace(**changes)
