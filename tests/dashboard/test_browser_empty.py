"""An empty store's page in Debian's chromium: it draws the dashboard by itself once calls arrive."""

from __future__ import annotations

from pathlib import Path

from browser import chromium, serving
from playwright.sync_api import expect, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR
from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import scenario
from otel_repeat_guard.store import open_for_writing


def test_an_empty_store_shows_its_calls_once_they_arrive_without_a_reload(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    open_for_writing(db).close()
    with serving(db) as url, sync_playwright() as playwright:
        browser = chromium(playwright)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        expect(page.get_by_text("This store has no tool calls yet")).to_be_visible(timeout=60_000)
        run_scenario(scenario(1), db, seconds=0)
        expect(page.locator(FIGURE_SELECTOR).first).to_be_visible(timeout=30_000)  # two looks, and the cache's age
        expect(page.get_by_text("This store has no tool calls yet")).to_have_count(0)
        browser.close()
