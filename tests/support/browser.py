"""Debian's Chromium driven by playwright (no browser download), for the tests that open a page:
the attention viewer's (tests/learner/test_viewer.py) and the live page's
(tests/service/test_live_browser.py). One browser per test module: it takes seconds to start."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

CHROMIUM = "/usr/bin/chromium"


@contextlib.contextmanager
def chromium() -> Iterator:
    """A headless Chromium (playwright's Browser) while the block runs."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()
