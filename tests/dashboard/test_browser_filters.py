"""The sidebar's filters in Debian's chromium, folded in a popover: a fresh page loads none of the boxes' code
(nor the metric's), the line under the popover says what a linked address selects, and a box chosen in the
opened popover narrows the figures, the line and the address, the figures equal to the store's."""

from __future__ import annotations

from pathlib import Path

from browser import chromium, headline, recording_page, serving
from playwright.sync_api import Page, expect, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR
from otel_repeat_guard.store import open_for_reading, queries
from otel_repeat_guard.store.queries import Filters

WIDGET_CODE = ("Selectbox.", "Multiselect.", "Checkbox.", "Metric.")
"""The first files of the boxes', the toggle's and st.metric's code (Streamlit loads each on first use)."""


def _repeats(db: Path, filters: Filters) -> str:
    conn, _ = open_for_reading(db)
    try:
        return f"{int(queries.headline(conn, filters).iloc[0]['repeated_calls']):,}"
    finally:
        conn.close()


def _line(page: Page) -> str:
    """The line under the sidebar's popover (the store's path is the line after it)."""
    return page.get_by_test_id("stSidebar").get_by_test_id("stCaptionContainer").first.inner_text().strip()


def test_the_filters_fold_into_a_popover_that_a_fresh_page_never_loads(seeded_db: Path) -> None:
    with serving(seeded_db) as url, sync_playwright() as playwright:
        browser = chromium(playwright)
        page, loaded = recording_page(browser)
        page.goto(f"{url}/?agent=coder&range=All+time")
        shown = headline(page)
        page.wait_for_load_state("networkidle")
        assert not [name for name in loaded if name.startswith(WIDGET_CODE)], loaded
        assert page.get_by_role("combobox").count() == 0  # folded: no box drawn
        assert _line(page) == "All time · Agent: coder"
        assert shown["Repeated calls"] == _repeats(seeded_db, Filters(agents=("coder",)))

        page.get_by_role("button", name="Filters").click()
        expect(page.get_by_role("combobox", name="Time range")).to_have_value("All time")
        tool = page.get_by_role("combobox", name="Tool")  # chosen as a user does, typed then Enter (test_browser.pick):
        tool.click()  # a click on the option could land while the list still moved, under load (CI lost one)
        tool.fill("run_tests")
        page.get_by_role("option", name="run_tests", exact=True).wait_for()
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        expect(page).to_have_url(f"{url}/?agent=coder&tool=run_tests&range=All+time", timeout=30_000)
        expect(page.get_by_test_id("stSidebar").get_by_test_id("stCaptionContainer").first).to_have_text(
            "All time · Agent: coder · Tool: run_tests", timeout=30_000
        )
        narrowed = _repeats(seeded_db, Filters(agents=("coder",), tools=("run_tests",)))
        assert narrowed != shown["Repeated calls"]
        expect(page.locator(FIGURE_SELECTOR).nth(1)).to_have_text(narrowed, timeout=30_000)  # the second: repeats
        assert headline(page)["Repeated calls"] == narrowed
        browser.close()
