"""Headless Chromium as the browser tests drive it: offline (every host but 127.0.0.1 fails to
resolve, no background traffic) and logging the console, so a test can assert it stays clean."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

OFFLINE_ARGUMENTS = (
    "--headless",
    "--no-sandbox",  # needed as root (containers, CI)
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # offline but for local servers
    "--window-size=1400,1000",
)


def find_binary(variable: str, names: tuple[str, ...]) -> str | None:
    """The binary named by environment `variable`, else the first of `names` on PATH."""
    for name in (os.environ.get(variable, ""), *names):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def chromium_and_driver() -> tuple[str, str]:
    """Chromium and its chromedriver, or the test is skipped saying which is missing and how to
    install it (Selenium too)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("Selenium is not installed: `pip install -e '.[dev]'` installs it")
    chromium = find_binary(
        "CHROMIUM", ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    )
    chromedriver = find_binary("CHROMEDRIVER", ("chromedriver",))
    if chromium is None or chromedriver is None:
        missing = " and ".join(
            name
            for name, path in (("Chromium", chromium), ("chromedriver", chromedriver))
            if path is None
        )
        pytest.skip(
            f"no {missing} found: `apt-get install -y chromium chromium-driver` (Debian/Ubuntu) "
            "or set CHROMIUM and CHROMEDRIVER to matching binaries"
        )
    return chromium, chromedriver


def offline_chromium(chromium: str, chromedriver: str, folder: Path) -> Any:
    """A Selenium driver for `chromium` through `chromedriver`, with its profile and the
    driver's log in `folder`; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for argument in (*OFFLINE_ARGUMENTS, f"--user-data-dir={folder / 'profile'}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=chromedriver, log_output=str(folder / "driver.log"))
    return webdriver.Chrome(service=service, options=options)
