"""Visual tools for the course: attention, parameter counts and training curves.

All plots return `CourseFigure` (a matplotlib Figure that shows itself in notebooks, made
without pyplot so nothing is displayed twice). The explorers show their figure as a plain PNG
output that their widget controls redraw, so committed notebooks show it on GitHub and in
offline HTML exports; COURSE_LIB_STATIC_VIZ=1 makes the attention explorer skip its controls.
"""

from course_lib.viz._figure import CourseFigure, figure_to_png
from course_lib.viz.architecture import architecture_figure, input_representation_figure
from course_lib.viz.attention import (
    AttentionExplorer,
    ModelAttention,
    as_attention_maps,
    attention_grid,
    attention_heatmap,
    compute_attentions,
    format_head_summaries,
    head_summaries,
    plot_head_summaries,
    show_attention,
)
from course_lib.viz.bertviz_view import bertviz_head_view, bertviz_model_view
from course_lib.viz.params import (
    PARAMETER_FAMILIES,
    ParameterExplorer,
    ParameterFamily,
    parameter_explorer,
    plot_parameter_breakdown,
)
from course_lib.viz.training import (
    classify_masking,
    compare_runs,
    metric_series,
    plot_history,
    plot_masking,
)

__all__ = [
    "PARAMETER_FAMILIES",
    "AttentionExplorer",
    "CourseFigure",
    "ModelAttention",
    "ParameterExplorer",
    "ParameterFamily",
    "as_attention_maps",
    "architecture_figure",
    "attention_grid",
    "attention_heatmap",
    "bertviz_head_view",
    "bertviz_model_view",
    "classify_masking",
    "compare_runs",
    "compute_attentions",
    "figure_to_png",
    "format_head_summaries",
    "head_summaries",
    "input_representation_figure",
    "metric_series",
    "parameter_explorer",
    "plot_head_summaries",
    "plot_history",
    "plot_masking",
    "plot_parameter_breakdown",
    "show_attention",
]
