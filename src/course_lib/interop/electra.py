"""ELECTRA <-> transformers: the weight-name table and config translation.

course_lib                                   transformers
backbone.embeddings.* (word, position, ...)  electra.embeddings.*              (same names)
backbone.embeddings.projection (E != H)      electra.embeddings_project
backbone.encoder.layers.{i}.*                electra.encoder.layer.{i}.*       (BERT's table)
discriminator_head.dense / dense_prediction  discriminator_predictions.dense / .dense_prediction
mlm_head.dense / LayerNorm                   generator_predictions.dense / .LayerNorm
mlm_head.decoder.bias                        generator_lm_head.bias
(tied: the word embeddings)                  generator_lm_head.weight
"""

from __future__ import annotations

from typing import Any

from course_lib.config.electra import ElectraConfig
from course_lib.interop import bert
from course_lib.interop.core import linear_keys, mlm_keys, require_post_layer_norm
from course_lib.models import electra as m

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.ElectraModel
HF_PREFIX = "electra."
SHARED_FIELDS = (*bert.SHARED_FIELDS, "embedding_size")


def config_from_hf(hf_config: Any, cls_name: str = "ElectraModel") -> ElectraConfig:
    if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute position embeddings are supported (ELECTRA's original).")
    if cls_name == "ElectraForMaskedLM" and not getattr(hf_config, "tie_word_embeddings", True):
        raise ValueError(
            "this ElectraForMaskedLM has tie_word_embeddings=False (its output matrix is not the "
            "embedding table); course_lib's generator always ties them, as ELECTRA does."
        )
    return ElectraConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        num_labels=getattr(hf_config, "num_labels", 2),
    )


def config_to_hf(config: ElectraConfig) -> Any:
    import transformers

    require_post_layer_norm(config, "ELECTRA")
    if config.type_vocab_size == 0:
        raise ValueError(
            "transformers' ELECTRA always has segment embeddings; use type_vocab_size >= 1."
        )
    return transformers.ElectraConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS}, num_labels=config.num_labels
    )


def backbone_table(
    config: ElectraConfig, ours: str, theirs: str, pooler: bool = False
) -> list[tuple[str, str]]:
    """BERT's body table (ELECTRA has no pooler), plus the E -> H projection when E != H."""
    table = bert.backbone_table(config, ours, theirs, pooler=False)
    if config.has_embedding_projection:
        table += linear_keys(f"{ours}embeddings.projection", f"{theirs}embeddings_project")
    return table


# transformers stores the tied decoder weight under a second name too
MLM_ALIASES = {"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"}
HEAD_KEYS = {
    "ElectraForPreTraining": linear_keys(
        "discriminator_head.dense", "discriminator_predictions.dense"
    )
    + linear_keys(
        "discriminator_head.dense_prediction", "discriminator_predictions.dense_prediction"
    ),
    "ElectraForMaskedLM": mlm_keys(
        "generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head.bias"
    ),
}
