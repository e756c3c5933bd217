"""Training plots: a run's metric history, several runs side by side, and what masking did.

A history is what the training engine logs: a list of dicts, one per logged step, e.g.
{"step": 100, "train_loss": 5.1, "lr": 1e-3, "tokens_per_s": 9000} and, on evaluation steps,
"eval_mlm_loss", "eval_mlm_accuracy", "eval_nsp_accuracy" / "eval_sop_accuracy". Anything with
a `.history` list works too. The plots draw whatever numeric keys are present.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np
from matplotlib.patches import Patch, Rectangle

from course_lib.labels import IGNORE_INDEX
from course_lib.viz._figure import CourseFigure

GROUP_ORDER = ("loss", "accuracy", "learning rate", "throughput")
# Counters that grow with the step, not metrics; plot_history skips them unless asked.
NOT_METRICS = frozenset(
    {"step", "epoch", "tokens", "tokens_seen", "examples", "examples_seen", "time", "elapsed_s"}
)
MASK_CATEGORIES = ("not selected", "masked", "random", "kept")
MASK_COLOURS = {
    "not selected": "#eeeeee",
    "masked": "#4c72b0",
    "random": "#dd8452",
    "kept": "#55a868",
}


# ---------------------------------------------------------------------------------------------
# Metric histories
# ---------------------------------------------------------------------------------------------


def _entries(history: Any, name: str = "history") -> list[Mapping[str, Any]]:
    entries = getattr(history, "history", history)
    if isinstance(entries, Mapping) or not isinstance(entries, Sequence):
        raise TypeError(
            f"{name} should be a list of dicts (one per logged step) or have a .history list, "
            f"got {type(history).__name__}."
        )
    if not entries:
        raise ValueError(f"{name} is empty: nothing has been logged yet.")
    bad = [i for i, e in enumerate(entries) if not isinstance(e, Mapping)]
    if bad:
        raise TypeError(f"{name} entries {bad[:5]} are not dicts.")
    return list(entries)


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def metric_keys(history: Any) -> list[str]:
    """The numeric keys of a history, in order of first appearance."""
    keys: dict[str, None] = {}
    for entry in _entries(history):
        keys.update({k: None for k, v in entry.items() if _is_number(v)})
    return list(keys)


def metric_series(history: Any, key: str, x: str = "step") -> tuple[np.ndarray, np.ndarray]:
    """(x values, metric values) of the entries that logged `key`; x is the entry index when
    an entry has no `x` key."""
    xs, ys = [], []
    for i, entry in enumerate(_entries(history)):
        value = entry.get(key)
        if _is_number(value):
            xs.append(entry[x] if _is_number(entry.get(x)) else i)
            ys.append(float(value))
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)


def smooth_ema(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential moving average with bias correction (as TensorBoard's smoothing slider)."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smooth={weight} is invalid: expected a weight in [0, 1).")
    out = np.empty(len(values))
    average = 0.0
    for i, value in enumerate(values):
        average = weight * average + (1 - weight) * value
        out[i] = average / (1 - weight ** (i + 1))  # early points are not pulled towards 0
    return out


def metric_group(key: str) -> str:
    """Which panel a key goes to: loss, accuracy, learning rate, throughput, or its own."""
    k = key.lower()
    if "loss" in k:
        return "loss"
    if "acc" in k:
        return "accuracy"
    if k in ("lr", "learning_rate") or k.endswith("_lr"):
        return "learning rate"
    if "per_s" in k or "throughput" in k:
        return "throughput"
    return key


def _draw_series(
    ax: Any, xs: np.ndarray, ys: np.ndarray, label: str, smooth: float, sparse: bool
) -> None:
    marker = "o" if sparse else None
    # Only dense (per-step) series are smoothed: averaging a few eval points just adds lag.
    if smooth > 0 and len(ys) > 1 and not sparse:
        (raw,) = ax.plot(xs, ys, alpha=0.25, linewidth=1)
        ax.plot(xs, smooth_ema(ys, smooth), color=raw.get_color(), label=label, marker=marker)
    else:
        ax.plot(xs, ys, label=label, marker=marker, markersize=4)


def plot_history(
    history: Any,
    keys: Sequence[str] | None = None,
    *,
    x: str = "step",
    smooth: float = 0.0,
) -> CourseFigure:
    """One panel per kind of metric (loss, accuracy, learning rate, throughput, others) over `x`.

    `keys` picks metrics (default: every numeric key except counters such as step/epoch).
    Evaluation metrics, logged on fewer steps, get markers. `smooth` in [0, 1) draws dense
    series as an EMA line over the faint raw curve.
    """
    entries = _entries(history)
    available = metric_keys(entries)
    if keys is None:
        keys = [k for k in available if k != x and k not in NOT_METRICS]
    else:
        missing = [k for k in keys if k not in available]
        if missing:
            raise ValueError(f"history has no numeric {missing}; it has {available}.")
    if not keys:
        raise ValueError(f"no metrics to plot; the history has numeric keys {available}.")
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(metric_group(key), []).append(key)
    order = [g for g in GROUP_ORDER if g in groups] + [g for g in groups if g not in GROUP_ORDER]
    fig = CourseFigure(figsize=(8, 2.4 * len(order) + 0.4), layout="constrained")
    axes = fig.subplots(len(order), 1, sharex=True, squeeze=False)[:, 0]
    for ax, group in zip(axes, order):
        for key in groups[group]:
            xs, ys = metric_series(entries, key, x)
            _draw_series(ax, xs, ys, key, smooth, sparse=len(xs) < len(entries) / 2)
        ax.set_ylabel(group)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if group == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    axes[-1].set_xlabel(x)
    return fig


def compare_runs(
    runs: Mapping[str, Any],
    metric: str | Sequence[str],
    *,
    x: str = "step",
    smooth: float = 0.0,
) -> CourseFigure:
    """One line per run for each metric (one panel per metric), final value in the legend.

    Used by the ablations: e.g. compare_runs({"NSP": h1, "SOP": h2}, "eval_mlm_loss").
    """
    if not runs:
        raise ValueError("no runs to compare: pass {name: history}.")
    metrics = [metric] if isinstance(metric, str) else list(metric)
    if not metrics:
        raise ValueError("name at least one metric to compare.")
    for name, history in runs.items():
        keys = metric_keys(_entries(history, f"run {name!r}"))
        missing = [m for m in metrics if m not in keys]
        if missing:
            raise ValueError(f"run {name!r} has no {missing}; it logged {keys}.")
    fig = CourseFigure(figsize=(6 * len(metrics), 3.6), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, key in zip(axes, metrics):
        for name, history in runs.items():
            xs, ys = metric_series(history, key, x)
            _draw_series(
                ax,
                xs,
                ys,
                f"{name} (final {ys[-1]:.4g})",
                smooth,
                sparse=len(xs) < len(_entries(history)) / 2,
            )
        ax.set_title(key)
        ax.set_xlabel(x)
        ax.set_ylabel(metric_group(key))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


# ---------------------------------------------------------------------------------------------
# Masking illustration
# ---------------------------------------------------------------------------------------------


def _as_ids(values: Any, name: str) -> np.ndarray:
    array = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1:
        raise ValueError(f"{name} should be one sequence of ids, got shape {array.shape}.")
    return array.astype(np.int64)


def classify_masking(
    original_ids: Any, masked_ids: Any, labels: Any, mask_token_id: int
) -> list[str]:
    """Per position: "not selected" (label -100), or for selected positions "masked" (now
    [MASK]), "kept" (unchanged) or "random" (replaced by another token).

    A random replacement that happens to draw the original token counts as "kept": the input
    cannot tell them apart.
    """
    original = _as_ids(original_ids, "original_ids")
    masked = _as_ids(masked_ids, "masked_ids")
    label = _as_ids(labels, "labels")
    if not len(original) == len(masked) == len(label):
        raise ValueError(
            f"lengths differ: original_ids {len(original)}, masked_ids {len(masked)}, "
            f"labels {len(label)}."
        )
    categories = []
    for o, m, lab in zip(original, masked, label):
        if lab == IGNORE_INDEX:
            categories.append("not selected")
        elif m == mask_token_id:
            categories.append("masked")
        elif m == o:
            categories.append("kept")
        else:
            categories.append("random")
    return categories


def _short(token: str, width: int = 10) -> str:
    return token if len(token) <= width else token[: width - 1] + "…"


def plot_masking(
    tokens: Sequence[str],
    original_ids: Any,
    masked_ids: Any,
    labels: Any,
    mask_token_id: int,
    *,
    masked_tokens: Sequence[str] | None = None,
    tokenizer: Any = None,
    per_row: int = 12,
) -> CourseFigure:
    """The sentence as coloured boxes: not selected / masked / random / kept.

    Under each changed token is what the model sees instead ("→ [MASK]", "→ dog"), taken from
    `masked_tokens` or `tokenizer.convert_ids_to_tokens(masked_ids)`. Each box is a Rectangle
    whose gid is its category; the legend counts each category.
    """
    categories = classify_masking(original_ids, masked_ids, labels, mask_token_id)
    if len(tokens) != len(categories):
        raise ValueError(f"{len(tokens)} tokens for {len(categories)} ids; pass one per id.")
    masked = _as_ids(masked_ids, "masked_ids")
    if masked_tokens is None and tokenizer is not None:
        # An id past the tokenizer's vocabulary (a model with a larger one) is drawn as "id N".
        size = getattr(tokenizer, "vocab_size", None)
        known = [i if size is None or 0 <= i < size else None for i in masked.tolist()]
        names = tokenizer.convert_ids_to_tokens([i for i in known if i is not None])
        masked_tokens = [None if i is None else names.pop(0) for i in known]
    if masked_tokens is not None and len(masked_tokens) != len(categories):
        raise ValueError(f"{len(masked_tokens)} masked_tokens for {len(categories)} ids.")
    if per_row < 1:
        raise ValueError(f"per_row={per_row} is invalid: expected at least 1.")
    n = len(tokens)
    rows = max(1, math.ceil(n / per_row))
    row_height = 1.5  # box 0.8 high, room under it for the replacement
    fig = CourseFigure(figsize=(0.95 * min(n, per_row) + 0.5, 0.75 * rows * row_height + 1.0))
    ax = fig.add_subplot()
    for i, (token, category) in enumerate(zip(tokens, categories)):
        col, row = i % per_row, i // per_row
        y = -row * row_height
        box = Rectangle(
            (col + 0.05, y),
            0.9,
            0.8,
            facecolor=MASK_COLOURS[category],
            edgecolor="#555555",
            linewidth=0.6,
            gid=category,
        )
        ax.add_patch(box)
        dark = category in ("masked", "random", "kept")
        ax.text(
            col + 0.5,
            y + 0.4,
            _short(token),
            ha="center",
            va="center",
            fontsize=8,
            color="white" if dark else "black",
        )
        if category in ("masked", "random"):
            seen = masked_tokens[i] if masked_tokens is not None else None
            if seen is None:  # no tokenizer, or an id it does not know
                seen = "[MASK]" if category == "masked" else f"id {masked[i]}"
            ax.text(
                col + 0.5,
                y - 0.25,
                "→ " + _short(str(seen), 9),
                ha="center",
                va="center",
                fontsize=7,
                color=MASK_COLOURS[category],
            )
    ax.set_xlim(0, min(n, per_row))
    ax.set_ylim(-(rows - 1) * row_height - 0.6, 0.9)
    ax.set_axis_off()
    counts = {c: categories.count(c) for c in MASK_CATEGORIES}
    selected = n - counts["not selected"]
    handles = [
        Patch(
            facecolor=MASK_COLOURS[c],
            edgecolor="#555555",
            label=f"{c} {counts[c]}"
            + (
                f" ({100 * counts[c] / selected:.0f}% of selected)"
                if c != "not selected" and selected
                else ""
            ),
        )
        for c in MASK_CATEGORIES
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    ax.set_title(
        f"{selected} of {n} tokens selected ({100 * selected / max(n, 1):.0f}%)", fontsize=10
    )
    return fig
