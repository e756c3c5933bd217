"""Offline attention explorer: token-to-token heatmaps, an all-heads grid and per-head summaries.

Built on matplotlib + ipywidgets only, with no JavaScript fetched from a CDN, so it works
offline, in every Jupyter frontend, and leaves a static PNG in saved notebooks (GitHub shows
that PNG; it does not run widgets).

Attention comes in as one of:
  * the `attentions` of a model output: a tuple with one [batch, heads, seq, seq] tensor per
    layer (or [heads, seq, seq] per layer, or one stacked [layers, heads, seq, seq] tensor);
  * named maps, e.g. DeBERTa's separate terms: a dict {"c2c": <per-layer tuple>, "c2p": ...}
    or a per-layer tuple of such dicts. Each name becomes a "term" the explorer can switch to.
Rows are queries (the token attending) and columns are keys (the token attended to).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from matplotlib.axes import Axes

from course_lib.viz._figure import CourseFigure, figure_to_png, png_base64, widgets_live

CLS_TOKENS = ("[CLS]", "<s>")  # BERT/ALBERT/DeBERTa spelling, RoBERTa spelling
SEP_TOKENS = ("[SEP]", "</s>")
SUMMARY_KEYS = ("cls", "sep", "self", "previous", "next", "entropy")
SUMMARY_TITLES = {
    "cls": "share to [CLS]",
    "sep": "share to [SEP]",
    "self": "share to itself",
    "previous": "share to previous token",
    "next": "share to next token",
    "entropy": "entropy (bits)",
}
VIEWS = ("head", "grid")


# ---------------------------------------------------------------------------------------------
# Normalising the many shapes attention arrives in
# ---------------------------------------------------------------------------------------------


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor; bfloat16 has no numpy dtype, so cast first
        return value.detach().cpu().float().numpy()
    return np.asarray(value, dtype=np.float32)


def _pick_batch(array: np.ndarray, batch_index: int, name: str) -> np.ndarray:
    if not -array.shape[0] <= batch_index < array.shape[0]:
        raise ValueError(
            f"batch_index={batch_index} is out of range: {name!r} holds a batch of "
            f"{array.shape[0]} sequences."
        )
    return array[batch_index]


def _stack_layers(value: Any, batch_index: int, name: str) -> np.ndarray:
    """One term's attention as a [layers, heads, query, key] float32 array."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{name!r} is an empty sequence; expected one tensor per layer.")
        layers = [_to_numpy(v) for v in value]
        dims = sorted({a.ndim for a in layers})
        if dims == [4]:
            layers = [_pick_batch(a, batch_index, name) for a in layers]
        elif dims != [3]:
            raise ValueError(
                f"{name!r}: each layer should be [batch, heads, seq, seq] or [heads, seq, seq], "
                f"got arrays with {dims} dimensions. Did you call the model with "
                f"output_attentions=True?"
            )
        shapes = sorted({a.shape for a in layers})
        if len(shapes) != 1:
            raise ValueError(f"{name!r}: layers have different shapes {shapes}.")
        return np.stack(layers)
    array = _to_numpy(value)
    if array.ndim == 4:
        return array
    if array.ndim == 5:  # [layers, batch, heads, seq, seq]
        return np.stack([_pick_batch(layer, batch_index, name) for layer in array])
    raise ValueError(
        f"{name!r}: expected a per-layer tuple of [batch, heads, seq, seq] tensors or one "
        f"[layers, heads, seq, seq] array, got shape {tuple(array.shape)}."
    )


def as_attention_maps(attentions: Any, batch_index: int = 0) -> dict[str, np.ndarray]:
    """Normalise any supported attention input to {term: array [layers, heads, query, key]}.

    Plain attention becomes the single term "attention"; named maps keep their names.
    """
    if attentions is None:
        raise ValueError(
            "no attention given (None): call the model with output_attentions=True and pass "
            "outputs.attentions."
        )
    if isinstance(attentions, Mapping):
        items = {str(name): value for name, value in attentions.items()}
    elif (
        isinstance(attentions, (list, tuple)) and attentions and isinstance(attentions[0], Mapping)
    ):
        names = list(attentions[0])
        for i, layer in enumerate(attentions):
            if not isinstance(layer, Mapping) or list(layer) != names:
                raise ValueError(
                    f"layer {i} has terms {list(layer) if isinstance(layer, Mapping) else layer!r}, "
                    f"layer 0 has {names}: every layer needs the same named maps."
                )
        items = {str(name): [layer[name] for layer in attentions] for name in names}
    else:
        items = {"attention": attentions}
    if not items:
        raise ValueError("the dict of attention maps is empty.")
    maps = {name: _stack_layers(value, batch_index, name) for name, value in items.items()}
    shapes = {name: m.shape for name, m in maps.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"all terms need the same [layers, heads, seq, seq] shape, got {shapes}.")
    shape = next(iter(shapes.values()))
    if shape[-1] != shape[-2]:
        raise ValueError(
            f"expected self-attention maps (query length == key length), got shape {shape}."
        )
    return maps


def _default_term(maps: Mapping[str, Any]) -> str:
    """The softmaxed attention when it is among the terms (DeBERTa's "probs"), else the first."""
    return next((name for name in ("attention", "probs") if name in maps), next(iter(maps)))


def _pick_term(maps: dict[str, np.ndarray], term: str | None) -> tuple[str, np.ndarray]:
    if term is None:
        term = _default_term(maps)
    if term not in maps:
        raise ValueError(f"unknown term {term!r}; this attention has terms {list(maps)}.")
    return term, maps[term]


def is_probability(attn: np.ndarray, atol: float = 1e-3) -> bool:
    """True when every row is a distribution (non-negative, sums to 1): softmaxed attention."""
    attn = np.asarray(attn)
    return bool((attn >= -1e-6).all() and np.allclose(attn.sum(-1), 1.0, atol=atol))


def _check_tokens(tokens: Sequence[str] | None, length: int, what: str = "attention") -> None:
    if tokens is not None and len(tokens) != length:
        raise ValueError(
            f"{what} covers {length} positions but {len(tokens)} tokens were given: "
            f"{list(tokens)[:12]}{' ...' if len(tokens) > 12 else ''}. Pass one token per position "
            f"(padding removed)."
        )


# ---------------------------------------------------------------------------------------------
# Per-head summaries
# ---------------------------------------------------------------------------------------------


def _positions(
    given: Sequence[int] | None, tokens: Sequence[str] | None, names: tuple[str, ...]
) -> list[int] | None:
    if given is not None:
        return [int(p) for p in given]
    if tokens is None:
        return None  # unknown: the share is reported as NaN rather than a misleading 0
    return [i for i, token in enumerate(tokens) if token in names]


def head_summaries(
    attentions: Any,
    tokens: Sequence[str] | None = None,
    *,
    cls_positions: Sequence[int] | None = None,
    sep_positions: Sequence[int] | None = None,
    term: str | None = None,
    batch_index: int = 0,
) -> list[dict[str, float]]:
    """What each head attends to, as in Clark et al. (2019) "What does BERT look at?".

    One dict per (layer, head), layer-major, with the average over query positions of the
    attention to [CLS] ("cls"), to [SEP] ("sep"), to itself ("self"), to the previous and next
    token ("previous" over queries 1.., "next" over queries ..n-2), and the entropy of the
    attention row in bits ("entropy"; uniform over n tokens gives log2 n). [CLS]/[SEP] are found
    in `tokens` ([CLS]/<s>, [SEP]/</s>) or given as positions; when neither is known they are NaN.
    """
    maps = as_attention_maps(attentions, batch_index)
    name, probs = _pick_term(maps, term)
    if not is_probability(probs):
        sums = probs.sum(-1)
        raise ValueError(
            f"head summaries need attention probabilities (rows >= 0 summing to 1), but term "
            f"{name!r} has row sums in [{sums.min():.3g}, {sums.max():.3g}] and minimum "
            f"{probs.min():.3g}. Pass the softmaxed attention (or term=... naming it)."
        )
    n_layers, n_heads, n, _ = probs.shape
    _check_tokens(tokens, n)
    cls = _positions(cls_positions, tokens, CLS_TOKENS)
    sep = _positions(sep_positions, tokens, SEP_TOKENS)
    for label, pos in (("cls_positions", cls), ("sep_positions", sep)):
        if pos is not None and any(not 0 <= p < n for p in pos):
            raise ValueError(f"{label}={pos} has positions outside the sequence of length {n}.")

    def share_to(pos: list[int] | None) -> np.ndarray:
        if pos is None:
            return np.full((n_layers, n_heads), np.nan)
        return probs[..., pos].sum(-1).mean(-1)

    def diagonal_mean(offset: int) -> np.ndarray:
        if n < 2 and offset:
            return np.full((n_layers, n_heads), np.nan)
        return np.diagonal(probs, offset=offset, axis1=-2, axis2=-1).mean(-1)

    safe = np.where(probs > 0, probs, 1.0)  # 0 * log 0 counts as 0
    entropy = 0.0 - (probs * np.log2(safe)).sum(-1).mean(-1)  # 0.0 - x: no "-0.00" in tables
    metrics = {
        "cls": share_to(cls),
        "sep": share_to(sep),
        "self": diagonal_mean(0),
        "previous": diagonal_mean(-1),  # entry [q, q-1]: query q looking one token back
        "next": diagonal_mean(1),
        "entropy": entropy,
    }
    return [
        {"layer": layer, "head": head, **{k: float(v[layer, head]) for k, v in metrics.items()}}
        for layer in range(n_layers)
        for head in range(n_heads)
    ]


def format_head_summaries(summaries: Sequence[Mapping[str, float]], digits: int = 2) -> str:
    """The summaries as a fixed-width text table, one line per head."""
    header = f"{'layer':>5} {'head':>4} " + " ".join(f"{k:>8}" for k in SUMMARY_KEYS)
    lines = [header]
    for row in summaries:
        values = " ".join(f"{row[k]:>8.{digits}f}" for k in SUMMARY_KEYS)
        lines.append(f"{int(row['layer']):>5} {int(row['head']):>4} {values}")
    return "\n".join(lines)


def plot_head_summaries(
    summaries: Sequence[Mapping[str, float]], keys: Sequence[str] = SUMMARY_KEYS
) -> CourseFigure:
    """One layers x heads panel per summary key (three per row), values written in the cells
    when they fit."""
    if not summaries:
        raise ValueError("no summaries to plot; compute them with head_summaries(attentions).")
    unknown = [k for k in keys if k not in SUMMARY_KEYS]
    if unknown:
        raise ValueError(f"unknown summary keys {unknown}; choose from {SUMMARY_KEYS}.")
    n_layers = 1 + max(int(row["layer"]) for row in summaries)
    n_heads = 1 + max(int(row["head"]) for row in summaries)
    # At most three panels per row: six in a row shrink each to an unreadable strip.
    n_cols = min(3, len(keys))
    n_rows = -(-len(keys) // n_cols)
    fig = CourseFigure(
        figsize=(3.6 * n_cols, n_rows * (0.45 * n_layers + 1.9)), layout="constrained"
    )
    grid_axes = fig.subplots(n_rows, n_cols, squeeze=False).ravel()
    for ax in grid_axes[len(keys) :]:
        fig.delaxes(ax)
    for ax, key in zip(grid_axes, keys):
        grid = np.full((n_layers, n_heads), np.nan)
        for row in summaries:
            grid[int(row["layer"]), int(row["head"])] = row[key]
        # Shares are in [0, 1]; entropy is scaled to its largest value.
        vmax = 1.0
        if key == "entropy" and np.isfinite(grid).any():
            vmax = float(np.nanmax(grid)) or 1.0
        ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
        ax.set_title(SUMMARY_TITLES[key], fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(n_layers))
        if n_layers * n_heads <= 64:
            for (layer, head), value in np.ndenumerate(grid):
                ax.text(
                    head,
                    layer,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if value < 0.6 * vmax else "black",
                )
    return fig


# ---------------------------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------------------------


def _colour_limits(
    attn: np.ndarray, vmin: float | None, vmax: float | None
) -> tuple[str, float, float]:
    """Sequential colours for non-negative maps, diverging ones centred on 0 for raw scores."""
    if (attn >= 0).all():
        top = float(attn.max()) if attn.size else 1.0
        return "viridis", 0.0 if vmin is None else vmin, (top or 1.0) if vmax is None else vmax
    bound = float(np.abs(attn).max()) or 1.0
    return "RdBu_r", -bound if vmin is None else vmin, bound if vmax is None else vmax


def attention_heatmap(
    attn: Any,
    tokens: Sequence[str] | None = None,
    ax: Axes | None = None,
    *,
    key_tokens: Sequence[str] | None = None,
    title: str | None = None,
    sentence_b_start: int | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw one head's [query, key] attention matrix with tokens on both axes; returns the Axes.

    Without `ax` a new figure is made (reach it as `ax.figure`). A line marks where sentence B
    starts. Maps with negative entries (raw scores) get a diverging colour map centred on 0.
    """
    attn = _to_numpy(attn)
    if attn.ndim != 2:
        raise ValueError(
            f"attention_heatmap draws one head: expected a [query, key] matrix, got shape "
            f"{attn.shape}. Select one, e.g. outputs.attentions[layer][0, head]."
        )
    n_query, n_key = attn.shape
    _check_tokens(tokens, n_query, "the query axis")
    key_tokens = tokens if key_tokens is None else key_tokens
    _check_tokens(key_tokens, n_key, "the key axis")
    if ax is None:
        side = min(12.0, max(4.0, 0.22 * max(n_query, n_key) + 2.0))
        fig = CourseFigure(figsize=(side + (1.0 if colorbar else 0.0), side), layout="constrained")
        ax = fig.add_subplot()
    cmap, lo, hi = _colour_limits(attn, vmin, vmax)
    image = ax.imshow(attn, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
    fontsize = max(4.0, min(10.0, 320.0 / max(n_query, n_key, 1)))
    if tokens is not None:
        ax.set_yticks(range(n_query), list(tokens), fontsize=fontsize)
    if key_tokens is not None:
        ax.set_xticks(range(n_key), list(key_tokens), fontsize=fontsize, rotation=90)
    # Keys on top, read like the matrix: row = the token that attends.
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if sentence_b_start is not None and 0 < sentence_b_start < max(n_query, n_key):
        ax.axhline(sentence_b_start - 0.5, color="white", linewidth=1.2)
        ax.axvline(sentence_b_start - 0.5, color="white", linewidth=1.2)
    if title:
        ax.set_title(title, fontsize=10)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def _check_indices(indices: Sequence[int] | None, size: int, what: str) -> list[int]:
    if indices is None:
        return list(range(size))
    indices = [int(i) for i in indices]
    bad = [i for i in indices if not 0 <= i < size]
    if bad or not indices:
        raise ValueError(f"{what}={indices} invalid: the model has {size} {what} (0..{size - 1}).")
    return indices


def attention_grid(
    attentions: Any,
    tokens: Sequence[str] | None = None,
    *,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    term: str | None = None,
    batch_index: int = 0,
    cell_size: float | None = None,
) -> CourseFigure:
    """All heads at a glance (like bertviz's model_view): one small heatmap per (layer, head).

    Rows are layers and columns heads; each cell is scaled to its own maximum so weak heads stay
    visible. Each Axes is labelled "layer L head H" (`ax.get_label()`). Tokens label the outer
    axes when there are at most 16. `cell_size` (inches) defaults to fit about 14 inches.
    """
    maps = as_attention_maps(attentions, batch_index)
    name, attn = _pick_term(maps, term)
    n_layers, n_heads, n, _ = attn.shape
    _check_tokens(tokens, n)
    layers = _check_indices(layers, n_layers, "layers")
    heads = _check_indices(heads, n_heads, "heads")
    label_tokens = tokens is not None and n <= 16
    if cell_size is None:
        cell_size = max(0.7, min(1.6, 14.0 / max(len(layers), len(heads))))
    # Margins in inches, so that big grids do not waste a fixed fraction of the page.
    left, bottom, top = (1.0, 0.9, 0.6) if label_tokens else (0.4, 0.1, 0.6)
    width = cell_size * len(heads) + left + 0.1
    height = cell_size * len(layers) + bottom + top
    fig = CourseFigure(figsize=(width, height))
    axes = fig.subplots(len(layers), len(heads), squeeze=False)
    for row, layer in enumerate(layers):
        for col, head in enumerate(heads):
            ax = axes[row, col]
            cell = attn[layer, head]
            cmap, lo, hi = _colour_limits(cell, None, None)
            ax.imshow(cell, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
            ax.set_label(f"layer {layer} head {head}")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f"head {head}", fontsize=9)
            if col == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
                if label_tokens:
                    ax.set_yticks(range(n), list(tokens), fontsize=6)
            if row == len(layers) - 1 and label_tokens:
                ax.set_xticks(range(n), list(tokens), fontsize=6, rotation=90)
    title = "attention" if name == "attention" else f"attention term {name!r}"
    fig.suptitle(f"{title}: rows = query, columns = key", fontsize=10)
    fig.subplots_adjust(
        left=left / width,
        right=1 - 0.1 / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=0.1,
        hspace=0.1,
    )
    return fig


# ---------------------------------------------------------------------------------------------
# Running a model
# ---------------------------------------------------------------------------------------------


class ModelAttention(NamedTuple):
    """Attention of one input, padding removed: {term: [layers, heads, seq, seq]} and tokens."""

    maps: dict[str, np.ndarray]
    tokens: list[str]
    sentence_b_start: int | None


def _encode(inputs: Any, tokenizer: Any) -> dict[str, Any]:
    import torch

    if isinstance(inputs, str) or (
        isinstance(inputs, tuple) and len(inputs) == 2 and all(isinstance(t, str) for t in inputs)
    ):
        if tokenizer is None:
            raise ValueError(
                "text input needs a tokenizer: pass tokenizer=..., or pass input_ids and tokens."
            )
        if isinstance(inputs, str):
            encoded = tokenizer.encode(inputs)
        else:
            encoded = tokenizer.encode(inputs[0], text_pair=inputs[1])
    else:
        encoded = inputs
    if not isinstance(encoded, Mapping):  # a bare list / tensor of ids
        encoded = {"input_ids": encoded}
    if encoded.get("input_ids") is None:
        raise ValueError(f"inputs have no 'input_ids' (keys: {sorted(encoded)}).")
    batch: dict[str, Any] = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if encoded.get(key) is not None:
            tensor = torch.as_tensor(encoded[key]).long()
            batch[key] = tensor[None] if tensor.ndim == 1 else tensor
    return batch


def compute_attentions(
    model: Any,
    inputs: Any,
    tokenizer: Any = None,
    *,
    tokens: Sequence[str] | None = None,
    batch_index: int = 0,
    terms: bool = False,
) -> ModelAttention:
    """Run `model` once (eval mode, no grad) with output_attentions=True on one input.

    `inputs` is a text, a (text_a, text_b) pair (both need `tokenizer`), a dict with input_ids
    (and optionally attention_mask, token_type_ids) or a list/tensor of ids. Padding positions
    of sequence `batch_index` are dropped; sentence B starts at the first token_type_id of 1.
    `terms=True` (DeBERTa) takes the separate score terms c2c / c2p / p2c and the probabilities
    "probs" from the model's `attention_terms(...)` (or its backbone's).
    """
    import torch

    batch = _encode(inputs, tokenizer)
    n_sequences = batch["input_ids"].shape[0]
    if not -n_sequences <= batch_index < n_sequences:
        raise ValueError(f"batch_index={batch_index} is out of range for {n_sequences} sequences.")
    parameter = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    if parameter is not None:
        batch = {k: v.to(parameter.device) for k, v in batch.items()}
    source = None
    if terms:
        source = getattr(model, "attention_terms", None) or getattr(
            getattr(model, "backbone", None), "attention_terms", None
        )
        if source is None:
            raise ValueError(
                f"terms=True needs a model with attention_terms(...) (DeBERTa); "
                f"{type(model).__name__} has none."
            )
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()  # dropout off: the picture should not change between two calls
    try:
        with torch.no_grad():
            if source is not None:
                attentions = source(**batch)
            else:
                outputs = model(**batch, output_attentions=True)
                attentions = (
                    outputs.get("attentions")
                    if isinstance(outputs, Mapping)
                    else getattr(outputs, "attentions", None)
                )
    finally:
        if was_training:
            model.train()
    if attentions is None:
        raise ValueError(
            f"{type(model).__name__} returned no attentions; it must accept output_attentions=True "
            "and fill `.attentions`."
        )
    maps = as_attention_maps(attentions, batch_index)
    ids = batch["input_ids"][batch_index].cpu()
    keep = np.arange(len(ids))
    if "attention_mask" in batch:
        keep = np.flatnonzero(batch["attention_mask"][batch_index].cpu().numpy())
    maps = {name: m[:, :, keep][:, :, :, keep] for name, m in maps.items()}
    if tokens is not None:
        tokens = list(tokens)
        if len(tokens) == len(ids) and len(keep) != len(ids):
            tokens = [tokens[i] for i in keep]
        _check_tokens(tokens, len(keep), "the input (padding removed)")
    elif tokenizer is not None:
        tokens = list(tokenizer.convert_ids_to_tokens(ids[keep].tolist()))
    else:
        tokens = [str(i) for i in ids[keep].tolist()]
    sentence_b_start = None
    if "token_type_ids" in batch:
        segment = batch["token_type_ids"][batch_index].cpu().numpy()[keep]
        second = np.flatnonzero(segment)
        sentence_b_start = int(second[0]) if len(second) else None
    return ModelAttention(maps, tokens, sentence_b_start)


# ---------------------------------------------------------------------------------------------
# The explorer
# ---------------------------------------------------------------------------------------------


class AttentionExplorer:
    """Layer / head / term selectors over a heatmap (one head) or a grid (all heads).

    Displayed in a Jupyter kernel, it shows ipywidgets controls and below them the figure as an
    ordinary PNG output that the controls redraw; anywhere the widgets do not run (GitHub,
    nbconvert HTML, a notebook reopened without a kernel) the PNG of the last state still shows.
    `interactive=False` (or COURSE_LIB_STATIC_VIZ=1) shows only the PNG. `figure()` returns a
    Matplotlib figure of the current view, `widget()` an embeddable panel.
    """

    def __init__(
        self,
        attentions: Any,
        tokens: Sequence[str] | None = None,
        *,
        layer: int = 0,
        head: int = 0,
        term: str | None = None,
        view: str = "head",
        sentence_b_start: int | None = None,
        interactive: bool | None = None,
        batch_index: int = 0,
    ) -> None:
        self.maps = as_attention_maps(attentions, batch_index)
        self.terms = list(self.maps)
        shape = next(iter(self.maps.values())).shape
        self.num_layers, self.num_heads, self.seq_len, _ = shape
        _check_tokens(tokens, self.seq_len)
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(self.seq_len)]
        self._token_source = tokens
        self.sentence_b_start = sentence_b_start
        self.interactive = widgets_live() if interactive is None else bool(interactive)
        self.layer, self.head, self.term, self.view = 0, 0, _default_term(self.maps), "head"
        self._png_cache: dict[tuple, bytes] = {}
        self._widget: Any = None
        self._controls_box: Any = None
        self._controls: dict[str, Any] = {}
        self._handles: list[Any] = []  # display handles of the figure outputs shown so far
        self.image: Any = None
        self._syncing = False
        self.select(layer=layer, head=head, term=term, view=view)

    # -- state -----------------------------------------------------------------------------
    def select(
        self,
        layer: int | None = None,
        head: int | None = None,
        term: str | None = None,
        view: str | None = None,
    ) -> None:
        """Change what is shown; the widget (if built) follows."""
        if layer is not None:
            _check_indices([layer], self.num_layers, "layers")
            self.layer = int(layer)
        if head is not None:
            _check_indices([head], self.num_heads, "heads")
            self.head = int(head)
        if term is not None:
            self.term = _pick_term(self.maps, term)[0]
        if view is not None:
            if view not in VIEWS:
                raise ValueError(f"view={view!r} is invalid; choose one of {VIEWS}.")
            self.view = view
        if self._controls or self._handles or self.image is not None:
            self._refresh()

    def summary(self) -> dict[str, float] | None:
        """Summary of the selected head, or None when the selected term is not probabilities."""
        attn = self.maps[self.term][self.layer, self.head]
        if not is_probability(attn):
            return None
        return head_summaries({self.term: attn[None, None]}, self._token_source)[0] | {
            "layer": self.layer,
            "head": self.head,
        }

    def _summary_line(self) -> str:
        summary = self.summary()
        if summary is None:
            return f"term {self.term!r} holds scores, not probabilities: no summary"
        return "  ".join(f"{k} {summary[k]:.2f}" for k in SUMMARY_KEYS if np.isfinite(summary[k]))

    # -- static rendering ------------------------------------------------------------------
    def figure(self) -> CourseFigure:
        """A new figure of the current view (save it with `fig.savefig(...)`)."""
        if self.view == "grid":
            return attention_grid(self.maps, self._token_source, term=self.term)
        term = "" if self.term == "attention" else f", term {self.term!r}"
        ax = attention_heatmap(
            self.maps[self.term][self.layer, self.head],
            self.tokens,
            title=f"layer {self.layer}, head {self.head}{term}\n{self._summary_line()}",
            sentence_b_start=self.sentence_b_start,
        )
        return ax.figure

    def png(self) -> bytes:
        """PNG of the current view (cached; the grid does not depend on layer/head)."""
        key = (
            ("grid", self.term)
            if self.view == "grid"
            else ("head", self.term, self.layer, self.head)
        )
        if key not in self._png_cache:
            self._png_cache[key] = figure_to_png(self.figure())
        return self._png_cache[key]

    # -- widgets ---------------------------------------------------------------------------
    def controls(self) -> Any:
        """The selectors (an ipywidgets HBox, built on first use); they drive every view."""
        if self._controls_box is None:
            self._controls_box = self._build_controls()
        return self._controls_box

    def widget(self) -> Any:
        """Controls above an Image widget, to embed the explorer in your own layout."""
        import ipywidgets as widgets

        if self._widget is None:
            self.image = widgets.Image(format="png", value=self.png())
            self._widget = widgets.VBox([self.controls(), self.image])
        return self._widget

    def _build_controls(self) -> Any:
        import ipywidgets as widgets

        c = self._controls
        c["layer"] = widgets.IntSlider(
            value=self.layer,
            min=0,
            max=self.num_layers - 1,
            description="layer",
            continuous_update=False,
        )
        c["head"] = widgets.IntSlider(
            value=self.head,
            min=0,
            max=self.num_heads - 1,
            description="head",
            continuous_update=False,
        )
        c["view"] = widgets.ToggleButtons(
            options=[("one head", "head"), ("all heads", "grid")], value=self.view
        )
        c["term"] = widgets.Dropdown(options=self.terms, value=self.term, description="term")
        shown = [c["layer"], c["head"], c["view"]] + ([c["term"]] if len(self.terms) > 1 else [])
        for control in shown:
            control.observe(self._on_control, names="value")
        return widgets.HBox(shown)

    def _on_control(self, change: Any) -> None:
        if self._syncing:
            return
        c = self._controls
        self.select(
            layer=c["layer"].value, head=c["head"].value, term=c["term"].value, view=c["view"].value
        )

    def _refresh(self) -> None:
        """Bring the controls, the Image widget and every displayed figure to the current state."""
        c = self._controls
        if c:
            self._syncing = True  # programmatic select(): move the controls without re-entering
            try:
                c["layer"].value, c["head"].value = self.layer, self.head
                c["term"].value, c["view"].value = self.term, self.view
            finally:
                self._syncing = False
        png = self.png()
        if self.image is not None:
            self.image.value = png
        for handle in self._handles:
            handle.update(self._png_bundle(png), raw=True)

    # -- display ---------------------------------------------------------------------------
    def _png_bundle(self, png: bytes | None = None) -> dict[str, str]:
        return {"image/png": png_base64(png or self.png()), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        """Controls as a widget and, separately, the figure as a plain PNG output they update.

        Keeping the figure out of the widget means every renderer shows it: GitHub, nbconvert
        HTML (which, when widget state was saved, renders widgets from a CDN instead of any
        fallback), and a notebook reopened without a kernel.
        """
        from IPython.display import display

        if self.interactive:
            bundle = self.controls()._repr_mimebundle_()
            bundle["text/plain"] = "(attention explorer controls: run the cell to use them)"
            display(bundle, raw=True)
            handle = display(self._png_bundle(), raw=True, display_id=True)
            if handle is not None:  # None outside IPython
                self._handles.append(handle)
        else:
            display(self._png_bundle(), raw=True)

    def __repr__(self) -> str:
        return (
            f"AttentionExplorer({self.num_layers} layers x {self.num_heads} heads, "
            f"{self.seq_len} tokens, terms={self.terms}, layer={self.layer}, head={self.head}, "
            f"term={self.term!r}, view={self.view!r})"
        )


def show_attention(
    model: Any,
    inputs: Any,
    tokenizer: Any = None,
    *,
    tokens: Sequence[str] | None = None,
    layer: int = 0,
    head: int = 0,
    term: str | None = None,
    view: str = "head",
    interactive: bool | None = None,
    sentence_b_start: int | None = None,
    batch_index: int = 0,
    terms: bool = False,
) -> AttentionExplorer:
    """Run `model` on `inputs` and return an offline explorer of its attention.

    Put it last in a cell (or call `display(...)` on it). Widgets when a Jupyter kernel is live,
    a static PNG otherwise; `interactive=False` forces the PNG. See `compute_attentions` for
    the accepted inputs. `sentence_b_start` defaults to the one read from token_type_ids.
    `terms=True` adds DeBERTa's c2c / c2p / p2c score maps next to the probabilities.
    """
    result = compute_attentions(
        model, inputs, tokenizer, tokens=tokens, batch_index=batch_index, terms=terms
    )
    return AttentionExplorer(
        result.maps,
        result.tokens,
        layer=layer,
        head=head,
        term=term,
        view=view,
        interactive=interactive,
        sentence_b_start=result.sentence_b_start if sentence_b_start is None else sentence_b_start,
    )
