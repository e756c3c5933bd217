"""Live check: the course's widgets work in a real JupyterLab, driven by headless Chromium.

A JupyterLab server (a subprocess on a free local port, with a token, serving a temporary folder
that holds copies of two chapter notebooks with their outputs cleared) is opened in headless
Chromium through Selenium and Debian's chromedriver, offline (every host name fails):

* chapter 03's ALBERT notebook runs all its cells (Run > Run All Cells); typing 768 into the
  parameter explorer's "embedding E" slider must change the displayed total from ALBERT-base's
  exact count to `count_parameters` of the same config with E = 768, and redraw the chart;
* chapter 01's attention notebook runs all its cells; moving the offline attention explorer's
  head slider (arrow key on the handle) must redraw its figure.

The browser console must hold no error except bertviz's known offline ones. Every wait is
bounded and every process started here (server, kernels, browser) is stopped afterwards.

About 50 s on 2 cores. Needs Chromium, its chromedriver and Selenium (Debian/Ubuntu:
`apt-get install -y chromium chromium-driver`, which `.ci/run` does when it can; Selenium comes
with the `dev` extra; elsewhere point CHROMIUM and CHROMEDRIVER at matching binaries). Skipped,
with the reason, when one is missing; run it alone with

    pytest -m browser tests/test_jupyterlab_live.py

The server log, chromedriver log, console log and screenshots are left in pytest's tmp folder.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import chromium_and_driver, offline_chromium

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
ALBERT_NOTEBOOK = ROOT / "chapters/03_albert/01_factorized_embeddings.ipynb"
ATTENTION_NOTEBOOK = ROOT / "chapters/01_bert/02_embeddings_and_attention.ipynb"

SERVER_START_S = 90  # JupyterLab's first start on a busy 2-core machine
PAGE_S = 90  # JupyterLab's page, the notebook and its kernel
RUN_ALL_S = 180  # every cell of one notebook, fast mode
WIDGET_S = 30  # one recount or redraw after a widget change

# bertviz fetches require.js and d3 from a CDN: offline that fails with these (see
# course_lib/viz/bertviz_view.py). Nothing else may reach the console as an error.
KNOWN_OFFLINE_ERRORS = (
    re.compile(r"require is not defined"),
    re.compile(r"https?://(cdnjs\.cloudflare\.com|cdn\.jsdelivr\.net|d3js\.org)/\S* - Failed"),
)


# ---------------------------------------------------------------------------------------------
# What is needed, and a skip naming it when it is missing
# ---------------------------------------------------------------------------------------------


@dataclass
class Tools:
    chromium: str
    chromedriver: str


@pytest.fixture(scope="module")
def tools() -> Tools:
    return Tools(*chromium_and_driver())


# ---------------------------------------------------------------------------------------------
# The JupyterLab server
# ---------------------------------------------------------------------------------------------


@dataclass
class Lab:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path
    log: Path

    def api(self, endpoint: str) -> Any:
        """GET /api/<endpoint> from the server, decoded from JSON."""
        with urllib.request.urlopen(
            f"{self.url}/api/{endpoint}?token={self.token}", timeout=10
        ) as response:
            return json.loads(response.read())

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def copy_without_outputs(source: Path, folder: Path) -> Path:
    """A copy with outputs, execution counts and saved widget state removed: all that the page
    shows afterwards comes from this run."""
    import nbformat

    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("widgets", None)
    target = folder / source.name
    nbformat.write(notebook, target)
    return target


def write_settings(folder: Path) -> None:
    """JupyterLab user settings: every cell in the DOM (no windowing), no news or update checks."""
    settings = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }
    for name, values in settings.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.25):
    """Poll `condition` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (kernels run in their own session, so the group misses them)."""
    try:
        import psutil

        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except ImportError:
        pass
    except Exception:  # the process is already gone
        return []
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def stop_process_tree(process: subprocess.Popen) -> None:
    """SIGTERM the server's group (it shuts its kernels down), SIGKILL whatever is left."""
    below = descendants(process.pid)
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture(scope="module")
def lab(tools: Tools, tmp_path_factory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("jupyterlab")
    root, settings = base / "root", base / "settings"
    for folder in (root, settings, base / "workspaces", base / "runtime", base / "config"):
        folder.mkdir()
    for notebook in (ALBERT_NOTEBOOK, ATTENTION_NOTEBOOK):
        copy_without_outputs(notebook, root)
    write_settings(settings)
    token = secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),  # none of the user's configuration
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        COURSE_FAST="1",
        PYTHONUNBUFFERED="1",
    )
    env.pop("MPLBACKEND", None)  # the learner's inline backend, not the test suite's Agg
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port=0",  # the system picks a free port; read back from the runtime file
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",  # ServerApp.token before jupyter_server 2
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")  # containers and CI run as root
    log = base / "server.log"
    with log.open("w", encoding="utf-8") as log_file:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one
        )
    try:
        info_file = base / "runtime" / f"jpserver-{process.pid}.json"

        def ready() -> str | None:
            if process.poll() is not None:
                raise AssertionError(
                    f"JupyterLab exited with code {process.returncode}:\n"
                    + log.read_text(encoding="utf-8", errors="replace")[-3000:]
                )
            if not info_file.exists():
                return None
            try:
                url = f"http://127.0.0.1:{json.loads(info_file.read_text())['port']}"
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as r:
                    return url if r.status == 200 else None
            except (OSError, ValueError, KeyError):
                return None

        url = wait_for(ready, SERVER_START_S, "JupyterLab to answer on its port")
        yield Lab(url, token, root, log)
    finally:
        stop_process_tree(process)


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tools: Tools, lab: Lab, tmp_path_factory) -> Iterator[Any]:
    driver = offline_chromium(
        tools.chromium, tools.chromedriver, tmp_path_factory.mktemp("chromium")
    )
    try:
        driver.set_page_load_timeout(PAGE_S)
        driver.set_script_timeout(WIDGET_S)
        yield driver
    finally:
        driver.quit()  # stops Chromium, then chromedriver


def console_errors(driver: Any, record: Path) -> list[str]:
    """The console's errors since the last call, less the known offline bertviz ones; all
    entries are appended to `record`."""
    entries = driver.get_log("browser")
    with record.open("a", encoding="utf-8") as file:
        for entry in entries:
            file.write(f"{entry['level']} {entry['message']}\n")
    return [
        entry["message"]
        for entry in entries
        if entry["level"] == "SEVERE"
        and not any(pattern.search(entry["message"]) for pattern in KNOWN_OFFLINE_ERRORS)
    ]


# JavaScript run in the page. The visible notebook panel (other tabs are hidden by Lumino).
PANEL_JS = "const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');"
KERNEL_STATUS_JS = (
    PANEL_JS
    + "const s = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');"
    + "return s ? s.getAttribute('data-status') : null;"
)
PROMPTS_JS = (
    PANEL_JS
    + "if (!panel) return null;"
    + "return [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
    + ".map(p => p.textContent.trim());"
)
ERRORS_JS = (
    PANEL_JS
    + "return [...panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="
    + '"application/vnd.jupyter.stderr"]\')].map(e => e.textContent.slice(-1500));'
)


class Page:
    """JupyterLab in the browser: open a notebook, run it, find widgets in it."""

    def __init__(self, driver: Any, lab: Lab, folder: Path) -> None:
        self.driver, self.lab, self.folder = driver, lab, folder

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        try:
            return wait_for(condition, timeout, what)
        except AssertionError as error:
            self.driver.save_screenshot(str(self.folder / "timeout.png"))
            raise AssertionError(
                f"{error} (screenshot {self.folder / 'timeout.png'}); server log:\n"
                + self.lab.log_tail()
            ) from None

    def open_notebook(self, name: str) -> None:
        """Open `name` alone in a new workspace; wait until its kernel is connected and idle.

        The toolbar's indicator says "idle" before any kernel exists, so the server must also
        report the notebook's kernel idle with the page's websocket connected to it."""
        workspace = Path(name).stem.replace("_", "-")
        self.driver.get(
            f"{self.lab.url}/lab/workspaces/{workspace}/tree/{name}?token={self.lab.token}"
        )

        def kernel_ready() -> bool:
            if self.driver.execute_script(KERNEL_STATUS_JS) != "idle":
                return False
            sessions = self.lab.api("sessions")
            return any(
                Path(session["path"]).name == name
                and session["kernel"]["execution_state"] == "idle"
                and session["kernel"]["connections"] >= 1
                for session in sessions
            )

        self.wait(kernel_ready, PAGE_S, f"{name} to open with a connected, idle kernel")

    def run_all_cells(self, name: str) -> None:
        """Run > Run All Cells through the menu, then wait until the kernel is idle again with
        every code cell numbered ([*] while queued or running, [ ] when skipped after an error)."""
        from selenium.webdriver.common.by import By

        menu = self.driver.find_element(
            By.XPATH, "//li[contains(@class, 'lm-MenuBar-item')][normalize-space()='Run']"
        )
        menu.click()
        item = self.wait(
            lambda: self.driver.find_elements(
                By.CSS_SELECTOR, ".lm-Menu-item[data-command='runmenu:run-all']"
            ),
            WIDGET_S,
            "the Run menu",
        )
        item[0].click()
        self.wait(
            lambda: any(
                p == "[*]:" or re.fullmatch(r"\[\d+\]:", p)
                for p in self.driver.execute_script(PROMPTS_JS) or []
            ),
            WIDGET_S,
            "Run All Cells to queue the cells",
        )

        def finished() -> list[str] | None:
            prompts = self.driver.execute_script(PROMPTS_JS) or []
            done = (
                self.driver.execute_script(KERNEL_STATUS_JS) == "idle"
                and any(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
                and not any("*" in p for p in prompts)
            )
            return prompts if done else None

        prompts = self.wait(finished, RUN_ALL_S, f"every cell of {name} to run")
        not_run = [i for i, p in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", p)]
        errors = self.driver.execute_script(ERRORS_JS)
        assert not not_run, (
            f"{name}: code cells {not_run} did not run (an earlier cell failed?); "
            f"stderr outputs:\n" + "\n---\n".join(errors)
        )

    def cell_with_slider(self, label: str) -> Any:
        """The code cell of the visible notebook whose output has a slider labelled `label`."""
        from selenium.webdriver.common.by import By

        panel = self.driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden)")
        cells = panel.find_elements(
            By.XPATH,
            ".//div[contains(@class, 'jp-CodeCell')][.//div[contains(@class, 'widget-slider')]"
            f"/label[normalize-space()='{label}']]",
        )
        assert len(cells) == 1, f"expected one cell with a {label!r} slider, found {len(cells)}"
        return cells[0]


def slider(cell: Any, label: str) -> Any:
    from selenium.webdriver.common.by import By

    return cell.find_element(
        By.XPATH,
        f".//div[contains(@class, 'widget-slider')][label[normalize-space()='{label}']]",
    )


def dropdown_value(cell: Any, label: str) -> str:
    from selenium.webdriver.common.by import By

    select = cell.find_element(
        By.XPATH,
        f".//div[contains(@class, 'widget-dropdown')][label[normalize-space()='{label}']]//select",
    )
    return select.get_attribute("value")


def figure_source(cell: Any) -> str:
    """The data URL of the figure PNG output that follows the widget controls."""
    from selenium.webdriver.common.by import By

    images = cell.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
    assert len(images) == 1, f"expected one figure output in the cell, found {len(images)}"
    return images[0].get_attribute("src")


@pytest.fixture
def page(browser: Any, lab: Lab, tmp_path: Path) -> Iterator[Page]:
    browser.get_log("browser")  # start from an empty console record
    yield Page(browser, lab, tmp_path)
    browser.save_screenshot(str(tmp_path / "page.png"))


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------


def test_parameter_explorer_recounts_when_e_changes(page: Page, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    from course_lib import AlbertConfig, count_parameters

    page.open_notebook(ALBERT_NOTEBOOK.name)
    page.run_all_cells(ALBERT_NOTEBOOK.name)
    cell = page.cell_with_slider("embedding E")
    driver = page.driver

    def total() -> str:
        # The explorer's table ends with a row: <th>total</th><th>110,106,428</th>.
        return driver.execute_script(
            "const row = [...arguments[0].querySelectorAll('tr')]"
            ".find(r => r.cells.length && r.cells[0].textContent.trim() === 'total');"
            "return row ? row.cells[1].textContent.trim() : null;",
            cell,
        )

    model_class = dropdown_value(cell, "model")
    assert dropdown_value(cell, "preset") == "albert-base"
    base = AlbertConfig.from_preset("albert-base")
    before = count_parameters(base, model_class)["total"]
    expected = count_parameters(base.replace(embedding_size=768), model_class)["total"]
    assert before != expected
    assert total() == f"{before:,}", f"before the change the total shows {total()!r}"
    chart = figure_source(cell)

    readout = slider(cell, "embedding E").find_element("css selector", ".widget-readout")
    assert readout.text.strip() == "128"
    (
        ActionChains(driver)
        .click(readout)
        .key_down(Keys.CONTROL)
        .send_keys("a")
        .key_up(Keys.CONTROL)
        .send_keys("768", Keys.ENTER)
        .perform()
    )
    page.wait(
        lambda: total() == f"{expected:,}",
        WIDGET_S,
        f"the total to become {expected:,} (it shows {total()!r})",
    )
    assert readout.text.strip() == "768"
    assert dropdown_value(cell, "preset") == "(custom)"  # no ALBERT preset has E = 768
    page.wait(lambda: figure_source(cell) != chart, WIDGET_S, "the chart to be redrawn")

    errors = console_errors(driver, tmp_path / "console.log")
    assert not errors, "browser console errors:\n" + "\n".join(errors)


def test_attention_explorer_redraws_when_head_moves(page: Page, tmp_path: Path) -> None:
    from selenium.webdriver.common.keys import Keys

    page.open_notebook(ATTENTION_NOTEBOOK.name)
    page.run_all_cells(ATTENTION_NOTEBOOK.name)
    cell = page.cell_with_slider("head")
    driver = page.driver
    head = slider(cell, "head")
    readout = head.find_element("css selector", ".widget-readout")
    assert readout.text.strip() == "0"
    figure = figure_source(cell)
    assert figure.startswith("data:image/png;base64,")

    head.find_element("css selector", ".noUi-handle").send_keys(Keys.ARROW_RIGHT)
    page.wait(lambda: readout.text.strip() == "1", WIDGET_S, "the head slider to show 1")
    page.wait(lambda: figure_source(cell) != figure, WIDGET_S, "the figure to be redrawn")
    # The new figure is a real picture, loaded and drawn at full size.
    width = page.wait(
        lambda: driver.execute_script(
            "const img = arguments[0].querySelector('.jp-OutputArea-output img');"
            "return img.complete && img.naturalWidth;",
            cell,
        ),
        WIDGET_S,
        "the new figure to load",
    )
    assert width >= 200, f"the redrawn figure is only {width} px wide"

    errors = console_errors(driver, tmp_path / "console.log")
    assert not errors, "browser console errors:\n" + "\n".join(errors)
