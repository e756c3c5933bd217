"""Pre-LN BERT, RoBERTa and DistilBERT <-> transformers' RobertaPreLayerNorm (an exact equivalent).

transformers' BERT, RoBERTa and DistilBERT are post-LN; its RoBERTa-PreLayerNorm computes what
our pre_layer_norm=True encoder computes: LayerNorm before each sublayer, one at the very end.

    course_lib (backbone.)                     transformers (roberta_prelayernorm.)
    embeddings.word / token_type / LayerNorm   embeddings.*                     (same names)
    embeddings.position_embeddings [P, H]      embeddings.position_embeddings [pad + 1 + P, H]
    encoder.layers.{i}.attention_norm          encoder.layer.{i}.attention.LayerNorm (before attention)
      attention.query / key / value / output     attention.self.* / attention.output.dense
      output_norm                                intermediate.LayerNorm        (before the FFN)
      feed_forward.up / down                     intermediate.dense / output.dense
    encoder.final_norm                         LayerNorm                        (after the last layer)
    mlm_head.dense / LayerNorm / decoder.bias  lm_head.dense / layer_norm / bias

Positions: RobertaPreLayerNorm numbers real tokens pad + 1, pad + 2, ... (fairseq), as our
RoBERTa does; BERT and DistilBERT number them 0, 1, ..., so their table moves down by pad + 1
rows and the rows below stay zero (only padding, which attention ignores, reads row `pad`).
DistilBERT has no segment embedding: it gets one all-zero segment row (adding zero is exact).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from course_lib.interop import roberta
from course_lib.interop.bert import SHARED_FIELDS
from course_lib.interop.core import layer_keys, linear_keys, load_exact

HF_PREFIX = "roberta_prelayernorm."
FAMILIES = ("bert", "roberta", "distilbert")
# course class -> transformers class; the heads whose computation is the same in both.
CLASSES = {
    "BertForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "RobertaForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "DistilBertForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "BertModel": "RobertaPreLayerNormModel",
    "RobertaModel": "RobertaPreLayerNormModel",
    "BertForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "RobertaForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "BertForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
    "RobertaForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
    "RobertaForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
}
LAYER_KEYS = [
    ("attention_norm", "attention.LayerNorm"),
    ("attention.query", "attention.self.query"),
    ("attention.key", "attention.self.key"),
    ("attention.value", "attention.self.value"),
    ("attention.output", "attention.output.dense"),
    ("output_norm", "intermediate.LayerNorm"),
    ("feed_forward.up", "intermediate.dense"),
    ("feed_forward.down", "output.dense"),
]
# What a pre-LN model of another family would need from RobertaPreLayerNorm.
OWN_LAYERS = {
    "albert": "factorised embedding projection or cross-layer sharing",
    "deberta": "disentangled (relative-position) attention",
}
POSITIONS = "embeddings.position_embeddings.weight"
SEGMENTS = "embeddings.token_type_embeddings.weight"


HEAD_KEYS = {  # RoBERTa's heads, under the RobertaPreLayerNorm class names
    "RobertaPreLayerNormModel": linear_keys("pooler.dense", "pooler.dense"),
    **{
        name.replace("Roberta", "RobertaPreLayerNorm", 1): keys
        for name, keys in roberta.HEAD_KEYS.items()
    },
}
MLM_ALIASES = {
    "lm_head.decoder.weight": f"{HF_PREFIX}embeddings.word_embeddings.weight",
    "lm_head.decoder.bias": "lm_head.bias",
}


def offset(config: Any) -> int:
    """Rows the position table moves down: 0 for RoBERTa (already fairseq-numbered), else pad + 1."""
    return 0 if config.model_type == "roberta" else config.pad_token_id + 1


def why_not(model: nn.Module) -> str | None:
    """None when `model` has an exact RobertaPreLayerNorm equivalent, else the reason in a line."""
    config, name = model.config, type(model).__name__
    if config.model_type not in FAMILIES:
        own = OWN_LAYERS.get(config.model_type, f"{config.model_type}'s own layers")
        return (
            f"transformers has no pre-LN {config.model_type}: its {config.model_type} class is "
            f"post-LN and RobertaPreLayerNorm has no {own}; a post-LN model "
            f"(pre_layer_norm=False) exports"
        )
    if name not in CLASSES:
        if name == "BertForPreTraining":
            return (
                "transformers' RobertaPreLayerNorm has no NSP head; pass --mlm-only to export "
                "the masked-LM part (the NSP head is left out)"
            )
        return (
            f"{name} has no exact RobertaPreLayerNorm equivalent (its head computes "
            f"differently); export the masked-LM model or keep this one in course_lib"
        )
    if (
        CLASSES[name].endswith("MaskedLM")
        and config.hidden_act != "gelu"
        and (config.model_type != "roberta")
    ):
        return (
            f"transformers' RobertaPreLayerNorm MLM head always uses exact GELU, this model's "
            f"uses {config.hidden_act!r}"
        )
    return None


def config_to_hf(config: Any, cls_name: str) -> Any:
    import transformers

    fields = {f: getattr(config, f) for f in SHARED_FIELDS}
    fields["max_position_embeddings"] = config.max_position_embeddings + offset(config)
    fields["type_vocab_size"] = max(config.type_vocab_size, 1)
    dropout = getattr(config, "classifier_dropout", None)
    return transformers.RobertaPreLayerNormConfig(
        **fields, num_labels=config.num_labels, classifier_dropout=dropout
    )


def key_table(config: Any, hf_class_name: str) -> list[tuple[str, str]]:
    """(our key, their key) for every tensor except positions (and DistilBERT's zero segments)."""
    ours = "" if hf_class_name == "RobertaPreLayerNormModel" else "backbone."
    theirs = "" if hf_class_name == "RobertaPreLayerNormModel" else HF_PREFIX
    keys = [
        "embeddings.word_embeddings.weight",
        "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
    ]
    if config.type_vocab_size > 0:
        keys.append(SEGMENTS)
    table = [(f"{ours}{k}", f"{theirs}{k}") for k in keys]
    table += layer_keys(
        config.num_hidden_layers, LAYER_KEYS, f"{ours}encoder.layers.", f"{theirs}encoder.layer."
    )
    table += linear_keys(f"{ours}encoder.final_norm", f"{theirs}LayerNorm")
    return table + HEAD_KEYS[hf_class_name]


def to_roberta_prelayernorm(model: nn.Module) -> nn.Module:
    """The transformers RobertaPreLayerNorm model computing exactly what `model` computes."""
    import transformers

    reason = why_not(model)
    if reason is not None:
        raise ValueError(reason)
    config, hf_name = model.config, CLASSES[type(model).__name__]
    hf_model = getattr(transformers, hf_name)(config_to_hf(config, hf_name))
    ours = model.state_dict()
    state = {theirs: ours[k].detach().clone() for k, theirs in key_table(config, hf_name)}
    prefix = "" if hf_name == "RobertaPreLayerNormModel" else "backbone."
    hf_prefix = "" if hf_name == "RobertaPreLayerNormModel" else HF_PREFIX
    table = ours[f"{prefix}{POSITIONS}"]
    shifted = torch.zeros(table.shape[0] + offset(config), table.shape[1], dtype=table.dtype)
    shifted[offset(config) :] = table
    state[f"{hf_prefix}{POSITIONS}"] = shifted
    if config.type_vocab_size == 0:
        state[f"{hf_prefix}{SEGMENTS}"] = torch.zeros(1, config.hidden_size, dtype=table.dtype)
    if hf_name.endswith("MaskedLM"):
        for alias, source in MLM_ALIASES.items():
            state[alias] = state[source]
    load_exact(hf_model, state)
    hf_model.train(model.training)
    return hf_model


def from_roberta_prelayernorm(hf_model: nn.Module, model_class: type, config: Any) -> nn.Module:
    """The course_lib `model_class(config)` equal to a RobertaPreLayerNorm model; refuses (one
    line) when the rows our table drops (below the offset, a missing segment) are not zero."""
    hf_name = type(hf_model).__name__
    if getattr(hf_model.config, "is_decoder", False) or getattr(
        hf_model.config, "add_cross_attention", False
    ):
        raise ValueError(
            f"this {hf_name} is configured as a decoder (causal or cross-attention); course_lib "
            f"models are bidirectional encoders, so it has no equivalent"
        )
    hf_state = hf_model.state_dict()
    table = key_table(config, hf_name)
    hf_prefix = "" if hf_name == "RobertaPreLayerNormModel" else HF_PREFIX
    prefix = "" if hf_name == "RobertaPreLayerNormModel" else "backbone."
    used = {theirs for _, theirs in table} | {f"{hf_prefix}{POSITIONS}"}
    if hf_name.endswith("MaskedLM"):
        used |= set(MLM_ALIASES)
    if config.type_vocab_size == 0:
        used.add(f"{hf_prefix}{SEGMENTS}")
        if hf_state[f"{hf_prefix}{SEGMENTS}"].any():
            raise ValueError(
                f"this model's segment embedding is not zero, so a {config.model_type} model "
                f"(which has none) cannot hold it; import it as RoBERTa instead"
            )
    leftover = sorted(k for k in hf_state if k not in used)
    if leftover:
        raise ValueError(f"transformers weights not covered by the key table: {leftover[:5]}")
    state = {ours: hf_state[theirs].detach().clone() for ours, theirs in table}
    positions = hf_state[f"{hf_prefix}{POSITIONS}"]
    shift = offset(config)
    if positions[:shift].any():
        raise ValueError(
            f"the first {shift} rows of the position table are not zero, so positions are not a "
            f"{config.model_type} table shifted by pad + 1; import it as RoBERTa instead"
        )
    state[f"{prefix}{POSITIONS}"] = positions[shift:].detach().clone()
    model = model_class(config)
    tied = {k for k in model.state_dict() if k not in state}
    load_exact(model, state, ignore=tied)
    return model.train(hf_model.training)
