"""The real thing: ``otel-repeat-guard dashboard`` serving, headless Chromium (Debian's) reading it.

``make test`` installs Debian's chromium when it is missing; Playwright drives it through
``executable_path`` (it never downloads a browser). Set ``REPEAT_GUARD_SCREENSHOT`` to a
path to keep the screenshot (``make screenshot`` refreshes docs/dashboard.png).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import AgentScript, Call, Prompt, scenario

T = TypeVar("T")
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
PAYLOAD = "<script>alert(1)</script>"
PROBE = AgentScript(
    "web-designer",
    "site-builder",
    (Prompt(tuple(Call("render_page", json.dumps({"html": PAYLOAD}), 30) for _ in range(3))),),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def dashboard_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("browser") / "dashboard.db"
    run_scenario((*scenario(8), PROBE), db, seconds=2)
    port = free_port()
    cli = shutil.which("otel-repeat-guard") or str(Path(sys.executable).with_name("otel-repeat-guard"))
    server = subprocess.Popen(
        [cli, "dashboard", "--db", str(db), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
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
        yield url
    finally:
        server.terminate()  # the command stops its Streamlit child on SIGTERM
        assert server.wait(timeout=20) == 130


@pytest.fixture(scope="module")
def page(dashboard_url: str) -> Iterator[Page]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(dashboard_url)
        page.set_default_timeout(30_000)  # the first run of the app imports pandas and altair
        page.get_by_test_id("stDataFrame").first.locator("tbody tr[role=row]").first.wait_for(state="attached")
        yield page
        assert dialogs == [], f"a script ran in the page: {dialogs}"
        browser.close()


def grid_rows(page: Page, table: int) -> list[list[str]]:
    """The cells of one st.dataframe: the grid draws on a canvas and mirrors its cells in a table inside it."""
    grid = page.get_by_test_id("stDataFrame").nth(table)
    expect(grid.locator("tbody tr[role=row]").first).to_be_attached(timeout=30_000)
    rows: list[list[str]] = grid.evaluate(  # one atomic read: the page may be re-rendering
        """grid => [...grid.querySelectorAll('tbody tr[role=row]')].map(
               row => [...row.querySelectorAll('td[role=gridcell]')].map(cell => cell.textContent.trim()))"""
    )
    return rows


def settled(read: Callable[[], T], want: T, seconds: float = 30) -> T:
    """``read()`` once it returns ``want`` (the page reruns asynchronously), else its last value."""
    deadline = time.monotonic() + seconds
    value = read()
    while value != want and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return value


def pick(page: Page, label: str, option: str) -> None:
    """Choose ``option`` in the selectbox ``label`` the way a user does: type, then Enter."""
    combo = page.get_by_role("combobox", name=label)
    combo.click()
    combo.fill(option)
    page.get_by_role("option", name=option, exact=True).wait_for()
    page.keyboard.press("Enter")


def test_hotspot_table_shows_the_looping_tools_with_their_counts(page: Page) -> None:
    rows = grid_rows(page, 0)
    by_tool = {row[0]: row[1:4] for row in rows}  # repeated calls, reminders, longest run
    assert by_tool == {
        "sql_query": ["24", "6", "12"],
        "run_tests": ["14", "6", "8"],
        "shell": ["10", "4", "6"],
        "read_url": ["8", "4", "5"],
        "grep": ["6", "2", "4"],
        "tail_logs": ["4", "2", "3"],
        "web_search": ["4", "0", "2"],
        "render_page": ["2", "1", "3"],
    }
    metrics = {
        (metric.get_by_test_id("stMetricLabel").text_content() or "").strip(): metric.get_by_test_id(
            "stMetricValue"
        ).text_content()
        for metric in page.get_by_test_id("stMetric").all()
    }
    assert metrics["Repeated calls"] == "72"
    assert metrics["Longest run"] == "12"
    assert metrics["Agents with loops"] == "13"


def test_script_in_arguments_is_shown_as_text_and_never_runs(page: Page) -> None:
    pick(page, "Hotspot tool", "render_page")
    code = page.get_by_test_id("stCode")
    expect(code).to_contain_text('{"html":"<script>alert(1)</script>"}', timeout=30_000)
    expected = ['{"html":"<script>alert(1)</script>"}'] * 3
    assert settled(lambda: [row[6] for row in grid_rows(page, 2) if len(row) > 6], expected) == expected
    injected = page.evaluate("() => [...document.scripts].filter(s => s.textContent.includes('alert(1)')).length")
    assert injected == 0
    assert page.evaluate("() => document.querySelectorAll('[data-testid=stCode] script').length") == 0
    page.wait_for_timeout(500)  # give a smuggled script the chance to raise its dialog


def test_screenshot(page: Page, dashboard_url: str) -> None:
    """A fresh, tall page load, saved where ``REPEAT_GUARD_SCREENSHOT`` says (docs/dashboard.png via make)."""
    browser = page.context.browser
    assert browser is not None
    shot = browser.new_page(viewport={"width": 1400, "height": 2350})
    shot.goto(dashboard_url)
    rows = shot.get_by_test_id("stDataFrame").nth(2).locator("tbody tr[role=row]")
    rows.first.wait_for(state="attached", timeout=30_000)
    expect(shot.get_by_test_id("stCode")).to_contain_text("stuck", timeout=30_000)
    shot.wait_for_timeout(1500)  # let the charts finish their first paint
    image = shot.screenshot()
    shot.close()
    assert len(image) > 50_000  # a drawn page, not a blank one
    destination = os.environ.get("REPEAT_GUARD_SCREENSHOT")
    if destination:
        Path(destination).write_bytes(image)


def test_trace_links_point_at_the_trace(page: Page) -> None:
    links = [row[-1] for row in grid_rows(page, 2)]
    assert links and all(re.fullmatch(r"http://localhost:16686/trace/[0-9a-f]{32}", link) for link in links), links
