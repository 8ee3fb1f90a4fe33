"""The real thing: ``otel-repeat-guard dashboard`` serving, headless Chromium (Debian's) reading it.

``make test`` installs Debian's chromium when it is missing; Playwright drives it through
``executable_path`` (it never downloads a browser). Set ``REPEAT_GUARD_SCREENSHOT`` to a
path to keep the screenshot (``make screenshot`` refreshes docs/dashboard.png).
"""

from __future__ import annotations

import json
import os
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
TOOL_PAYLOAD = "<img src=x onerror=alert(2)>"
# Its model's outputs quote the arguments (the demo's model says "Calling render_page with ..."), so the
# payload is in tool arguments, model outputs and, for the second tool, the tool's own name.
PROBE = AgentScript(
    "web-designer",
    "site-builder",
    (
        Prompt(
            (
                *(Call("render_page", json.dumps({"html": PAYLOAD}), 30) for _ in range(3)),
                *(Call(TOOL_PAYLOAD, "{}", 10) for _ in range(2)),
            )
        ),
    ),
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
        page = browser.new_page(viewport={"width": 2200, "height": 1200})  # wide: the grid draws only visible columns
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


# The grids in page order: the calls the guard could not compare (the demo's unrecorded http_get), by tool,
# by agent, by model, reminder efficacy, the timeline, conversations, a conversation's run.
BY_TOOL, TIMELINE = 1, 5


def test_hotspot_table_shows_the_looping_tools_with_their_counts(page: Page) -> None:
    settled(lambda: len(grid_rows(page, BY_TOOL)), 9)  # the grid fills in as the page finishes its first run
    rows = grid_rows(page, BY_TOOL)
    by_tool = {row[0]: row[1:4] for row in rows}  # repeated calls, reminders, longest run
    assert by_tool == {
        TOOL_PAYLOAD: ["1", "0", "2"],
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
    assert metrics["Repeated calls"] == "73"
    assert metrics["Longest run"] == "12"
    assert metrics["Agents with loops"] == "13"
    assert metrics["Wasted cost"].startswith("$")
    assert page.get_by_role("button", name="Deploy").count() == 0  # a viewer's page: no Streamlit "Deploy"


def timeline_names(page: Page) -> list[str]:
    return [row[2] for row in grid_rows(page, TIMELINE) if len(row) > 2]  # Started, Call, Tool or model, ...


def test_script_in_arguments_model_outputs_and_tool_names_is_text(page: Page) -> None:
    pick(page, "Hotspot tool", "render_page")
    code = page.get_by_test_id("stCode")
    expect(code).to_contain_text('{"html":"<script>alert(1)</script>"}', timeout=30_000)
    want = '{"html":"<script>alert(1)</script>"}'
    assert settled(lambda: "render_page" in timeline_names(page), True)
    rows = grid_rows(page, TIMELINE)
    texts = {row[-1] for row in rows if len(row) > 8}
    assert want in texts
    assert any(PAYLOAD in text and '"role": "assistant"' in text for text in texts)  # a model output
    assert TOOL_PAYLOAD in timeline_names(page)  # a tool name
    injected = page.evaluate("() => [...document.scripts].filter(s => s.textContent.includes('alert(')).length")
    assert injected == 0
    assert page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0
    assert page.evaluate("() => document.querySelectorAll('[data-testid=stCode] script').length") == 0
    page.wait_for_timeout(500)  # give a smuggled script the chance to raise its dialog


def run_labels(page: Page) -> str:
    """The run the Run box shows."""
    return page.get_by_role("combobox", name="Run").first.input_value()


def test_the_run_box_follows_the_hotspot_tool_and_picks_the_timeline(page: Page) -> None:
    """Regression: after changing "Hotspot tool", the Run box kept showing the previous tool's run."""
    pick(page, "Hotspot tool", "web_search")
    assert settled(lambda: "run of 2" in run_labels(page), True), run_labels(page)
    combo = page.get_by_role("combobox", name="Run").first
    combo.click()
    options = page.get_by_role("option")
    options.first.wait_for()
    labels = options.all_text_contents()
    assert len(labels) == 4 and all("run of 2" in label for label in labels)  # two researchers, two prompts each
    options.nth(2).click()
    picked = labels[2]
    assert settled(lambda: run_labels(page) == picked, True, seconds=15), (run_labels(page), picked)
    assert "web_search" in timeline_names(page)
    pick(page, "Hotspot tool", "sql_query")
    assert settled(lambda: "run of 12" in run_labels(page), True, seconds=15), run_labels(page)
    assert settled(lambda: "sql_query" in timeline_names(page) and "web_search" not in timeline_names(page), True)


def test_screenshot(page: Page, dashboard_url: str) -> None:
    """A fresh, tall page load, saved where ``REPEAT_GUARD_SCREENSHOT`` says (docs/dashboard.png via make)."""
    browser = page.context.browser
    assert browser is not None
    shot = browser.new_page(viewport={"width": 1400, "height": 3400})
    shot.goto(dashboard_url)
    rows = shot.get_by_test_id("stDataFrame").nth(TIMELINE).locator("tbody tr[role=row]")
    rows.first.wait_for(state="attached", timeout=30_000)
    expect(shot.get_by_test_id("stCode")).to_contain_text("stuck", timeout=30_000)
    shot.wait_for_timeout(1500)  # let the charts finish their first paint
    image = shot.screenshot()
    shot.close()
    assert len(image) > 50_000  # a drawn page, not a blank one
    destination = os.environ.get("REPEAT_GUARD_SCREENSHOT")
    if destination:
        Path(destination).write_bytes(image)


def test_no_trace_link_without_a_trace_ui(page: Page) -> None:
    """Regression: "open trace" pointed at localhost:16686 when no Jaeger ran (`make demo`)."""
    assert page.get_by_text("open trace").count() == 0
    assert all(not any("16686" in cell for cell in row) for row in grid_rows(page, TIMELINE))
