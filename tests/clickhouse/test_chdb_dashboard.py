"""``otel-repeat-guard dashboard --store chdb://DIR`` serves its pages (issue 41.8), as a user runs it: the real
command, its Streamlit child, Debian's chromium reading the overview.

chdb locks its directory for the process that opens it. The command opened the directory to check it and kept it
open, so the Streamlit process serving the page failed with ``Cannot lock file DIR/status``: the health check
answered, no page ever rendered. The tests of the reader run chdb in one process and never met it."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store.queries import Filters
from tests.dashboard.browser import chromium, cli, dashboard, environment
from tests.dashboard.browser import headline as shown_headline

TESTS_HOME = str(Path(__file__).resolve().parents[2])
"""Where ``tests`` is imported from: after the package's own home (the installed build's, under ``make test``)."""

FILL = """
import sys
from pathlib import Path
from tests.clickhouse.filling import demo_spans, fill
fill(Path(sys.argv[1]), demo_spans(Path(sys.argv[2]), agents=2))
"""
"""The demo's spans into a chdb directory and the embedded store, in a process of its own (chdb then lets go)."""


@pytest.fixture(scope="module")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a chdb directory holding the demo's spans, the embedded store holding the same): filled by another
    process, so that no process holds the directory when the command starts."""
    root = tmp_path_factory.mktemp("chdb_dashboard")
    directory, store = root / "chdb", root / "store.db"
    done = subprocess.run(
        [sys.executable, "-c", FILL, str(directory), str(store)],
        env={**environment(), "PYTHONPATH": f"{environment()['PYTHONPATH']}{os.pathsep}{TESTS_HOME}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return directory, store


def serving(store: str) -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    """The command's address while it serves ``store`` (the first run imports chdb: 90 s to start)."""
    return dashboard(["--store", store], seconds=90)


def test_the_dashboard_on_a_chdb_directory_draws_the_overview_from_it(chdb_dir: tuple[Path, Path]) -> None:
    directory, store = chdb_dir
    headline = SQLiteReader(store).headline(Filters()).iloc[0]
    with serving(f"chdb://{directory}") as (url, _server), sync_playwright() as playwright:
        browser = chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 2200, "height": 1200})
            page.set_default_timeout(60_000)  # the first run of the app imports pandas, altair and chdb
            page.goto(url)
            page.locator(f"{FIGURE_SELECTOR}, [data-testid=stException], [data-testid=stAlert]").first.wait_for()
            body = page.locator("body").inner_text()
            assert "Cannot read the store" not in body, body[:600]  # chdb's lock, held by the command itself
            metrics = shown_headline(page)
        finally:
            browser.close()
    assert int(headline["repeated_calls"]) > 0
    assert metrics["Repeated calls"] == f"{int(headline['repeated_calls']):,}"
    assert metrics["Longest run"] == str(int(headline["longest_run"]))


HOLD = """
import sys
from chdb import session
held = session.Session(sys.argv[1])
print("open", flush=True)
sys.stdin.read()
"""


def test_a_chdb_directory_another_process_holds_is_refused_in_one_line_naming_why(
    chdb_dir: tuple[Path, Path], tmp_path: Path
) -> None:
    directory, _store = chdb_dir
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        done = subprocess.run(
            [*cli(), "doctor", "--store", f"chdb://{directory}"],
            env=environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        holder.communicate("", timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == (
        f"otel-repeat-guard: error: cannot open the chdb directory {directory}: another process has it open (chdb "
        "opens a directory in one process at a time: stop that one, or read a copy of the directory)\n"
    )
