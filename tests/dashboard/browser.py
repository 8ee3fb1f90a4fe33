"""The real dashboard for the browser tests: ``otel-repeat-guard dashboard`` serving a store, and Debian's
chromium (Playwright drives it through ``executable_path``; it never downloads a browser)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright

import otel_repeat_guard
from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR

CHROMIUM = os.environ.get("REPEAT_GUARD_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli() -> list[str]:
    """The command line of ``otel-repeat-guard`` from the package these tests import (a checkout's source
    or the installed build), whatever else is on PATH."""
    return [sys.executable, "-m", "otel_repeat_guard.cli.main"]


def environment() -> dict[str, str]:
    """The environment of the commands: the folder the tests import the package from comes first, so the
    dashboard's Streamlit child imports the same package."""
    home = str(Path(otel_repeat_guard.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": home if not path else f"{home}{os.pathsep}{path}"}


@contextmanager
def dashboard(arguments: list[str], seconds: float = 60) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The address of ``otel-repeat-guard dashboard ARGUMENTS`` once it answers its health check (within ``seconds``),
    and its process; stopped with SIGTERM after (it stops its Streamlit child)."""
    port = free_port()
    server = subprocess.Popen(
        [*cli(), "dashboard", *arguments, "--port", str(port)],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    output = server.stdout.read() if server.stdout else ""
                    pytest.fail(f"the dashboard did not start (exit {server.poll()}):\n{output}")
                time.sleep(0.2)
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)  # gone before the next test: a chdb directory is one process's at a time
        except subprocess.TimeoutExpired:
            server.kill()


@contextmanager
def serving(db: Path) -> Iterator[str]:
    """The dashboard's address while it serves ``db``; stopped (and its exit checked) after."""
    with dashboard(["--db", str(db)]) as (url, server):
        yield url
    assert server.returncode == 130


def chromium(playwright: Playwright) -> Browser:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)


def headline(page: Page) -> dict[str, str]:
    """The Overview's headline figures as the browser shows them, label -> value, once they are drawn."""
    page.locator(FIGURE_SELECTOR).first.wait_for(state="attached")
    shown: dict[str, str] = page.evaluate(
        """selector => Object.fromEntries([...document.querySelectorAll(selector)].map(
               figure => [figure.previousElementSibling.textContent.trim(), figure.textContent.trim()]))""",
        FIGURE_SELECTOR,
    )
    return shown


def recording_page(browser: Browser, width: int = 1280) -> tuple[Page, list[str]]:
    """A new page ``width`` px wide, and the names of the files it loads, appended as each finishes."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    loaded: list[str] = []
    page.on("requestfinished", lambda request: loaded.append(request.url.rsplit("/", 1)[-1]))
    return page, loaded
