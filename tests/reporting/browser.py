"""A headless Debian Chromium driven by selenium (chromium-driver: no download at run time)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: flags for a quiet, offline, throw-away browser (a fresh profile each time)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync")


def chromium_missing() -> str | None:
    """Why no browser can be started here (None: it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the test extra)"
    for name in ("chromium", "chromedriver"):
        if shutil.which(name) is None:
            return f"{name} is not on PATH (Debian packages chromium and chromium-driver; .ci/run installs them)"
    return None


@contextmanager
def chromium(width: int = 1500, height: int = 1000) -> Iterator[Any]:
    """A driver whose browser logs every console message (driver.get_log("browser"))."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
