"""The system Chromium, driven by Playwright, for the tests that open the Temporal Web UI.

The browser is the distribution's (no Playwright browser download). A test module imports
``async_api`` from here, so it is skipped whole when Playwright is not installed, and marks
itself ``needs_chromium`` to be skipped when the browser is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.error import URLError

import pytest

from statecore.temporal._devserver import DevServer

if TYPE_CHECKING:
    from playwright.async_api import Browser

async_api = pytest.importorskip(
    "playwright.async_api", reason="playwright is not installed (pip install statecore[test])"
)

CHROMIUM = Path("/usr/bin/chromium")
# Headless and quiet: without the background-networking flags Chromium keeps dialling out.
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

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"Chromium not found at {CHROMIUM}: apt-get install chromium "
    "(scripts/test.sh installs it when run as root)",
)


@contextlib.asynccontextmanager
async def headless_chromium() -> AsyncIterator[Browser]:
    """The system Chromium, closed when the block ends."""
    async with async_api.async_playwright() as playwright:
        # launch() gives every run a fresh, temporary profile (--user-data-dir).
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()


def _ui_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (URLError, OSError):
        return False


async def wait_for_web_ui(server: DevServer) -> None:
    """Until the dev server's Web UI serves its page: it comes up after the server answers."""
    assert server.ui_url is not None, "the dev server runs headless (start it with a ui_port)"
    for _ in range(120):
        if await asyncio.to_thread(_ui_answers, server.ui_url):
            return
        await asyncio.sleep(0.25)
    pytest.fail(f"the Web UI at {server.ui_url} never answered")
