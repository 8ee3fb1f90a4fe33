"""Text cells verbatim, in Debian's chromium at 1280 and 1440 px: a call's arguments and a model's output read
as the agent sent them on the Runs and Conversations pages, never as Markdown, and a model's output as its text,
not its JSON envelope."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import chromium, serving
from playwright.sync_api import Browser, Page, expect, sync_playwright
from test_browser import pick, settled

from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import AgentScript, Call, Prompt, model_output

# Each would read otherwise as Markdown: bold "init", italic "b", a lost backslash, a link, a lost "\".
ARGUMENTS = json.dumps({"path": "C:\\temp\\x", "q": '__init__ *b* say "hi" https://example.com/a_b'})
PROBE = AgentScript(
    "markdown-probe",
    "text-probe",
    (Prompt(tuple(Call("read_file", ARGUMENTS, 30) for _ in range(3))),),
    conversation="markdown-conversation",
)
WIDTHS = (1280, 1440)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("text") / "text.db"
    run_scenario((PROBE,), db, seconds=1)
    return db


@pytest.fixture(scope="module")
def dashboard_url(store: Path) -> Iterator[str]:
    with serving(store) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    page = browser.new_page(viewport={"width": request.param, "height": 900})
    page.set_default_timeout(30_000)
    yield page
    page.close()


def stored_arguments(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT preview FROM tool_call_arguments LIMIT 1").fetchone()
    return str(text)


def run_table(page: Page) -> dict[str, object]:
    """The run's table: its cells' text, and the elements Markdown would have made in it."""
    table = page.locator("table").filter(has_text="What happened").first
    expect(table.locator("tbody tr").first).to_be_attached(timeout=30_000)
    found: dict[str, object] = table.evaluate(
        """t => ({
            cells: [...t.querySelectorAll('tbody td')].map(cell => cell.textContent),
            markup: [...t.querySelectorAll('tbody td *')].map(el => el.tagName),
        })"""
    )
    return found


def check_verbatim(page: Page, arguments: str) -> None:
    said = model_output(Call("read_file", ARGUMENTS))  # the scripted model's text
    found = settled(lambda: arguments in run_table(page)["cells"], True)  # type: ignore[operator]
    table = run_table(page)
    assert found, table["cells"]
    assert said in table["cells"], table["cells"]  # type: ignore[operator]
    assert not any(str(cell).startswith('[{"role"') for cell in table["cells"])  # type: ignore[attr-defined]
    assert table["markup"] == []  # no <strong>, <em>, <a>: every cell is text


def test_arguments_and_model_output_read_verbatim_on_the_runs_page(page: Page, dashboard_url: str, store: Path) -> None:
    arguments = stored_arguments(store)
    assert "__init__" in arguments and "C:\\\\temp" in arguments and '\\"hi\\"' in arguments
    page.goto(f"{dashboard_url}/runs")
    pick(page, "Hotspot tool", "read_file")
    expect(page.get_by_test_id("stCode").first).to_have_text(arguments)
    check_verbatim(page, arguments)


def test_arguments_and_model_output_read_verbatim_on_the_conversations_page(
    page: Page, dashboard_url: str, store: Path
) -> None:
    page.goto(f"{dashboard_url}/conversations")
    check_verbatim(page, stored_arguments(store))
