"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright, which
never downloads a browser of its own. ``.ci/run`` installs Chromium when it is missing; without
it the browser tests are skipped, saying why."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Page

PATIENCE_MS = 30_000  # how long the page may take to reach a state the test waits for
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no Chromium on this machine (apt install chromium); the page is untested")


@dataclass
class Browser:
    page: Page
    errors: list[str]  # uncaught exceptions in the page
    console: list[str]  # console errors (a refused reconnection is one)


@contextlib.asynccontextmanager
async def chromium_page() -> AsyncIterator[Browser]:
    """A page in headless Chromium from this machine."""
    pytest.importorskip("playwright")
    from playwright.async_api import async_playwright, expect

    executable = find_chromium()
    expect.set_options(timeout=PATIENCE_MS)  # a busy machine is slow to draw a page
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = await browser.new_page(viewport={"width": 1100, "height": 720})
            page.set_default_timeout(PATIENCE_MS)
            found = Browser(page, [], [])
            page.on("pageerror", lambda error: found.errors.append(str(error)))
            page.on(
                "console", lambda m: found.console.append(m.text) if m.type == "error" else None
            )
            yield found
        finally:
            await browser.close()
