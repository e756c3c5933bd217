"""DeBERTa's config: BERT's fields plus relative positions and the disentangled terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from course_lib.config.bert import (
    BertConfig,
    require,
    require_activations,
    require_positive_ints,
    require_probabilities,
)

# The relative-position terms DeBERTa adds to content-to-content attention.
POSITION_TERMS = ("c2p", "p2c")


@dataclass
class DebertaConfig(BertConfig):
    """BERT's fields plus DeBERTa v2/v3's; names match `transformers.DebertaV2Config`.

    Defaults are deberta-v3-base's: 256 log buckets over 512 positions, c2p + p2c terms sharing
    the query/key projections, LayerNorm on the relative table, no absolute input positions.
    """

    vocab_size: int = 128100
    layer_norm_eps: float = 1e-7
    type_vocab_size: int = 0
    relative_attention: bool = True
    # -1 means max_position_embeddings. Without buckets it is the clipping distance k of δ.
    max_relative_positions: int = -1
    position_buckets: int = 256  # <= 0: plain clipping at k, no log buckets (DeBERTa v1 style)
    pos_att_type: list[str] = field(default_factory=lambda: ["p2c", "c2p"])
    share_att_key: bool = True
    position_biased_input: bool = False
    norm_rel_ebd: str = "layer_norm"  # or "none"
    # Index p2c by the paper's δ(j, i) instead of the released code's δ(i, j) (see p2c_index).
    paper_p2c: bool = False
    use_emd: bool = False  # enhanced mask decoder in DebertaForMaskedLM (not in transformers)
    emd_steps: int = 2  # how many times EMD re-applies the last layer (n = 2 in the paper)
    pooler_dropout: float = 0.0
    pooler_hidden_act: str = "gelu"
    # transformers' naming of the MLM head weights: cls.predictions.* (True) or
    # lm_predictions.lm_head.* (False, the layout of Microsoft's checkpoints). Same computation.
    legacy: bool = True
    model_type: ClassVar[str] = "deberta"
    presets: ClassVar[dict[str, dict[str, int]]] = {
        "deberta-v3-xsmall": dict(num_hidden_layers=12, hidden_size=384),
        "deberta-v3-small": dict(num_hidden_layers=6, hidden_size=768),
        "deberta-v3-base": dict(num_hidden_layers=12, hidden_size=768),
        "deberta-v3-large": dict(num_hidden_layers=24, hidden_size=1024),
    }

    def __post_init__(self) -> None:
        # transformers also accepts "p2c|c2p"; store a plain list either way.
        if isinstance(self.pos_att_type, str):
            self.pos_att_type = self.pos_att_type.split("|")
        if isinstance(self.pos_att_type, (list, tuple)):
            self.pos_att_type = [
                str(t).strip().lower() for t in self.pos_att_type if str(t).strip()
            ]
        super().__post_init__()

    def validate(self) -> None:
        super().validate()
        require(
            isinstance(self.pos_att_type, list)
            and all(t in POSITION_TERMS for t in self.pos_att_type)
            and len(set(self.pos_att_type)) == len(self.pos_att_type),
            "pos_att_type",
            self.pos_att_type,
            f"expected distinct terms from {list(POSITION_TERMS)} (c2c is always on), "
            "e.g. ['p2c', 'c2p']",
        )
        require(
            self.norm_rel_ebd in ("none", "layer_norm"),
            "norm_rel_ebd",
            self.norm_rel_ebd,
            "expected 'layer_norm' or 'none'",
        )
        if not self.relative_attention:
            require(
                not self.pos_att_type and self.norm_rel_ebd == "none",
                "relative_attention",
                False,
                "without the relative table there are no position terms to compute: also set "
                "pos_att_type=[] and norm_rel_ebd='none' (or keep relative_attention=True)",
            )
        require(
            isinstance(self.max_relative_positions, int)
            and (self.max_relative_positions == -1 or self.max_relative_positions >= 1),
            "max_relative_positions",
            self.max_relative_positions,
            "expected -1 (use max_position_embeddings) or a positive clipping distance",
        )
        require(
            isinstance(self.position_buckets, int) and not isinstance(self.position_buckets, bool),
            "position_buckets",
            self.position_buckets,
            "expected an integer (<= 0 for plain clipping)",
        )
        if self.position_buckets > 0:
            # The largest distance told apart: the one that lands on the last bucket.
            largest = self.max_relative_distance
            require(
                self.position_buckets >= 2 and largest - 1 > self.position_buckets // 2,
                "position_buckets",
                self.position_buckets,
                f"log buckets need 2 <= position_buckets and position_buckets // 2 < "
                f"max_relative_positions - 1 = {largest - 1}; use <= 0 for plain clipping",
            )
        require(
            not (self.use_emd and self.position_biased_input),
            "use_emd",
            self.use_emd,
            "the enhanced mask decoder injects absolute positions that position_biased_input=True "
            "already adds at the input; set position_biased_input=False (DeBERTa's choice)",
        )
        require_positive_ints(self, "emd_steps")
        require_activations(self, "pooler_hidden_act")
        require_probabilities(self, "pooler_dropout")

    @property
    def max_relative_distance(self) -> int:
        """max_relative_positions, where -1 means max_position_embeddings (the one place this is
        resolved; transformers' DebertaV2Encoder resolves it the same way)."""
        if self.max_relative_positions >= 1:
            return self.max_relative_positions
        return self.max_position_embeddings

    @property
    def relative_span(self) -> int:
        """k: the relative table has 2k rows, for distances -k .. k - 1 (buckets, or clipped at
        max_relative_distance)."""
        if self.position_buckets > 0:
            return self.position_buckets
        return self.max_relative_distance
