"""Headless Chromium as the browser tests drive it: offline (every host but 127.0.0.1 fails to
resolve, no background traffic) and logging the console, so a test can assert it stays clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
