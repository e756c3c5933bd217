"""The machinery behind from_transformers / to_transformers: explicit key tables with shape checks.

Each family registers a `Conversion` per class (`register_family` does a whole family): which
transformers class matches which course_lib class, how configs translate, and a table of
(course_lib key, transformers key) pairs. Nothing is matched by guessing: a key on either side
that the table does not name is an error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Conversion:
    ours: type[nn.Module]
    hf_class_name: str
    config_from_hf: Callable[[Any], Any]
    config_to_hf: Callable[[Any], Any]
    key_table: Callable[[Any], list[tuple[str, str]]]
    # transformers keys that are copies of another key (tied weights): {alias: source}.
    hf_aliases: Callable[[Any], dict[str, str]] = lambda config: {}


CONVERSIONS: dict[str, Conversion] = {}  # keyed by course_lib class name
BY_HF_CLASS: dict[str, Conversion] = {}


KeyTable = list[tuple[str, str]]
# A head's keys: fixed, or depending on the config (DeBERTa's two MLM layouts).
HeadKeys = KeyTable | Callable[[Any], KeyTable]
Aliases = Mapping[str, str] | Callable[[Any], Mapping[str, str]]


def register(conversion: Conversion) -> None:
    CONVERSIONS[conversion.ours.__name__] = conversion
    BY_HF_CLASS[conversion.hf_class_name] = conversion


def linear_keys(ours: str, theirs: str) -> KeyTable:
    """The weight and bias of one Linear (or LayerNorm) module, named `ours` and `theirs`."""
    return [(f"{ours}.{p}", f"{theirs}.{p}") for p in ("weight", "bias")]


def mlm_keys(dense: str, norm: str, bias: str) -> KeyTable:
    """Our MLM head (transform dense + LayerNorm, decoder bias) under transformers' names; the
    decoder weight is the word embedding, tied on both sides."""
    return [
        *linear_keys("mlm_head.dense", dense),
        *linear_keys("mlm_head.LayerNorm", norm),
        ("mlm_head.decoder.bias", bias),
    ]


def layer_keys(num_layers: int, keys: KeyTable, ours: str, theirs: str) -> KeyTable:
    """`keys` (module pairs) of every encoder layer i, under `{ours}{i}.` and `{theirs}{i}.`."""
    return [
        pair
        for i in range(num_layers)
        for a, b in keys
        for pair in linear_keys(f"{ours}{i}.{a}", f"{theirs}{i}.{b}")
    ]


def require_post_layer_norm(config: Any, family: str) -> None:
    """transformers' `family` is post-LN: refuse a pre_layer_norm=True model (no equivalent)."""
    if config.pre_layer_norm:
        raise ValueError(
            f"transformers' {family} is post-LN; a pre_layer_norm=True model has no equivalent."
        )


def _resolve(table: Any, config: Any) -> Any:
    """A table given as is, or as a function of the config."""
    return table(config) if callable(table) else table


def register_family(family: ModuleType) -> None:
    """Register a Conversion for the base model and for each task model of a family module.

    The module (interop.bert, ...) defines:
      BASE            our base model class, e.g. BertModel
      HF_PREFIX       where transformers' task models hold the base model, e.g. "bert."
      HEAD_KEYS       task class name -> its head's key pairs (or a function of the config)
      MLM_ALIASES     tied tensors transformers also stores under a second name, in models
                      with an MLM head (a dict, or a function of the config)
      backbone_table(config, ours, theirs, pooler), config_from_hf, config_to_hf
    and, where transformers names classes otherwise, HF_NAMES (our name -> theirs). A config
    function that takes `cls_name` is told the class (ALBERT: transformers sizes some heads by
    num_labels where ours have two logits).
    """
    from course_lib.models import MODEL_CLASSES

    hf_names = getattr(family, "HF_NAMES", {})

    def add(cls: type[nn.Module], head: HeadKeys, prefixes: tuple[str, str], pooler: bool) -> None:
        name = cls.__name__
        from_hf, to_hf = (
            _told_class(f, name) for f in (family.config_from_hf, family.config_to_hf)
        )
        key_table = partial(_class_keys, family.backbone_table, head, prefixes, pooler)
        aliases = partial(_class_aliases, family.MLM_ALIASES, head)
        register(Conversion(cls, hf_names.get(name, name), from_hf, to_hf, key_table, aliases))

    # from_transformers builds the base model with its defaults: a pooler iff it adds one.
    pooling = inspect.signature(family.BASE).parameters.get("add_pooling_layer")
    add(family.BASE, [], ("", ""), pooler=pooling is not None and pooling.default)
    for name, head in family.HEAD_KEYS.items():
        cls = MODEL_CLASSES[name]
        add(cls, head, ("backbone.", family.HF_PREFIX), cls.add_pooling_layer)


def _told_class(config_function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`config_function` with `cls_name=name` bound, if it takes the class name."""
    if "cls_name" in inspect.signature(config_function).parameters:
        return partial(config_function, cls_name=name)
    return config_function


def _class_keys(
    backbone: Callable[..., KeyTable],
    head: HeadKeys,
    prefixes: tuple[str, str],
    pooler: bool,
    config: Any,
) -> KeyTable:
    return backbone(config, *prefixes, pooler=pooler) + _resolve(head, config)


def _class_aliases(aliases: Aliases, head: HeadKeys, config: Any) -> Mapping[str, str]:
    has_mlm = any(ours.startswith("mlm_head.") for ours, _ in _resolve(head, config))
    return _resolve(aliases, config) if has_mlm else {}


def _copy(
    source: dict[str, torch.Tensor], table: list[tuple[str, str]], reverse: bool
) -> dict[str, torch.Tensor]:
    out = {}
    for ours, theirs in table:
        src, dst = (theirs, ours) if not reverse else (ours, theirs)
        if src not in source:
            raise KeyError(f"weight {src!r} is missing from the source model")
        out[dst] = source[src].detach().clone()
    return out


def load_exact(
    model: nn.Module, state: dict[str, torch.Tensor], ignore: set[str] = frozenset()
) -> None:
    """Copy `state` into `model`; every key and every shape must match (ValueError otherwise)."""
    target = model.state_dict()
    missing = sorted(set(target) - set(state) - set(ignore))
    unexpected = sorted(set(state) - set(target))
    if missing or unexpected:
        raise ValueError(f"missing keys {missing}, unexpected keys {unexpected}")
    for key, value in state.items():
        if target[key].shape != value.shape:
            raise ValueError(
                f"{key}: shape {tuple(value.shape)} does not fit {tuple(target[key].shape)}"
            )
    with torch.no_grad():
        for key, value in state.items():
            target[key].copy_(value)


def from_transformers(hf_model: nn.Module, config: Any = None) -> nn.Module:
    """The course_lib model equivalent to `hf_model` (a transformers model), with its weights.

    `config`: our config to build, when known (an exported model records it); by default it
    is translated from `hf_model.config`.
    """
    name = type(hf_model).__name__
    conv = BY_HF_CLASS.get(name)
    if conv is None:
        raise ValueError(
            f"no conversion for transformers class {name}; supported: {sorted(BY_HF_CLASS)}."
        )
    hf_config = hf_model.config
    # A decoder (causal attention) or a model with cross-attention layers computes something
    # else than the bidirectional encoder course_lib builds: converting it would silently change
    # its outputs, so it is refused.
    if getattr(hf_config, "is_decoder", False) or getattr(hf_config, "add_cross_attention", False):
        what = "is_decoder=True" if getattr(hf_config, "is_decoder", False) else "cross-attention"
        raise ValueError(
            f"this {name} is configured as a decoder ({what}); course_lib models are "
            "bidirectional encoders without cross-attention, so it has no equivalent. Load it "
            "with is_decoder=False, add_cross_attention=False to convert the encoder."
        )
    if config is None:
        config = conv.config_from_hf(hf_config)
    model = conv.ours(config)
    hf_state = hf_model.state_dict()
    table = conv.key_table(config)
    aliases = conv.hf_aliases(config)
    used = {theirs for _, theirs in table} | set(aliases)
    leftover = sorted(k for k in hf_state if k not in used)
    if leftover:
        raise ValueError(f"transformers weights not covered by the key table: {leftover}")
    state = _copy(hf_state, table, reverse=False)
    tied = {k for k in model.state_dict() if k not in state}  # tied aliases on our side
    load_exact(model, state, ignore=tied)
    model.eval() if not hf_model.training else model.train()
    return model


def to_transformers(model: nn.Module) -> nn.Module:
    """The transformers model equivalent to a course_lib `model`; its state dict equals the original's."""
    import transformers

    conv = CONVERSIONS.get(type(model).__name__)
    if conv is None:
        raise ValueError(
            f"no conversion for {type(model).__name__}; supported: {sorted(CONVERSIONS)}."
        )
    hf_config = conv.config_to_hf(model.config)
    hf_model = getattr(transformers, conv.hf_class_name)(hf_config)
    state = _copy(model.state_dict(), conv.key_table(model.config), reverse=True)
    for alias, source in conv.hf_aliases(model.config).items():
        state[alias] = state[source]
    load_exact(hf_model, state)
    hf_model.train(model.training)
    return hf_model
