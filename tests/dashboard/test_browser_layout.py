"""Every page at 1280 × 900 and 1440 × 900 in Debian's chromium, on the demo's store: no table needs a horizontal
scroll and no column's text is clipped, however the table is drawn.

``st.dataframe`` draws on a canvas: its grid sizes each column to its text (up to 500 px) and stretches the
columns when there is room, so a grid fits when the widths its text needs (header and cells, measured in the
grid's own font) add up to no more than its visible width. The grid mirrors its cells in an accessible
table, numbers as values: each stands in as the longest text the page's formats make of it. HTML tables (``st.table``, the run's
table) and input fields are measured directly. Set ``REPEAT_GUARD_SCREENSHOTS`` to a folder to keep each page's screenshot
(``make screenshot`` refreshes docs/screenshots/).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, cli, environment, serving
from playwright.sync_api import Page, expect, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR

WIDTH, HEIGHT = 1440, 900  # the screenshots'
WIDTHS = (1280, 1440)
MAX_AUTO_WIDTH = 500  # the grid's widest column sized to its text (31.25rem)
PAGES = {
    "overview": "",
    "hotspots": "hotspots",
    "reminders": "reminders",
    "runs": "runs",
    "conversations": "conversations",
    "blind-spots": "blind-spots",
}

MEASURE = r"""() => {
  const canvas = document.createElement('canvas').getContext('2d');
  const measure = (text, font) => { canvas.font = font; return canvas.measureText(text).width; };
  const visible = el => el.offsetParent !== null;
  // The grid mirrors a number's value, not its text: the longest text our formats give it (thousands
  // separators, at most one decimal, a unit sign) stands in for it.
  const shown = text => /^-?\d+(\.\d+)?$/.test(text)
    ? new Intl.NumberFormat('en-US', {maximumFractionDigits: 1}).format(Number(text)) + '%' : text;
  const grids = [...document.querySelectorAll('[data-testid=stDataFrame]')].filter(visible).map(grid => {
    const editor = grid.querySelector('.stDataFrameGlideDataEditor');
    const style = getComputedStyle(editor);
    const family = style.getPropertyValue('--gdg-font-family');
    const cellFont = style.getPropertyValue('--gdg-base-font-style') + ' ' + family;
    const headerFont = style.getPropertyValue('--gdg-header-font-style') + ' ' + family;
    const pad = parseFloat(style.getPropertyValue('--gdg-cell-horizontal-padding')) || 8;
    const headers = [...grid.querySelectorAll('thead th')].map(th => th.textContent.trim());
    const rows = [...grid.querySelectorAll('tbody tr[role=row]')].map(
      row => [...row.querySelectorAll('td')].map(td => td.textContent.trim()));
    const needed = headers.map((header, i) => Math.ceil(Math.max(
      measure(header, headerFont), ...rows.map(row => measure(shown(row[i] ?? ''), cellFont))) + 2 * pad));
    const scroller = grid.querySelector('.dvn-scroller');
    return {headers, needed, visible: scroller.clientWidth, scroll: scroller.scrollWidth, rows: rows.length};
  });
  const tables = [...document.querySelectorAll('[data-testid=stTable], .repeat-guard-calls')].filter(visible).map(box => ({
    visible: box.clientWidth,
    scroll: Math.max(box.scrollWidth, box.querySelector('table').scrollWidth),
    clipped: [...box.querySelectorAll('td, th')].filter(cell => cell.scrollWidth > cell.clientWidth + 1)
      .map(cell => cell.textContent.slice(0, 60)),
  }));
  const inputs = [...document.querySelectorAll('input')].filter(visible)
    .filter(input => input.scrollWidth > input.clientWidth + 1).map(input => input.value);
  return {grids, tables, inputs};
}"""


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard on the store `make demo` builds (``otel-repeat-guard demo``), without starting it there."""
    db = tmp_path_factory.mktemp("layout") / "demo.db"
    subprocess.run(
        [*cli(), "demo", "--db", str(db), "--seconds", "2"], check=True, capture_output=True, env=environment()
    )
    with serving(db) as url:
        yield url


@pytest.fixture(scope="module")
def page(demo_url: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = chromium(playwright)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.set_default_timeout(60_000)  # the first run of the app imports pandas and altair
        yield page
        browser.close()


def settle(page: Page) -> None:
    """Once the page's script has run and its tables and charts are drawn."""
    page.get_by_test_id("stMain").wait_for()
    page.wait_for_timeout(500)
    page.get_by_test_id("stStatusWidget").wait_for(state="detached")
    drawn = f"[data-testid=stDataFrame] tbody tr[role=row], .repeat-guard-calls tbody tr, {FIGURE_SELECTOR}"
    page.locator(drawn).first.wait_for(state="attached")
    page.wait_for_timeout(1000)


def problems(found: dict[str, Any]) -> list[str]:
    """What does not fit, in words: empty when every table and field reads in full."""
    said = []
    for grid in found["grids"]:
        columns = dict(zip(grid["headers"], grid["needed"], strict=True))
        if grid["scroll"] > grid["visible"] + 1:
            said.append(f"grid {grid['headers']} scrolls: {grid['scroll']} px in {grid['visible']} px")
        if sum(grid["needed"]) > grid["visible"] + 1:
            said.append(f"grid needs {sum(grid['needed'])} px in {grid['visible']} px: {columns}")
        said += [
            f"column {h!r} needs {w} px, more than a column grows" for h, w in columns.items() if w > MAX_AUTO_WIDTH
        ]
    for table in found["tables"]:
        if table["scroll"] > table["visible"] + 1:
            said.append(f"table scrolls: {table['scroll']} px in {table['visible']} px")
        said += [f"table cell clipped: {text!r}" for text in table["clipped"]]
    said += [f"field clipped: {value!r}" for value in found["inputs"]]
    return said


def screenshot(page: Page, name: str) -> None:
    """The whole page at 1440 px wide, kept where ``REPEAT_GUARD_SCREENSHOTS`` says."""
    folder = os.environ.get("REPEAT_GUARD_SCREENSHOTS")
    if not folder:
        return
    height = page.evaluate("() => document.querySelector('[data-testid=stMainBlockContainer]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": max(HEIGHT, int(height) + 120)})
    settle(page)
    Path(folder).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(folder) / f"{name}.png"))
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
@pytest.mark.parametrize("name", list(PAGES))
def test_every_table_on_the_page_reads_in_full_at_1280_and_1440_px(
    page: Page, demo_url: str, name: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.goto(f"{demo_url}/{PAGES[name]}")
    settle(page)
    found = page.evaluate(MEASURE)
    assert name == "overview" or found["grids"] or found["tables"], "no table drawn"
    assert problems(found) == []
    if width == WIDTH:
        screenshot(page, name)


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
@pytest.mark.parametrize("by", ["Agent", "Tool"])
def test_the_reminders_by_agent_or_tool_read_in_full_with_their_counts_and_an_overall_row(
    page: Page, demo_url: str, width: int, by: str
) -> None:
    """At 1280 px the Heeded column was cut to "H" and the legend to "op", "er"; the bars were shares only."""
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.goto(f"{demo_url}/reminders")
    settle(page)
    page.get_by_test_id("stRadioGroup").get_by_text(by, exact=True).click()
    settle(page)
    found = page.evaluate(MEASURE)
    (grid,) = found["grids"]
    assert grid["headers"][0] == by and grid["headers"][-1] == "Heeded"
    assert problems(found) == []
    rows = page.get_by_test_id("stDataFrame").first.evaluate(
        "g => [...g.querySelectorAll('tbody tr[role=row]')].map(r => [...r.querySelectorAll('td')].map(c => c.textContent.trim()))"
    )
    *groups, overall = rows
    assert overall[0] == "(all reminders)" and int(overall[1]) == sum(int(row[1]) for row in groups)
    chart = page.evaluate(PICTURE)
    assert chart["cut"] == [], chart
    assert chart["legend"] == ["broken", "ignored", "ended", "open"]
    counts = [f"{row[1]} reminder{'s' if row[1] != '1' else ''}" for row in groups]
    assert chart["numbers"] == counts  # beside each bar, in the table's order


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_the_reminders_by_model_and_the_custom_range_read_in_full(page: Page, demo_url: str, width: int) -> None:
    """The long names: models ("claude-3-5-haiku-latest") and the custom range's dates."""
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.goto(f"{demo_url}/reminders")
    settle(page)
    page.get_by_test_id("stRadioGroup").get_by_text("Model", exact=True).click()
    settle(page)
    found = page.evaluate(MEASURE)
    assert [g["headers"][0] for g in found["grids"]] == ["Model"], (
        page.url,
        page.get_by_test_id("stHeading").all_text_contents(),
    )
    assert problems(found) == []
    page.get_by_role("button", name="Filters").click()  # the sidebar's boxes are folded in a popover
    combo = page.get_by_role("combobox", name="Time range")
    combo.click()
    page.get_by_role("option", name="Custom range", exact=True).click()
    settle(page)
    assert page.get_by_test_id("stDateInput").count() == 2
    assert problems(page.evaluate(MEASURE)) == []


def test_a_grid_too_wide_for_its_columns_is_found() -> None:
    """The measure can fail: nine columns needing 1,200 px in 980, and a clipped cell and field."""
    grid = {"headers": [str(i) for i in range(9)], "needed": [133] * 9, "visible": 980, "scroll": 980, "rows": 3}
    found = {"grids": [grid], "tables": [{"visible": 980, "scroll": 1010, "clipped": ["gemini-2.5-fl"]}]}
    said = problems({**found, "inputs": ["2026/12/0"]})
    assert said == [
        f"grid needs 1197 px in 980 px: { {str(i): 133 for i in range(9)} }",
        "table scrolls: 1010 px in 980 px",
        "table cell clipped: 'gemini-2.5-fl'",
        "field clipped: '2026/12/0'",
    ]


PICTURE = r"""() => {
  const svg = document.querySelector('[data-testid=stVegaLiteChart] svg');
  const box = svg.getBoundingClientRect();
  const out = el => { const r = el.getBoundingClientRect();  // a label Vega hides (opacity 0) is not drawn
    return r.width > 0 && el.getAttribute('opacity') !== '0' && (r.right > box.right + 0.5 || r.left < box.left - 0.5); };
  const texts = sel => [...svg.querySelectorAll(sel)].map(t => t.textContent);
  return {
    numbers: texts('g.mark-text.role-mark text'),
    cut: [...svg.querySelectorAll('g.mark-rect path, g.role-axis-label text, g.role-legend-label text')]
      .filter(out).map(el => el.textContent || el.tagName),
    legend: texts('g.role-legend-label text'),
  };
}"""


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_the_run_picture_numbers_failing_repeats_and_cuts_nothing(page: Page, demo_url: str, width: int) -> None:
    """The operator's shell call is denied six times in a row: a loop of failing calls, drawn as repeats."""
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.goto(f"{demo_url}/runs")
    settle(page)
    combo = page.get_by_role("combobox", name="Hotspot tool")
    combo.click()
    combo.fill("shell")
    page.get_by_role("option", name="shell", exact=True).wait_for()
    page.keyboard.press("Enter")
    expect(page.get_by_role("combobox", name="Run of identical calls")).to_have_value(re.compile("run of 6 "))
    settle(page)
    found = page.evaluate(PICTURE)
    assert found["numbers"] == ["2", "3", "4", "5", "6"], found
    assert found["cut"] == [], found
    assert "call failed" in found["legend"] and "loop broken" in found["legend"], found
