"""A real browser for serve's tests: Debian's Chromium, headless, driven by Playwright (its Python package; it never
downloads a browser of its own), and serve's application on a real server on 127.0.0.1 in a thread of its own.

Without Chromium the browser tests are skipped, except in CI (CI=true), where they fail: .ci/run installs it."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp import web

CHROMIUM = os.environ.get("TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# As the machine's notes say Chromium must start here: no sandbox (root), no GPU, and none of its own connections
# to Google's hosts (a closed network refuses them, many at a time).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def need_chromium() -> str:
    if os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    why = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@contextmanager
def running(make: Callable[[str], web.Application]) -> Iterator[str]:
    """The application ``make(url)`` builds, served at ``url`` (127.0.0.1, a free port, its socket bound before the
    application is built: textual-serve's page names its own address) from a thread of its own."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = make(url)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        box["runner"] = runner
        box["url"] = url

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="web-test-server", daemon=True)
    thread.start()
    assert ready.wait(60), "the test server did not start"
    try:
        yield str(box["url"])
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = need_chromium()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def shot(page: Any, name: str) -> None:
    """A screenshot of ``page`` into $TEST_SHOTS (to look at what a test saw), when it is set."""
    folder = os.environ.get("TEST_SHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        page.screenshot(path=os.path.join(folder, f"{name}.png"))
