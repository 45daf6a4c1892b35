"""What the browser tests share: Debian's chromium driven by Playwright (never a browser download), a
router that records every request and refuses any that leaves the machine, loopback servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def sync_api():
    """playwright.sync_api, or skip the calling test module saying what is missing."""
    api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (.ci/run installs it)")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium (.ci/run: apt-get install chromium)",
                    allow_module_level=True)
    return api


class LocalOnly:
    """A Playwright route handler: every request is recorded; one to a host other than the loopback is refused."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.refused: list[str] = []

    def __call__(self, route) -> None:
        url = route.request.url
        self.requests.append(url)
        if urlparse(url).hostname in ("127.0.0.1", "localhost") or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()


@contextmanager
def local_page(api, profile: Path, viewport: dict, timeout_ms: int) -> Iterator[tuple[object, LocalOnly]]:
    """A page of Debian's chromium (headless, a fresh profile in `profile`) whose every request goes
    through a `LocalOnly` router; yields the page and the router."""
    router = LocalOnly()
    with api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(str(profile), executable_path=str(CHROMIUM), headless=True,
                                                        args=FLAGS, viewport=viewport)
        try:
            context.route("**/*", router)
            page = context.new_page()
            page.set_default_timeout(timeout_ms)
            yield page, router
        finally:
            context.close()


def wait_serving(url: str, server: subprocess.Popen, timeout: float, failure: Callable[[], str]) -> None:
    """Poll `url` until it answers; fail the test with `failure()` once `server` exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(failure())
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group (kernels included), SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue
