"""Exact parameter counts from a config alone (no model is built), broken down by component.

The formulas are the ones a learner can write by hand; tests prove they equal
`sum(p.numel() for p in model.parameters())` for every model class. Each family's counter is
BERT's formulas plus what the family changes; `COUNTERS` lists them by `model_type`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from course_lib.config import (
    AlbertConfig,
    BertConfig,
    DebertaConfig,
    DistilBertConfig,
    ElectraConfig,
    ModernBertConfig,
    RobertaConfig,
)

COMPONENTS = ("embeddings", "attention", "feed_forward", "layer_norm", "pooler", "heads")

# Which task models carry the pooler (dense + tanh on [CLS]), as in transformers.
POOLED_TASKS = {"Model", "ForPreTraining", "ForSequenceClassification"}
# The task suffixes of every family's model classes, in the order the parameter explorer lists them.
TASKS = (
    "Model",
    "ForPreTraining",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)


def task_of(model_class: str | type) -> str:
    """'BertForMaskedLM' (or the class) -> 'ForMaskedLM'; the family prefix does not matter."""
    name = model_class if isinstance(model_class, str) else model_class.__name__
    for task in sorted(TASKS, key=len, reverse=True):
        if name.endswith(task):
            return task
    raise ValueError(f"unknown model class {name!r}; expected a name ending in one of {TASKS}.")


def count_parameters(config: Any, model_class: str | type = "BertModel") -> dict[str, int]:
    """Per-component parameter counts and their `total` for `model_class` built from `config`.

    `config` is a config object (e.g. BertConfig(...)) or its `to_dict()` (with "model_type").
    """
    if isinstance(config, dict):
        from course_lib.config import config_from_dict

        config = config_from_dict(config)
    if not hasattr(config, "model_type") and hasattr(getattr(config, "config", None), "model_type"):
        raise TypeError(
            f"count_parameters needs a config, got a {type(config).__name__} model; pass "
            "model.config (or count the model itself with sum(p.numel() for p in "
            "model.parameters()))."
        )
    if not hasattr(config, "model_type"):
        raise TypeError(
            f"count_parameters needs a model config such as BertConfig(...) (or its to_dict()), "
            f"got {type(config).__name__}."
        )
    counter = COUNTERS.get(config.model_type)
    if counter is None:
        raise ValueError(
            f"no parameter counter for model_type={config.model_type!r}; known: {sorted(COUNTERS)}."
        )
    breakdown = counter(config, task_of(model_class))
    breakdown["total"] = sum(breakdown[k] for k in COMPONENTS)
    return breakdown


def linear(n_in: int, n_out: int, bias: bool = True) -> int:
    """Weights of an n_in -> n_out dense layer, plus its bias."""
    return n_in * n_out + (n_out if bias else 0)


def layer_norm(dim: int) -> int:
    """A LayerNorm has a scale and a shift per feature."""
    return 2 * dim


def embedding_tables(config: BertConfig, dim: int) -> int:
    """Token, position and segment tables, each `dim` wide: (V + P + T) * dim."""
    return (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * dim


def bert_head_parameters(config: BertConfig, task: str, mlm_dim: int | None = None) -> int:
    """Task heads on top of the encoder. The MLM decoder weight is tied to the word embeddings,
    so only its bias (one per vocabulary entry) is new."""
    h, v = config.hidden_size, config.vocab_size
    e = mlm_dim or h
    mlm = linear(h, e) + layer_norm(e) + v
    return {
        "Model": 0,
        "ForMaskedLM": mlm,
        "ForPreTraining": mlm + linear(h, 2),
        "ForSequenceClassification": linear(h, config.num_labels),
        "ForTokenClassification": linear(h, config.num_labels),
        "ForQuestionAnswering": linear(h, 2),
    }[task]


def count_bert(config: BertConfig, task: str) -> dict[str, int]:
    """BERT: embeddings V*H + P*H + T*H; per layer 4 attention projections (4H^2 + 4H) and a
    feed-forward H -> I -> H (2HI + I + H); two LayerNorms per layer plus one after embeddings."""
    h, n_layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    return {
        "embeddings": embedding_tables(config, h),
        "attention": n_layers * 4 * linear(h, h),
        "feed_forward": n_layers * (linear(h, inter) + linear(inter, h)),
        "layer_norm": layer_norm(h) * (1 + 2 * n_layers + (1 if config.pre_layer_norm else 0)),
        "pooler": linear(h, h) if task in POOLED_TASKS else 0,
        "heads": bert_head_parameters(config, task),
    }


def count_roberta(config: RobertaConfig, task: str) -> dict[str, int]:
    """BERT's count (with P=514, T=1); sequence classification swaps pooler + linear for
    RoBERTa's head (dense + out_proj), which has exactly as many parameters."""
    if task == "ForPreTraining":
        raise ValueError("RoBERTa has no ForPreTraining model (no NSP); use ForMaskedLM.")
    counts = count_bert(config, task)
    if task == "ForSequenceClassification":
        h = config.hidden_size
        counts["pooler"], counts["heads"] = 0, linear(h, h) + linear(h, config.num_labels)
    return counts


def count_distilbert(config: DistilBertConfig, task: str) -> dict[str, int]:
    """BERT's count with T=0 and no pooler; sequence classification adds a dense H x H layer (transformers: pre_classifier)."""
    if task == "ForPreTraining":
        raise ValueError("DistilBERT has no ForPreTraining model (no NSP); use ForMaskedLM.")
    counts = count_bert(config, task)
    counts["pooler"] = 0
    if task == "ForSequenceClassification":
        h = config.hidden_size
        counts["heads"] = linear(h, h) + linear(h, config.num_labels)
    return counts


def count_albert(config: AlbertConfig, task: str) -> dict[str, int]:
    """BERT's formulas with two changes. Embeddings: (V + P + T) * E, plus E*H + H for the
    projection. Layers: only distinct sublayers count; a forward pass applies L * inner ones,
    of which G * inner are distinct, and a shared sublayer is counted once.

    The paper's Tables 1, 3 and 4 count ALBERT's shared models as `AlbertModel` (pooler
    included, as in the released checkpoints) but their BERT and not-shared rows without the
    pooler; tests/test_albert_counting.py reproduces every figure and names the two it cannot.
    """
    h, e, inter = config.hidden_size, config.embedding_size, config.intermediate_size
    applied = config.depth
    distinct = config.num_hidden_groups * config.inner_group_num
    n_attention = distinct if config.sharing in ("all", "attention") else applied
    n_ffn = distinct if config.sharing in ("all", "ffn") else applied
    embeddings = embedding_tables(config, e)
    return {
        "embeddings": embeddings + (linear(e, h) if config.has_embedding_projection else 0),
        "attention": n_attention * 4 * linear(h, h),
        "feed_forward": n_ffn * (linear(h, inter) + linear(inter, h)),
        # one LayerNorm after the embeddings (in E), one per distinct attention and FFN
        "layer_norm": layer_norm(e)
        + layer_norm(h) * (n_attention + n_ffn + (1 if config.pre_layer_norm else 0)),
        "pooler": linear(h, h) if task in POOLED_TASKS else 0,
        "heads": bert_head_parameters(config, task, mlm_dim=e),
    }


def count_deberta(config: DebertaConfig, task: str) -> dict[str, int]:
    """BERT's count, minus the absolute position table (kept only for position_biased_input or
    EMD), plus the 2k x H relative table, its LayerNorm and (share_att_key=False) one H x H
    projection per position term per layer; the pooler exists only in the sequence classifier."""
    h, n_layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    if task == "ForPreTraining":
        raise ValueError("DeBERTa has no ForPreTraining model (no NSP); count DebertaForMaskedLM.")
    relative = config.relative_attention
    absolute = config.position_biased_input or config.use_emd
    n_pos_proj = 0 if (config.share_att_key or not relative) else len(config.pos_att_type)
    return {
        "embeddings": (
            config.vocab_size
            + (config.max_position_embeddings if absolute else 0)
            + config.type_vocab_size
            + (2 * config.relative_span if relative else 0)
        )
        * h,
        "attention": n_layers * (4 + n_pos_proj) * linear(h, h),
        "feed_forward": n_layers * (linear(h, inter) + linear(inter, h)),
        "layer_norm": layer_norm(h)
        * (
            1
            + 2 * n_layers
            + (1 if config.norm_rel_ebd == "layer_norm" else 0)
            + (1 if config.pre_layer_norm else 0)
        ),
        "pooler": linear(h, h) if task == "ForSequenceClassification" else 0,
        "heads": bert_head_parameters(config, task),
    }


def count_electra(config: ElectraConfig, task: str) -> dict[str, int]:
    """BERT's formulas with ALBERT's embeddings: (V + P + T) * E, plus E*H + H for the projection
    when E != H, and the embedding LayerNorm in E. No pooler. Heads: the discriminator's
    dense H -> H and H -> 1; the generator's dense H -> E, LayerNorm(E) and the decoder bias V
    (its weight is the tied V x E table)."""
    h, e, n_layers = config.hidden_size, config.embedding_size, config.num_hidden_layers
    heads = {
        "Model": 0,
        "ForPreTraining": linear(h, h) + linear(h, 1),
        "ForMaskedLM": linear(h, e) + layer_norm(e) + config.vocab_size,
    }
    if task not in heads:
        raise ValueError(
            f"ELECTRA has no {task} class in course_lib; count one of "
            f"{[f'Electra{t}' for t in heads]}."
        )
    embeddings = embedding_tables(config, e)
    return {
        "embeddings": embeddings + (linear(e, h) if config.has_embedding_projection else 0),
        "attention": n_layers * 4 * linear(h, h),
        "feed_forward": n_layers
        * (linear(h, config.intermediate_size) + linear(config.intermediate_size, h)),
        "layer_norm": layer_norm(e)
        + layer_norm(h) * (2 * n_layers + (1 if config.pre_layer_norm else 0)),
        "pooler": 0,
        "heads": heads[task],
    }


def count_modernbert(config: ModernBertConfig, task: str) -> dict[str, int]:
    """Embeddings V*H (no position or segment tables). Per layer: Wqkv 3H^2 and Wo H^2; GeGLU
    H*2I + I*H; biases only where the config switches them on. Norms of H (2H with norm_bias):
    after the embeddings, before attention in layers 1..L-1, before every FFN, and the final
    one. MLM head: dense H^2, a norm and the decoder bias V (its weight is tied)."""
    h, n_layers, inter, v = (
        config.hidden_size,
        config.num_hidden_layers,
        config.intermediate_size,
        config.vocab_size,
    )
    norm = h * (2 if config.norm_bias else 1)
    heads = {
        "Model": 0,
        "ForMaskedLM": linear(h, h, config.classifier_bias)
        + norm
        + (v if config.decoder_bias else 0),
    }
    if task not in heads:
        raise ValueError(
            f"ModernBERT has no {task} class in course_lib; count one of "
            f"{[f'ModernBert{t}' for t in heads]}."
        )
    ab, mb = config.attention_bias, config.mlp_bias
    return {
        "embeddings": v * h,
        "attention": n_layers * (linear(h, 3 * h, ab) + linear(h, h, ab)),
        "feed_forward": n_layers * (linear(h, 2 * inter, mb) + linear(inter, h, mb)),
        "layer_norm": norm * (1 + (n_layers - 1) + n_layers + 1),
        "pooler": 0,
        "heads": heads[task],
    }


# model_type -> counter(config, task); one row per family.
COUNTERS: dict[str, Callable[[Any, str], dict[str, int]]] = {
    "bert": count_bert,
    "roberta": count_roberta,
    "albert": count_albert,
    "deberta": count_deberta,
    "distilbert": count_distilbert,
    "electra": count_electra,
    "modernbert": count_modernbert,
}
