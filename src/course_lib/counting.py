"""Exact parameter counts from a config alone (no model is built), broken down by component.

The formulas are the ones a learner can write by hand; tests prove they equal
`sum(p.numel() for p in model.parameters())` for every model class. Other families register
their own counter with `register_counter`, so `count_parameters` covers them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from course_lib.config import BertConfig

COMPONENTS = ("embeddings", "attention", "feed_forward", "layer_norm", "pooler", "heads")

# Which task models carry the pooler (dense + tanh on [CLS]), as in transformers.
_POOLED = {"Model", "ForPreTraining", "ForSequenceClassification"}
_TASKS = (
    "Model",
    "ForMaskedLM",
    "ForPreTraining",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)

_COUNTERS: dict[str, Callable[[Any, str], dict[str, int]]] = {}


def register_counter(model_type: str) -> Callable:
    """Decorator: `fn(config, task) -> breakdown` becomes the counter for `config.model_type`."""

    def deco(fn: Callable[[Any, str], dict[str, int]]) -> Callable[[Any, str], dict[str, int]]:
        _COUNTERS[model_type] = fn
        return fn

    return deco


def task_of(model_class: str | type) -> str:
    """'BertForMaskedLM' (or the class) -> 'ForMaskedLM'; the family prefix does not matter."""
    name = model_class if isinstance(model_class, str) else model_class.__name__
    for task in sorted(_TASKS, key=len, reverse=True):
        if name.endswith(task):
            return task
    raise ValueError(f"unknown model class {name!r}; expected a name ending in one of {_TASKS}.")


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
    counter = _COUNTERS.get(config.model_type)
    if counter is None:
        raise ValueError(
            f"no parameter counter for model_type={config.model_type!r}; known: {sorted(_COUNTERS)}."
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


@register_counter("bert")
def count_bert(config: BertConfig, task: str) -> dict[str, int]:
    """BERT: embeddings V*H + P*H + T*H; per layer 4 attention projections (4H^2 + 4H) and a
    feed-forward H -> I -> H (2HI + I + H); two LayerNorms per layer plus one after embeddings."""
    h, n_layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    return {
        "embeddings": (config.vocab_size + config.max_position_embeddings + config.type_vocab_size)
        * h,
        "attention": n_layers * 4 * linear(h, h),
        "feed_forward": n_layers * (linear(h, inter) + linear(inter, h)),
        "layer_norm": layer_norm(h) * (1 + 2 * n_layers + (1 if config.pre_layer_norm else 0)),
        "pooler": linear(h, h) if task in _POOLED else 0,
        "heads": bert_head_parameters(config, task),
    }
