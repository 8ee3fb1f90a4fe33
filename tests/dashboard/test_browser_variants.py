"""The Reminders page's "Outcome by variant" view in Debian's chromium at 1280 px, on an experiment's store: its
verdict, and two tables that read in full (no horizontal scroll, no clipped column)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import chromium, serving
from playwright.sync_api import Page, sync_playwright

from otel_repeat_guard.core.experiments import variant_table
from tests.dashboard.test_browser_layout import HEIGHT, MEASURE, problems, settle
from tests.store.variant_agents import expected, experiment

VARIANT_HEADERS = ["Variant", "Reminders", "Broke the loop (95% interval)", "Loops", "Calls after", "Tokens after"]


@pytest.fixture(scope="module")
def wording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    db = tmp_path_factory.mktemp("variants") / "store.db"
    scripted, _spans, _reminders = experiment(Path(db), runs=120)
    with serving(db) as url:
        yield url, variant_table(expected(scripted)).verdict


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = chromium(playwright)
        page = browser.new_page(viewport={"width": 1280, "height": HEIGHT})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def test_the_outcome_by_variant_reads_in_full_at_1280_px(page: Page, wording: tuple[str, str]) -> None:
    url, verdict = wording
    page.goto(f"{url}/reminders")
    settle(page)
    page.get_by_text("Outcome by variant", exact=True).scroll_into_view_if_needed()
    settle(page)
    assert page.get_by_text(verdict, exact=True).count() == 1
    found = page.evaluate(MEASURE)
    headers = [grid["headers"] for grid in found["grids"]]
    assert headers[1:] == [VARIANT_HEADERS, [*VARIANT_HEADERS[:1], "Model", *VARIANT_HEADERS[1:]]], headers
    assert [grid["rows"] for grid in found["grids"][1:]] == [2, 4]
    assert problems(found) == []
