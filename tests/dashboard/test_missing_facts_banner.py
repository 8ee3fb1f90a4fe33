"""The dashboard's banner for a store fed by a guard that records no facts: on every page, with the fix, and
absent from a store whose guard recorded them (issue 40, item 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from otel_repeat_guard.dashboard import VIEWS
from otel_repeat_guard.store import DB_ENV
from tests.store.test_missing_facts import graph_runs

APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def warnings_on(monkeypatch: pytest.MonkeyPatch, db: Path, page: str) -> list[str]:
    monkeypatch.setenv(DB_ENV, str(db))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    if page != "overview":
        app.switch_page(str(VIEWS / f"{page}.py")).run()
    assert not app.exception, [e.message for e in app.exception]
    return [w.value for w in app.warning]


@pytest.mark.parametrize("page", ["overview", "runs"])
def test_a_store_without_the_guards_facts_says_so_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, page: str
) -> None:
    graph_runs(tmp_path / "s.db", {"record_facts": False})
    (said,) = [w for w in warnings_on(monkeypatch, tmp_path / "s.db", page) if "records no facts" in w]
    assert said.startswith("This store holds spans from a repeat guard that records no facts")
    assert "drop record_facts=False from the RepeatGuardSpanProcessor that feeds it" in said


def test_a_store_with_the_guards_facts_has_no_banner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    graph_runs(tmp_path / "s.db", {})
    assert not [w for w in warnings_on(monkeypatch, tmp_path / "s.db", "overview") if "records no facts" in w]
