"""Shared plumbing for the plots: a Figure that shows itself in notebooks, and widget detection.

The plots build `matplotlib.figure.Figure` objects directly instead of going through pyplot:
pyplot keeps every figure alive in a global registry and the inline backend shows it a second
time at the end of the cell. A bare Figure, though, is displayed by Jupyter as text
("<Figure size ...>") unless pyplot happened to be imported, so `CourseFigure` brings its own
PNG representation.
"""

from __future__ import annotations

import base64
import io
import os

from matplotlib.figure import Figure

# Set to 1 to make every explorer render a static PNG, e.g. when executing notebooks that will be
# committed: the outputs then stay small and show on GitHub, which does not run widgets.
STATIC_ENV_VAR = "COURSE_LIB_STATIC_VIZ"


class CourseFigure(Figure):
    """A matplotlib Figure that displays as a PNG in Jupyter without pyplot."""

    def _repr_png_(self) -> bytes:
        return figure_to_png(self)


def figure_to_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render a figure to PNG bytes with the Agg renderer (works with any backend)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buffer.getvalue()


def png_base64(png: bytes) -> str:
    """PNG bytes as the base64 text Jupyter expects for image/png in a MIME bundle."""
    return base64.b64encode(png).decode("ascii")


def widgets_live() -> bool:
    """True inside a Jupyter kernel with ipywidgets importable (where widgets can be shown).

    A kernel cannot know whether the frontend renders widgets, so every widget output also
    carries a PNG of its current state as a fallback (see `AttentionExplorer`).
    """
    if os.environ.get(STATIC_ENV_VAR, "").strip() not in ("", "0"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
