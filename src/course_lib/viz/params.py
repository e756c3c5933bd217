"""Where the parameters are: an explorer widget and a stacked-bar breakdown.

Counts come from `course_lib.count_parameters` (closed-form and exact), so the widget is
instant even for BERT-large. The widget offers every family of `config.CONFIG_CLASSES`;
`WIDGET_OPTIONS` says which fields a family edits where the default does not fit.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from course_lib.config import CONFIG_CLASSES, SHARING, BertConfig
from course_lib.counting import COMPONENTS, TASKS, count_parameters
from course_lib.models import MODEL_CLASSES
from course_lib.viz._figure import CourseFigure, figure_to_png, png_base64

COMPONENT_COLOURS = {
    "embeddings": "#4c72b0",
    "attention": "#dd8452",
    "feed_forward": "#55a868",
    "layer_norm": "#c44e52",
    "pooler": "#8172b3",
    "heads": "#937860",
}
# Size fields the widget offers, in display order, when the family's config has them.
FIELD_LABELS = {
    "num_hidden_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "intermediate_size": "FFN size",
    "vocab_size": "vocabulary",
    "max_position_embeddings": "max positions",
    "type_vocab_size": "segment types",
    "embedding_size": "embedding E",
    "num_hidden_groups": "hidden groups",
    "inner_group_num": "inner groups",
    "num_labels": "labels",
}
# DeBERTa's switches that change the count (relative table size and sharing, EMD, ...).
DEBERTA_FIELDS = (
    "max_relative_positions",
    "position_buckets",
    "share_att_key",
    "position_biased_input",
    "norm_rel_ebd",
    "use_emd",
)
# ModernBERT's bias switches (all off as released; each adds its biases to the count).
MODERNBERT_BIASES = ("norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias")
CUSTOM = "(custom)"


@dataclass(frozen=True)
class ParameterFamily:
    """How the explorer shows one family: its config class and which fields it edits, how."""

    config_class: type
    # The config fields to edit; () means the size fields of FIELD_LABELS the config has, its
    # bool switches (pre_layer_norm, ...: they can change the count), then choices and sliders.
    only_fields: tuple[str, ...] = ()
    # str fields shown as a dropdown (ALBERT's sharing); int fields shown as a slider over
    # (min, max, step) (ALBERT's embedding size E).
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    sliders: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def fields(self) -> tuple[str, ...]:
        if self.only_fields:
            return self.only_fields
        defaults = {f.name: f.default for f in dataclasses.fields(self.config_class)}
        fields = [f for f in FIELD_LABELS if f in defaults]
        fields += [f for f, value in defaults.items() if isinstance(value, bool)]
        return tuple(dict.fromkeys([*fields, *self.choices, *self.sliders]))

    @property
    def model_classes(self) -> tuple[str, ...]:
        """The family's models in TASKS order, e.g. ('RobertaModel', 'RobertaForMaskedLM', ...)."""
        prefix = self.config_class.__name__.removesuffix("Config")
        return tuple(prefix + task for task in TASKS if prefix + task in MODEL_CLASSES)

    @property
    def presets(self) -> dict[str, Any]:
        return dict(getattr(self.config_class, "presets", {}) or {})

    def config_from_preset(self, preset: str) -> Any:
        return self.config_class.from_preset(preset)


# What a family's widget changes from the default (the size fields of FIELD_LABELS it has and its
# bool switches); a family not listed here shows the default.
WIDGET_OPTIONS: dict[str, dict[str, Any]] = {
    # E is the point of ALBERT's factorization, so it gets a slider: 16..1024 covers the paper's
    # Table 3 (E = 64, 128, 256, 768) and every preset (E = 128).
    "albert": dict(choices={"sharing": SHARING}, sliders={"embedding_size": (16, 1024, 16)}),
    "deberta": dict(
        only_fields=(
            *[f for f in FIELD_LABELS if f in BertConfig.__dataclass_fields__],
            *DEBERTA_FIELDS,
        ),
        choices={"norm_rel_ebd": ("layer_norm", "none")},
    ),
    # ELECTRA's E: 128 for small, 768 / 1024 (= H, no projection) for base / large.
    "electra": dict(sliders={"embedding_size": (16, 1024, 16)}),
    # Only the fields that change the count (and the heads, which must divide H): the window,
    # the rotary bases, max positions (no table) and unpadding do not.
    "modernbert": dict(
        only_fields=(
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "vocab_size",
            *MODERNBERT_BIASES,
        ),
    ),
}
# The families the explorer offers: every family config, in CONFIG_CLASSES' (dropdown) order.
PARAMETER_FAMILIES: dict[str, ParameterFamily] = {
    name: ParameterFamily(config_class, **WIDGET_OPTIONS.get(name, {}))
    for name, config_class in CONFIG_CLASSES.items()
}


def format_count(n: float) -> str:
    """110106428 -> '110.1M', 4386 -> '4.4K'."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:.1f}{suffix}"
    return f"{n:.0f}"


def _components(counts: Mapping[str, int], name: str) -> dict[str, int]:
    """Known components in order, then any extra ones a family reports; checked against total."""
    if "total" not in counts:
        raise ValueError(f"{name!r}: counts need a 'total' key, got {sorted(counts)}.")
    parts = {k: int(counts[k]) for k in COMPONENTS if k in counts}
    parts.update({k: int(v) for k, v in counts.items() if k not in parts and k != "total"})
    if sum(parts.values()) != int(counts["total"]):
        raise ValueError(
            f"{name!r}: components add up to {sum(parts.values()):,} but total is "
            f"{int(counts['total']):,}; the breakdown is inconsistent."
        )
    return parts


def plot_parameter_breakdown(
    breakdowns: Mapping[str, Mapping[str, int]],
    *,
    normalize: bool = False,
    ax: Axes | None = None,
) -> CourseFigure:
    """One horizontal stacked bar per model (components of `count_parameters`), total at the end.

    `normalize=True` shows shares in percent, to compare models of very different sizes.
    """
    if not breakdowns:
        raise ValueError("nothing to plot: pass {name: count_parameters(config)}.")
    parts = {name: _components(counts, name) for name, counts in breakdowns.items()}
    names = list(parts)
    keys = list(dict.fromkeys(k for p in parts.values() for k in p))
    if ax is None:
        fig = CourseFigure(figsize=(9, 0.6 * len(names) + 1.6), layout="constrained")
        ax = fig.add_subplot()
    fig = ax.figure
    left = np.zeros(len(names))
    extra_colours = iter(["#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"] * 4)
    for key in keys:
        values = np.array([parts[n].get(key, 0) for n in names], dtype=float)
        totals = np.array([sum(parts[n].values()) for n in names], dtype=float)
        widths = 100 * values / np.where(totals > 0, totals, 1) if normalize else values
        colour = COMPONENT_COLOURS.get(key) or next(extra_colours)
        ax.barh(names, widths, left=left, color=colour, label=key.replace("_", " "))
        left += widths
    for i, name in enumerate(names):
        total = sum(parts[name].values())
        ax.text(left[i], i, f"  {format_count(total)} ({total:,})", va="center", fontsize=9)
    ax.invert_yaxis()  # first model on top
    ax.set_xlim(0, left.max() * 1.35 if left.max() > 0 else 1)
    if normalize:
        ax.set_xlabel("share of parameters (%)")
        ax.set_xticks(range(0, 101, 20))
    else:
        ax.set_xlabel("parameters")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_count(x)))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("parameters by component")
    return fig


def _field_widget(family: ParameterFamily, name: str, value: Any) -> Any:
    common = {  # every control: its label, and room for it
        "description": FIELD_LABELS.get(name, name.replace("_", " ")),
        "style": {"description_width": "110px"},
    }
    if name in family.choices:
        return widgets.Dropdown(options=family.choices[name], value=value, **common)
    if isinstance(value, bool):
        return widgets.Checkbox(value=value, **common)
    if name in family.sliders:
        low, high, step = family.sliders[name]
        value = min(max(value, low), high)
        # Redraw on release only: every count redraws the chart.
        return widgets.IntSlider(
            value=value, min=low, max=high, step=step, continuous_update=False, **common
        )
    if isinstance(value, int):
        # Unbounded: a bounded box would silently clamp values such as DeBERTa's -1 ("same
        # as max positions"); the config's own validation reports bad values instead.
        return widgets.IntText(value=value, **common)
    return widgets.Text(value=str(value), **common)


class ParameterExplorer(widgets.VBox):
    """Family, model class, preset and size fields -> stacked bar and exact table."""

    def __init__(
        self, family: str = "bert", model_class: str | None = None, preset: str | None = None
    ) -> None:
        super().__init__()
        self.family_select = widgets.Dropdown(
            options=list(PARAMETER_FAMILIES), description="family"
        )
        self.model_class_select = widgets.Dropdown(description="model")
        self.preset_select = widgets.Dropdown(description="preset")
        self.fields: dict[str, Any] = {}
        self.fields_box = widgets.GridBox(
            layout=widgets.Layout(grid_template_columns="repeat(3, 300px)")
        )
        self.image = widgets.Image(format="png")
        self.table = widgets.HTML()
        self.status = widgets.HTML()
        self.config: Any = None
        self.counts: dict[str, int] | None = None
        self._busy = False
        self._controls_panel: Any = None
        self._handles: list[Any] = []  # display handles of the chart outputs shown so far
        self.children = [
            widgets.HBox([self.family_select, self.model_class_select, self.preset_select]),
            self.fields_box,
            self.status,
            widgets.HBox([self.image, self.table]),
        ]
        self.set_family(family, model_class=model_class, preset=preset)
        self.family_select.observe(lambda c: self.set_family(c["new"]), names="value")
        self.model_class_select.observe(lambda c: self.recompute(), names="value")
        self.preset_select.observe(self._on_preset, names="value")

    @property
    def family(self) -> ParameterFamily:
        return PARAMETER_FAMILIES[self.family_select.value]

    def set_family(
        self, name: str, model_class: str | None = None, preset: str | None = None
    ) -> None:
        """Switch family: rebuild the fields from its config, pick a preset, recount."""
        if name not in PARAMETER_FAMILIES:
            raise ValueError(f"unknown family {name!r}; choose from {list(PARAMETER_FAMILIES)}.")
        family = PARAMETER_FAMILIES[name]
        presets = list(family.presets)
        if preset is not None and preset not in presets:
            raise ValueError(f"unknown preset {preset!r} for {name}; choose from {presets}.")
        if model_class is not None and model_class not in family.model_classes:
            raise ValueError(
                f"unknown model class {model_class!r} for {name}; choose from "
                f"{list(family.model_classes)}."
            )
        self._busy = True  # several controls change; count once at the end
        try:
            self.family_select.value = name
            self.model_class_select.options = family.model_classes
            self.model_class_select.value = model_class or family.model_classes[0]
            self.preset_select.options = [CUSTOM, *presets]
            preset = preset or (presets[0] if presets else None)
            config = family.config_from_preset(preset) if preset else family.config_class()
            self.fields = {f: _field_widget(family, f, getattr(config, f)) for f in family.fields}
            for control in self.fields.values():
                control.observe(self._on_field, names="value")
            self.fields_box.children = list(self.fields.values())
            self.preset_select.value = preset or CUSTOM
        finally:
            self._busy = False
        self.recompute()

    def _on_preset(self, change: Any) -> None:
        if self._busy or change["new"] == CUSTOM:
            return
        config = self.family.config_from_preset(change["new"])
        self._busy = True
        try:
            for name, control in self.fields.items():
                control.value = getattr(config, name)
        finally:
            self._busy = False
        self.recompute()

    def _on_field(self, change: Any) -> None:
        if self._busy:
            return
        self._busy = True  # the fields no longer match a preset (unless they do)
        try:
            self.preset_select.value = self._matching_preset()
        finally:
            self._busy = False
        self.recompute()

    def _matching_preset(self) -> str:
        for preset in self.family.presets:
            config = self.family.config_from_preset(preset)
            if all(getattr(config, f) == c.value for f, c in self.fields.items()):
                return preset
        return CUSTOM

    def values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.fields.items()}

    def recompute(self) -> None:
        """Build the config from the fields and recount; show the error if it is invalid."""
        if self._busy:
            return
        family = self.family
        try:
            config = family.config_class(**self.values())
            counts = dict(count_parameters(config, model_class=self.model_class_select.value))
            label = self.model_class_select.value
            png = figure_to_png(plot_parameter_breakdown({label: counts}))
        except (ValueError, TypeError) as error:
            self.status.value = (
                f"<span style='color:#b00'>{html.escape(str(error))}</span> "
                "(the chart still shows the last valid configuration)"
            )
            return
        self.config, self.counts = config, counts
        self.status.value = ""
        self.image.value = png
        self.table.value = _counts_table(counts)
        for handle in self._handles:
            handle.update(self._png_bundle(), raw=True)

    def _ipython_display_(self) -> None:
        """Controls and table as a widget, the chart as a separate plain PNG output.

        The chart outside the widget shows wherever widgets do not run (GitHub, nbconvert
        HTML with saved widget state, a notebook reopened without a kernel).
        """
        from IPython.display import display

        if self._controls_panel is None:
            self._controls_panel = widgets.VBox(
                [self.children[0], self.fields_box, self.status, self.table]
            )
        bundle = self._controls_panel._repr_mimebundle_()
        bundle["text/plain"] = "(parameter explorer controls: run the cell to use them)"
        display(bundle, raw=True)
        handle = display(self._png_bundle(), raw=True, display_id=True)
        if handle is not None:  # None outside IPython
            self._handles.append(handle)

    def _png_bundle(self) -> dict[str, str]:
        total = self.counts["total"] if self.counts else 0
        return {"image/png": png_base64(self.image.value), "text/plain": f"{total:,} parameters"}


def _counts_table(counts: Mapping[str, int]) -> str:
    total = int(counts["total"])
    rows = "".join(
        f"<tr><td>{html.escape(k.replace('_', ' '))}</td><td style='text-align:right'>"
        f"{int(v):,}</td><td style='text-align:right'>{100 * int(v) / max(total, 1):.1f}%</td></tr>"
        for k, v in counts.items()
        if k != "total"
    )
    return (
        f"<table>{rows}<tr><th>total</th><th style='text-align:right'>{total:,}</th>"
        f"<th></th></tr></table>"
    )


def parameter_explorer(
    family: str = "bert", model_class: str | None = None, preset: str | None = None
) -> ParameterExplorer:
    """An ipywidgets panel: change sizes, see where the parameters go (exact counts).

    The returned widget exposes `.fields` (name -> control), `.config`, `.counts`, `.status`.
    """
    return ParameterExplorer(family, model_class, preset)
