"""The Overview's folded chart in Debian's chromium: a fresh page loads no chart library, and opening the fold
draws the chart over time (its three series in the legend) at 1280 px."""

from __future__ import annotations

from pathlib import Path

from browser import chromium, recording_page, serving
from playwright.sync_api import expect, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR


def test_a_fresh_overview_loads_no_chart_library_and_draws_the_chart_once_opened(seeded_db: Path) -> None:
    with serving(seeded_db) as url, sync_playwright() as playwright:
        browser = chromium(playwright)
        page, loaded = recording_page(browser)
        page.goto(url)
        expect(page.locator(FIGURE_SELECTOR)).to_have_count(12, timeout=60_000)
        page.wait_for_load_state("networkidle")
        assert page.get_by_test_id("stVegaLiteChart").count() == 0
        assert not [name for name in loaded if name.startswith(("embed.", "ArrowVegaLiteChart."))], loaded

        page.get_by_text("Repeated calls and reminders per", exact=False).click()
        chart = page.get_by_test_id("stVegaLiteChart")
        expect(chart.locator("svg g.role-legend-label text").first).to_be_attached(timeout=60_000)
        legend = chart.locator("svg g.role-legend-label text").all_text_contents()
        assert set(legend) == {"repeated calls", "gentle reminders", "detailed reminders"}, legend
        browser.close()
