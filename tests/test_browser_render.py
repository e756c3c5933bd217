"""Real-browser check: the offline attention explorer is visible in a notebook exported to HTML.

A notebook that displays an `AttentionExplorer` is executed in a Jupyter kernel as
`jupyter nbconvert --execute` does (widget state saved), exported to HTML and opened in headless
Chromium with every network request failing, as offline or behind a firewall: the widget
controls cannot load there, but the figure is a plain PNG output and must show. The screenshot
must contain the heatmap: a large block of strongly coloured, varied pixels. The same page with
the figure output removed is the control and must be colourless.

About 10 s. Needs Chromium (Debian/Ubuntu: `apt-get install -y chromium`, which `.ci/run`
does when it can; elsewhere point the CHROMIUM environment variable at a Chrome/Chromium
binary). It runs with the rest of the suite when Chromium is found and is skipped, with the
reason, when not; run it alone with

    pytest -m browser tests/test_browser_render.py

The screenshots are left in pytest's tmp_path for a look.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

NOTEBOOK_CODE = """\
import numpy as np
from course_lib.viz import AttentionExplorer

tokens = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
scores = np.random.default_rng(0).normal(size=(2, 2, 8, 8)) * 2
attention = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
AttentionExplorer(attention, tokens, layer=1, head=1)
"""


def find_chromium() -> str | None:
    candidates = [os.environ.get("CHROMIUM", "")]
    candidates += ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    for name in candidates:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


@pytest.fixture
def chromium(request) -> str:
    path = find_chromium()
    if path is None:
        pytest.skip(
            "no Chromium found: `apt-get install -y chromium` (Debian/Ubuntu) or set CHROMIUM "
            "to a Chrome/Chromium binary"
        )
    return path


def screenshot(chromium: str, page: Path, out: Path, user_data: Path) -> np.ndarray:
    """Render `page` headless, offline (every host name fails), and return the RGB pixels."""
    from PIL import Image

    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # needed as root (containers, CI)
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # the CDN scripts nbconvert links cannot load
        f"--user-data-dir={user_data}",
        "--window-size=1000,1000",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert out.exists(), f"Chromium wrote no screenshot:\n{result.stderr[-2000:]}"
    return np.asarray(Image.open(out).convert("RGB")).astype(int)


def coloured_mask(pixels: np.ndarray) -> np.ndarray:
    """Strongly coloured pixels: text, borders and background are grey (equal channels)."""
    return (pixels.max(-1) - pixels.min(-1)) > 50


def test_explorer_png_is_visible_in_exported_html(chromium, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    monkeypatch.delenv("COURSE_LIB_STATIC_VIZ", raising=False)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(NOTEBOOK_CODE)]
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    controls, figure = notebook.cells[0].outputs
    # In a live kernel: widget controls, then the figure as an ordinary PNG output.
    assert "application/vnd.jupyter.widget-view+json" in controls["data"]
    assert "image/png" in figure["data"]
    assert "application/vnd.jupyter.widget-state+json" in notebook.metadata["widgets"]

    exporter = HTMLExporter(exclude_input=True)
    page = tmp_path / "explorer.html"
    page.write_text(exporter.from_notebook_node(notebook)[0], encoding="utf-8")
    assert page.read_text(encoding="utf-8").count('src="data:image/png;base64,') == 1

    control_notebook = nbformat.from_dict(notebook)
    control_notebook.cells[0].outputs = control_notebook.cells[0].outputs[:1]  # controls only
    control = tmp_path / "control.html"
    control.write_text(exporter.from_notebook_node(control_notebook)[0], encoding="utf-8")

    pixels = screenshot(chromium, page, tmp_path / "explorer.png", tmp_path / "profile-a")
    blank = screenshot(chromium, control, tmp_path / "control.png", tmp_path / "profile-b")

    mask = coloured_mask(pixels)
    assert coloured_mask(blank).mean() < 0.001, "the control page should have no coloured area"
    assert mask.mean() > 0.05, f"only {mask.mean():.2%} of the page is coloured: no heatmap"
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    height, width = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
    assert height >= 200 and width >= 200, f"coloured region only {width}x{height} px"
    # A heatmap, not a flat block: many distinct colours inside the coloured region.
    region = pixels[mask] // 16
    distinct = len({tuple(p) for p in region})
    assert distinct >= 20, f"only {distinct} distinct colours in the figure"
