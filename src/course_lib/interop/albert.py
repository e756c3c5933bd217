"""ALBERT <-> transformers: the weight-name table and config translation.

    course_lib                                  transformers
    backbone.embeddings.* (word, position, ...) albert.embeddings.*             (same names)
    backbone.embeddings.projection              albert.encoder.embedding_hidden_mapping_in
    backbone.encoder.layers.{i}.                albert.encoder.albert_layer_groups.{g}
                                                  .albert_layers.{j}.
      attention.query / key / value               attention.query / key / value
      attention.output / attention_norm           attention.dense / attention.LayerNorm
      feed_forward.up / .down / output_norm       ffn / ffn_output / full_layer_layer_norm
    backbone.pooler.dense                       albert.pooler
    mlm_head.dense / LayerNorm / decoder.bias   predictions.dense / LayerNorm / bias
    sop_head.classifier                         sop_classifier.classifier

Only the first layer that uses a shared weight appears in the table: our later layers hold the
same tensor. transformers shares whole layers within groups (our sharing="all"); sharing="none"
is converted as one group per layer. "attention" / "ffn" sharing has no equivalent there.
"""

from __future__ import annotations

from typing import Any

from course_lib.config import AlbertConfig
from course_lib.interop import bert
from course_lib.interop.core import linear_keys, mlm_keys, require_post_layer_norm
from course_lib.models import albert as m
from course_lib.modules.sharing import sharing_plan

# core.register_family converts BASE and the classes named in HEAD_KEYS (interop/__init__).
BASE = m.AlbertModel
HF_PREFIX = "albert."
SHARED_FIELDS = (*bert.SHARED_FIELDS, "embedding_size", "inner_group_num")

LAYER_KEYS = [
    ("attention.query", "attention.query"),
    ("attention.key", "attention.key"),
    ("attention.value", "attention.value"),
    ("attention.output", "attention.dense"),
    ("attention_norm", "attention.LayerNorm"),
    ("feed_forward.up", "ffn"),
    ("feed_forward.down", "ffn_output"),
    ("output_norm", "full_layer_layer_norm"),
]

# transformers' QA head is Linear(hidden, num_labels) split into start / end, and its SOP head
# is Linear(hidden, num_labels): both need num_labels = 2 to match our fixed two-logit heads.
TWO_LABEL_CLASSES = ("AlbertForPreTraining", "AlbertForQuestionAnswering")


def config_from_hf(hf_config: Any, cls_name: str = "AlbertModel") -> AlbertConfig:
    if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute position embeddings are supported (ALBERT's original).")
    if cls_name in TWO_LABEL_CLASSES and hf_config.num_labels != 2:
        raise ValueError(
            f"{cls_name} from transformers has num_labels={hf_config.num_labels}; its head must "
            f"give exactly 2 logits (SOP: in order / swapped; QA: start / end)."
        )
    classifier_dropout = hf_config.classifier_dropout_prob
    return AlbertConfig(
        **{f: getattr(hf_config, f) for f in SHARED_FIELDS},
        num_hidden_groups=hf_config.num_hidden_groups,
        sharing="all",  # the only strategy transformers implements: whole layers per group
        embedding_projection=True,  # transformers projects E -> H even when E == H
        # transformers' token classifier falls back to hidden dropout when this is None
        classifier_dropout_prob=(
            hf_config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        ),
        num_labels=hf_config.num_labels,
    )


def _hf_groups(config: AlbertConfig) -> int:
    """Groups in the transformers model: not-shared is all-shared with one group per layer."""
    return config.num_hidden_layers if config.sharing == "none" else config.num_hidden_groups


def config_to_hf(config: AlbertConfig, cls_name: str = "AlbertModel") -> Any:
    import transformers

    if config.sharing not in ("all", "none"):
        raise ValueError(
            f"sharing={config.sharing!r} has no transformers equivalent: transformers' ALBERT "
            f"shares whole layers within groups (sharing='all', and 'none' as one group per "
            f"layer), never the attention or feed-forward alone. Keep this model in course_lib."
        )
    require_post_layer_norm(config, "ALBERT")
    if not config.has_embedding_projection:
        raise ValueError(
            "this model has no E -> H projection (embedding_size == hidden_size, as in the "
            "original ALBERT code) but transformers' ALBERT always has one; build it with "
            "embedding_projection=True to convert."
        )
    if config.type_vocab_size == 0:
        raise ValueError(
            "transformers' ALBERT always has segment embeddings; use type_vocab_size >= 1."
        )
    return transformers.AlbertConfig(
        **{f: getattr(config, f) for f in SHARED_FIELDS},
        num_hidden_groups=_hf_groups(config),
        classifier_dropout_prob=config.classifier_dropout_prob,
        num_labels=2 if cls_name in TWO_LABEL_CLASSES else config.num_labels,
    )


def backbone_table(
    config: AlbertConfig, ours: str, theirs: str, pooler: bool
) -> list[tuple[str, str]]:
    """Keys of the encoder body; `ours`/`theirs` are the prefixes ('backbone.'/'albert.' or '')."""
    table = [(f"{ours}embeddings.{k}", f"{theirs}embeddings.{k}") for k in bert.EMBEDDING_KEYS]
    table += linear_keys(
        f"{ours}embeddings.projection", f"{theirs}encoder.embedding_hidden_mapping_in"
    )
    per_group = config.num_hidden_layers // _hf_groups(config)
    plan = sharing_plan(config.num_hidden_layers, _hf_groups(config), config.inner_group_num, "all")
    for i, (owner, _) in enumerate(plan):
        if owner != i:  # a later use of a shared layer: the same tensors, already in the table
            continue
        layer, inner = divmod(i, config.inner_group_num)
        hf_layer = f"{theirs}encoder.albert_layer_groups.{layer // per_group}.albert_layers.{inner}"
        for a, b in LAYER_KEYS:
            table += linear_keys(f"{ours}encoder.layers.{i}.{a}", f"{hf_layer}.{b}")
    if pooler:
        table += linear_keys(f"{ours}pooler.dense", f"{theirs}pooler")
    return table


MLM_KEYS = mlm_keys("predictions.dense", "predictions.LayerNorm", "predictions.bias")
MLM_ALIASES = {  # transformers stores the tied tensors under a second name too
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}
HEAD_KEYS = {
    "AlbertForMaskedLM": MLM_KEYS,
    "AlbertForPreTraining": MLM_KEYS
    + linear_keys("sop_head.classifier", "sop_classifier.classifier"),
    "AlbertForSequenceClassification": linear_keys("classifier.out_proj", "classifier"),
    "AlbertForTokenClassification": linear_keys("classifier.out_proj", "classifier"),
    "AlbertForQuestionAnswering": linear_keys("qa_head.qa_outputs", "qa_outputs"),
}
