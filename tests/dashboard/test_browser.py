"""The real thing: ``otel-repeat-guard dashboard`` serving, headless Chromium (Debian's) reading it.

``make test`` installs Debian's chromium when it is missing; Playwright drives it through
``executable_path`` (it never downloads a browser). The pages at 1440 px, and their screenshots, are
test_browser_layout.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from browser import chromium, headline, serving
from playwright.sync_api import Page, expect, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR
from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import AgentScript, Call, Prompt, scenario

T = TypeVar("T")
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


@pytest.fixture(scope="module")
def dashboard_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("browser") / "dashboard.db"
    run_scenario((*scenario(8), PROBE), db, seconds=2)
    with serving(db) as url:
        yield url


@pytest.fixture(scope="module")
def page(dashboard_url: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = chromium(playwright)
        page = browser.new_page(viewport={"width": 2200, "height": 1200})  # wide: the grid draws only visible columns
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.set_default_timeout(30_000)  # the first run of the app imports pandas and altair
        open_page(page, dashboard_url, "hotspots")
        yield page
        assert dialogs == [], f"a script ran in the page: {dialogs}"
        browser.close()


def open_page(page: Page, url: str, address: str) -> None:
    """The dashboard's page at ``address`` (``""``: the overview), once its first table is drawn."""
    page.goto(f"{url}/{address}")
    drawn = f"[data-testid=stDataFrame] tbody tr[role=row], .repeat-guard-calls tbody tr, {FIGURE_SELECTOR}"
    page.locator(drawn).first.wait_for(state="attached")


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


def table_rows(page: Page) -> list[list[str]]:
    """The cells of the page's run timeline (an HTML table: its text wraps)."""
    table = page.locator(".repeat-guard-calls table").first
    expect(table.locator("tbody tr").first).to_be_attached(timeout=30_000)
    rows: list[list[str]] = table.evaluate(
        """t => [...t.querySelectorAll('tbody tr')].map(row => [...row.querySelectorAll('td, th')].map(
               cell => cell.textContent.trim()))"""
    )
    return rows


BY_TOOL = 0  # the first grid of the hotspots page


def test_hotspot_table_shows_the_looping_tools_with_their_counts(page: Page, dashboard_url: str) -> None:
    open_page(page, dashboard_url, "hotspots")
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
    open_page(page, dashboard_url, "")
    metrics = headline(page)
    assert metrics["Repeated calls"] == "73"
    assert metrics["Longest run"] == "12"
    assert metrics["Agents with loops"] == "13"
    assert metrics["Wasted cost"].startswith("$")
    assert page.get_by_role("button", name="Deploy").count() == 0  # a viewer's page: no Streamlit "Deploy"


def timeline_names(page: Page) -> list[str]:
    return [row[2] for row in table_rows(page) if len(row) > 2]  # Started, Call, Tool or model, ...


def test_script_in_arguments_model_outputs_and_tool_names_is_text(page: Page, dashboard_url: str) -> None:
    open_page(page, dashboard_url, "runs")
    pick(page, "Hotspot tool", "render_page")
    code = page.get_by_test_id("stCode").first
    expect(code).to_contain_text('{"html":"<script>alert(1)</script>"}', timeout=30_000)
    want = '{"html":"<script>alert(1)</script>"}'
    said = f"Calling render_page with {json.dumps({'html': PAYLOAD})}"  # the model's output, as its text
    assert settled(lambda: "render_page" in timeline_names(page), True)
    texts = {row[-1] for row in table_rows(page) if len(row) > 6}
    assert want in texts and said in texts
    page.get_by_text("Arguments and outputs in full").click()  # the model outputs, in full
    full = page.get_by_test_id("stExpander").get_by_test_id("stCode")
    expect(full.first).to_contain_text(said)  # the model's text ...
    expect(full.last).to_contain_text('"role": "assistant"')  # ... and its output as stored
    assert TOOL_PAYLOAD in timeline_names(page)  # a tool name
    injected = page.evaluate("() => [...document.scripts].filter(s => s.textContent.includes('alert(')).length")
    assert injected == 0
    assert page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0
    assert page.evaluate("() => document.querySelectorAll('[data-testid=stCode] script').length") == 0
    page.wait_for_timeout(500)  # give a smuggled script the chance to raise its dialog


def run_labels(page: Page) -> str:
    """The run the Run box shows."""
    return page.get_by_role("combobox", name="Run").first.input_value()


def test_the_run_box_follows_the_hotspot_tool_and_picks_the_timeline(page: Page, dashboard_url: str) -> None:
    """Regression: after changing "Hotspot tool", the Run box kept showing the previous tool's run."""
    open_page(page, dashboard_url, "runs")
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
    # the box shows the pick before the rerun it started has drawn the run's timeline (CI saw the old one)
    assert settled(lambda: "web_search" in timeline_names(page), True), timeline_names(page)
    pick(page, "Hotspot tool", "sql_query")
    assert settled(lambda: "run of 12" in run_labels(page), True, seconds=15), run_labels(page)
    assert settled(lambda: "sql_query" in timeline_names(page) and "web_search" not in timeline_names(page), True)


def test_no_trace_link_without_a_trace_ui(page: Page, dashboard_url: str) -> None:
    """Regression: "open trace" pointed at localhost:16686 when no Jaeger ran (`make demo`)."""
    open_page(page, dashboard_url, "runs")
    assert page.get_by_text("open trace").count() == 0
    assert all(not any("16686" in cell for cell in row) for row in table_rows(page))
