"""The Overview's chart over time is folded on a fresh page, and read and drawn once opened: the Vega chart was
the heaviest part of a fresh page's load (benchmarks/dashboard_page.py), and it sits below the fold."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest
from test_app import metrics as shown
from test_app import run_app

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections.overview import OVER_TIME_KEY
from otel_repeat_guard.store import open_for_reading
from otel_repeat_guard.store.queries import Filters


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def _opened(app: AppTest) -> AppTest:
    app.session_state[OVER_TIME_KEY] = True  # what opening the fold does
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def test_a_fresh_overview_folds_the_chart_over_time_and_reads_it_only_once_opened(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    asked: list[float] = []
    read = reads.over_time

    def counted(db: str, filters: Filters, bucket_s: float) -> pd.DataFrame:
        asked.append(bucket_s)
        result: pd.DataFrame = read(db, filters, bucket_s)
        return result

    monkeypatch.setattr(reads, "over_time", counted)
    app = run_app(monkeypatch, seeded_db)
    (fold,) = app.expander
    assert fold.label.startswith("Repeated calls and reminders per ") and fold.label.endswith(" s")
    assert not fold.proto.expanded
    assert app.get("vega_lite_chart") == [] and asked == []  # folded: neither read nor sent to the browser
    assert len(shown(app)) == 12  # the rest of the page as before

    _opened(app)
    (chart,) = app.get("vega_lite_chart")
    title = str(json.loads(chart.proto.spec)["title"])
    assert len(asked) == 1 and title == "Repeats and reminders per " + fold.label.rsplit(" per ", 1)[1]


def test_the_opened_chart_counts_what_the_store_and_the_headline_count(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    app = _opened(run_app(monkeypatch, seeded_db))
    (chart,) = app.get("vega_lite_chart")
    drawn = convert_arrow_bytes_to_pandas_df(chart.proto.data.data).groupby("series")["count"].sum()
    conn, _ = open_for_reading(seeded_db)
    try:
        repeats, gentle, detailed = conn.execute(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE reminder_tier = 'gentle'),"
            " COUNT(*) FILTER (WHERE reminder_tier = 'detailed') FROM tool_calls WHERE run_length >= 2"
        ).fetchone()
    finally:
        conn.close()
    assert repeats > 0 and gentle > 0 and detailed > 0
    assert drawn.to_dict() == {"repeated calls": repeats, "gentle reminders": gentle, "detailed reminders": detailed}
    metrics = shown(app)
    assert (metrics["Repeated calls"], metrics["Gentle reminders"], metrics["Detailed reminders"]) == (
        f"{repeats:,}",
        f"{gentle:,}",
        f"{detailed:,}",
    )
