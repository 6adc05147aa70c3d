"""Headless Chromium (Debian's) driven by Playwright, for the browser tests.

Tests ``with chromium() as browser:`` and open pages on 127.0.0.1 only.
Screenshots go to ``test-artifacts/`` at the repository root.
"""

from __future__ import annotations

import contextlib
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.path.join(ROOT, "test-artifacts")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextlib.contextmanager
def chromium():
    """A Playwright browser on Debian's Chromium (Playwright gives it a throw-away profile).

    Skips the test (fails it in CI) where Chromium is not installed.
    """
    from tests.system import require
    require("chromium")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page, name: str) -> str:
    """Save a screenshot of ``page`` as ``test-artifacts/<name>.png``; returns the path."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, f"{name}.png")
    page.screenshot(path=path, full_page=True)
    return path
