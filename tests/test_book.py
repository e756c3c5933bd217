"""The course as a book (tools/book.py): built once, offline, then checked page by page.

The build runs once per session (`python tools/book.py --out <tmp>`) in a subprocess whose
network is cut: every socket connection to anything but this machine raises, and the proxy
variables point nowhere, so a build that fetched anything (intersphinx, a theme, a CDN) fails.
Then, without a browser: every lesson notebook, chapter and course_lib module has a page, the
sidebar follows each chapter README's table, every internal link, image, stylesheet and script
resolves to a file of the site, nothing links to solutions/ or instructor/, every notebook page
carries the "Run it yourself" box with the README's commands, the solutions are collapsed and
the first uses of library classes link to their reference.

With headless Chromium (marker `browser`; Selenium and Debian's chromedriver, offline as in
tests/test_jupyterlab_live.py, the site served from 127.0.0.1): every page opens with no error in
the console (but bertviz's known offline ones), a solution's code is hidden until its toggle is
clicked, the local MathJax typesets, and the offline search finds a lesson.

About a minute for the build on 2 cores and a minute for the pages. Skipped, with the reason,
without the `docs` extra (`pip install -e '.[docs]'`) or, for the browser part, without
Chromium/chromedriver/Selenium.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book  # noqa: E402
from browser_helpers import chromium_and_driver, offline_chromium  # noqa: E402
from readme_commands import quick_start_commands  # noqa: E402

pytestmark = pytest.mark.timeout(600)

BUILD_S = 300
PAGE_S = 30

# Cut the network in the build's process: any connection but to this machine raises.
NO_NETWORK = """
import socket

_connect = socket.socket.connect


def _refuse(self, address, *args, **kwargs):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and "/" not in host:
        raise OSError(f"test_book: network blocked, the build tried to reach {address!r}")
    return _connect(self, address, *args, **kwargs)


socket.socket.connect = _refuse
"""

# bertviz's HTML output (chapter 01, notebook 05) loads require.js and d3 from a CDN: offline
# those fail, as its notice above the view says. Nothing else may reach the console as an error.
KNOWN_OFFLINE_ERRORS = (
    re.compile(r"require is not defined"),
    re.compile(r"https?://(cdnjs\.cloudflare\.com|cdn\.jsdelivr\.net|d3js\.org)/\S* - Failed"),
)


def lesson_notebooks() -> list[Path]:
    return sorted(ROOT.glob("chapters/*/*.ipynb"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The book, built once, offline, into a temporary folder."""
    missing = [n for n in book.DOCS_PACKAGES if importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)}: `{book.INSTALL_HINT}` installs the docs extra")
    folder = tmp_path_factory.mktemp("book")
    (folder / "offline").mkdir()
    (folder / "offline" / "sitecustomize.py").write_text(NO_NETWORK, encoding="utf-8")
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens
    env = dict(os.environ, HTTP_PROXY=unreachable, HTTPS_PROXY=unreachable, ALL_PROXY=unreachable)
    env.update(http_proxy=unreachable, https_proxy=unreachable, NO_PROXY="", no_proxy="")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(folder / "offline"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    out = folder / "site"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "book.py"), "--out", str(out)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_S,
    )
    (folder / "build.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    assert result.returncode == 0, (
        f"the book did not build:\n{(result.stdout + result.stderr)[-4000:]}"
    )
    assert f"open {out / 'index.html'}" in result.stdout
    return out


def pages(site: Path) -> list[Path]:
    """Every HTML page of the site (not the theme's assets)."""
    return sorted(
        p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")
    )


def page_of(site: Path, notebook: Path) -> Path:
    return site / notebook.relative_to(ROOT).with_suffix(".html")


def text_of(page: Path) -> str:
    """The page's text, tags stripped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


class Links(HTMLParser):
    """The URLs a page refers to: a href, img src, link href, script src."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src"}
        if tag in wanted:
            value = dict(attrs).get(wanted[tag])
            if value:
                self.urls.append(value)


def links(page: Path) -> list[str]:
    parser = Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.urls


# ---------------------------------------------------------------------------------------------
# The helpers, without a build
# ---------------------------------------------------------------------------------------------


def test_links_to_unpublished_files_become_text():
    pages_ = {"index.md", "chapters/01_bert/index.md", "chapters/01_bert/07_exercises.ipynb"}
    text = (
        "[answers](solutions/07_exercises.md), [master](../01_bert/instructor/07_exercises.ipynb), "
        "[`docs/mutation.md`](docs/mutation.md), [the exercises](07_exercises.ipynb), "
        "[site](https://example.org), ![figure](figure.png)"
    )
    rewritten = book.rewrite_links(text, "chapters/01_bert", pages_)
    assert "solutions/" not in rewritten.replace("`answers`", "")
    assert "instructor/" not in rewritten
    assert "`answers`" in rewritten and "`master`" in rewritten
    assert "`docs/mutation.md`" in rewritten and "(docs/mutation.md)" not in rewritten
    assert "[the exercises](07_exercises.ipynb)" in rewritten
    assert "[site](https://example.org)" in rewritten
    assert "![figure](figure.png)" in rewritten


def test_build_cells_and_build_it_yourself_cells_are_collapsed():
    def code(source: str, tags: list[str] | None = None) -> dict:
        return {"cell_type": "code", "metadata": {"tags": tags or []}, "source": source}

    def markdown(source: str) -> dict:
        return {"cell_type": "markdown", "metadata": {}, "source": source}

    notebook = {
        "cells": [
            markdown("## Build it yourself: a thing"),
            code("solution_1 = 1"),
            code("check(solution_1)"),
            markdown("**Your turn: the entropy.** Write it"),
            code("solution_2 = 2"),
            markdown("## Turn the knobs yourself"),
            code("explorer"),
            code("tagged = 3", tags=["build"]),
        ]
    }
    assert book.mark_solutions(notebook) == 3
    hidden = [
        cell["source"]
        for cell in notebook["cells"]
        if "hide-input" in cell.get("metadata", {}).get("tags", [])
    ]
    assert hidden == ["solution_1 = 1", "solution_2 = 2", "tagged = 3"]


def test_plain_docstrings_render_as_written():
    lines = book.plain_docstring(["Distances |d| <= mid, eval_* scores:", "    a * b", "end"])
    assert lines == [
        "Distances \\|d\\| <= mid, eval\\_\\* scores:",
        "",
        "::",
        "",
        "        a * b",
        "",
        "end",
    ]


def test_missing_docs_packages_name_the_fix(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "myst_nb" else real(name, *a)
    )
    assert book.main(["--out", "unused"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "myst_nb" in error and book.INSTALL_HINT in error


# ---------------------------------------------------------------------------------------------
# The built site, read as files
# ---------------------------------------------------------------------------------------------


def test_every_notebook_chapter_and_module_has_a_page(site):
    missing = [str(nb) for nb in lesson_notebooks() if not page_of(site, nb).exists()]
    assert not missing, f"notebooks without a page: {missing}"
    for chapter in book.chapters():
        assert (site / "chapters" / chapter.name / "index.html").exists()
    modules = book.library_modules()
    assert len(modules) > 50
    assert not [m for m in modules if not (site / "api" / f"{m}.html").exists()]
    assert (site / "search.html").exists() and (site / "searchindex.js").exists()


def test_no_answers_are_published(site):
    published = {p.relative_to(site).as_posix() for p in site.rglob("*")}
    assert not [p for p in published if "/instructor" in p or "/solutions" in p]
    for page in pages(site):
        urls = [u for u in links(page) if re.search(r"(^|/)(instructor|solutions)/", u)]
        assert not urls, f"{page.relative_to(site)} links to unpublished answers: {urls}"
        assert "### BEGIN SOLUTION" not in page.read_text(encoding="utf-8")


def test_sidebar_follows_the_chapter_readmes(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    sidebar = home.split("bd-sidenav", 1)[1].split('<article class="bd-article"', 1)[0]
    order = re.findall(r'href="(chapters/[^"#]+\.html)"', sidebar)
    expected = []
    for chapter in book.chapters():
        expected.append(f"chapters/{chapter.name}/index.html")
        expected += [f"chapters/{chapter.name}/{Path(n).stem}.html" for n in chapter.notebooks]
        readme_order = book.TABLE_ROW.findall(chapter.readme)
        assert chapter.notebooks[: len(readme_order)] == readme_order
    assert order == expected


def test_every_internal_link_and_image_resolves(site):
    broken = []
    for page in pages(site):
        for url in links(page):
            parts = urlsplit(url)
            if parts.scheme or url.startswith(("#", "//")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {url}")
    assert not broken, "broken links:\n" + "\n".join(broken[:40])


def test_every_notebook_page_says_how_to_run_it(site):
    commands = quick_start_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    for notebook in lesson_notebooks():
        text = text_of(page_of(site, notebook))
        assert "Run it yourself" in text, notebook
        for command in [*commands, f"jupyter lab {notebook.relative_to(ROOT).as_posix()}"]:
            assert command in text, f"{notebook.name}: no {command!r}"


def test_solutions_are_collapsed_and_exercise_pages_have_none(site):
    collapsed = {}
    for notebook in lesson_notebooks():
        source = page_of(site, notebook).read_text(encoding="utf-8")
        collapsed[notebook.name] = len(re.findall(r'<details class="[^"]*hide above-input', source))
    assert collapsed["03_whole_model.ipynb"] >= 1
    assert sum(collapsed.values()) >= 10
    assert book.SHOW_SOLUTION in text_of(site / "chapters/01_bert/03_whole_model.html")
    # The exercise pages are the student copies: stubs, nothing to collapse.
    assert collapsed["07_exercises.ipynb"] == 0


def test_first_uses_of_library_classes_link_to_the_reference(site):
    linked = 0
    for notebook in lesson_notebooks():
        source = page_of(site, notebook).read_text(encoding="utf-8")
        if "Library pieces first used here" not in source:
            continue
        box = source.split("Library pieces first used here", 1)[1].split("</div>", 1)[0]
        items = re.findall(r"<li>(.*?)</li>", box, re.S)
        assert items
        for item in items:
            assert re.search(r'class="reference internal" href="\.\./\.\./api/course_lib\.', item)
        linked += len(items)
    assert linked >= 20
    first = (site / "chapters/01_bert/01_tokenization.html").read_text(encoding="utf-8")
    assert "api/course_lib.config.bert.html#course_lib.config.bert.BertConfig" in first


# ---------------------------------------------------------------------------------------------
# The built site, in headless Chromium
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(site) -> Iterator[str]:
    """The site served on a free local port, as `python -m http.server -d <site>` does."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory) -> Iterator[Any]:
    chromium, chromedriver = chromium_and_driver()
    driver = offline_chromium(chromium, chromedriver, tmp_path_factory.mktemp("chromium"))
    try:
        driver.set_page_load_timeout(PAGE_S)
        driver.set_script_timeout(PAGE_S)
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """The console's errors since the last call, less bertviz's known offline ones."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
        and not any(pattern.search(entry["message"]) for pattern in KNOWN_OFFLINE_ERRORS)
    ]


def wait(driver: Any, script: str, what: str, seconds: float = PAGE_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=0.1).until(
        lambda d: d.execute_script(script), message=f"waited {seconds} s for {what}"
    )


@pytest.mark.browser
def test_every_page_opens_without_console_errors(site, server, browser):
    errors = {}
    all_pages = pages(site)
    assert len(all_pages) > 100
    for page in all_pages:
        browser.get(f"{server}/{page.relative_to(site).as_posix()}")
        wait(browser, "return document.readyState === 'complete'", f"{page.name} to load")
        if browser.execute_script("return typeof MathJax !== 'undefined' && !!MathJax.Hub"):
            wait(  # its fonts and typesetting come after the page's load event
                browser,
                "return MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0",
                f"MathJax on {page.name}",
            )
        found = console_errors(browser)
        if found:
            errors[page.relative_to(site).as_posix()] = found
    assert not errors, f"console errors: {errors}"


@pytest.mark.browser
def test_a_solution_is_hidden_until_its_toggle_is_clicked(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/chapters/01_bert/03_whole_model.html")
    toggles = browser.find_elements(By.CSS_SELECTOR, "details.hide.above-input")
    assert toggles
    toggle = next(t for t in toggles if "class Mini" in t.get_attribute("textContent"))
    code = toggle.find_element(By.CSS_SELECTOR, ".cell_input pre")
    assert not code.is_displayed()
    summary = toggle.find_element(By.TAG_NAME, "summary")
    assert "Show the solution" in summary.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", summary)
    summary.click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 5, poll_frequency=0.05).until(
        lambda _: code.is_displayed(), message="the solution did not show after its toggle"
    )
    assert toggle.get_attribute("open") is not None
    assert "class Mini" in code.text
    assert not console_errors(browser)


@pytest.mark.browser
def test_math_is_typeset_by_the_local_mathjax(server, browser):
    browser.get(f"{server}/chapters/01_bert/02_embeddings_and_attention.html")
    wait(
        browser,
        "return document.querySelectorAll('.MathJax, .MathJax_Display, .MathJax_CHTML').length",
        "MathJax to typeset the page",
    )
    assert not console_errors(browser)


@pytest.mark.browser
def test_search_works_offline(server, browser):
    browser.get(f"{server}/search.html?q=WordPiece")
    hits = wait(
        browser,
        "const hits = [...document.querySelectorAll('#search-results li a')];"
        "return hits.length ? hits.map(a => a.getAttribute('href')) : null;",
        "search results",
    )
    assert any("01_tokenization" in href for href in hits), hits
    assert not console_errors(browser)
