"""A run drawn as a picture (``run_chart``), on the seeded store's coder run: its calls on a time axis, the
repeated calls numbered by run position, the reminders sent and received, where the loop broke."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from test_app import run_app, timeline

from otel_repeat_guard.dashboard import run_chart
from otel_repeat_guard.store import open_for_reading, queries


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def coder_run(seeded_db: Path) -> pd.DataFrame:
    conn, _ = open_for_reading(seeded_db)
    try:
        runs = queries.hotspot_runs(conn, queries.Filters(), "run_tests")
        (key,) = set(runs["agent_key"])
        return queries.run_timeline(conn, str(key))
    finally:
        conn.close()


def test_every_call_is_on_its_lane_and_the_repeats_carry_their_run_position(coder_run: pd.DataFrame) -> None:
    calls = run_chart.calls_frame(coder_run)
    assert len(calls) == len(coder_run)
    assert (calls["lane"] == "model calls").sum() == (coder_run["kind"] == "model").sum()
    assert (calls["end"] >= calls["start"]).all()
    repeated = calls[calls["what"] == "repeated call"]
    assert repeated.loc[repeated["name"] == "run_tests", "position"].tolist() == [str(i) for i in range(2, 9)]
    assert set(calls.loc[calls["position"] == "excluded", "what"]) == {"excluded tool"}
    models = calls[calls["lane"] == "model calls"]
    assert models["tokens"].str.fullmatch(r"[\d,]+ in / [\d,]+ out").all()  # the hover's tokens


def test_the_reminders_are_marked_where_sent_and_received_and_the_breaks_where_they_broke(
    coder_run: pd.DataFrame,
) -> None:
    marks = run_chart.marks_frame(coder_run)
    sent = marks[marks["mark"] == "reminder sent"]
    received = marks[marks["mark"] == "reminder received"]
    assert len(sent) == len(received) == int(coder_run["reminder_tier"].notna().sum()) > 0
    assert set(sent["lane"]) == {"tool calls"} and set(received["lane"]) == {"model calls"}
    assert (received["at"].to_numpy() >= sent["at"].to_numpy()).all()  # received once sent, pair by pair
    broken = marks[marks["mark"] == "loop broken"]
    assert broken["note"].tolist()[0] == "loop broken after 8 identical calls"


def test_the_runs_page_draws_the_picture_above_the_table_with_arguments_and_tokens_on_hover(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    app = run_app(monkeypatch, seeded_db, page="runs")
    app.selectbox(key="drill_tool").set_value("run_tests").run()
    (spec,) = [json.loads(c.proto.spec) for c in app.get("vega_lite_chart")]
    assert spec["title"].startswith("The run, call by call")
    bars = spec["layer"][0]
    assert bars["mark"]["type"] == "bar" and bars["encoding"]["x2"]["field"] == "end"
    hover = {t["title"] if "title" in t else t["field"] for t in bars["encoding"]["tooltip"]}
    assert {"arguments or output", "tokens", "run position", "what happened"} <= hover
    kinds = [layer["mark"]["type"] for layer in spec["layer"]]
    assert kinds == ["bar", "point", "text", "point", "rule"]
    table = timeline(app)  # and the same calls as a table, under it
    assert table["note"].str.contains("loop broken after 8 identical calls").any()


@pytest.fixture
def denied_run(seeded_db: Path) -> pd.DataFrame:
    conn, _ = open_for_reading(seeded_db)
    try:
        runs = queries.hotspot_runs(conn, queries.Filters(), "shell")
        return queries.run_timeline(conn, str(runs["agent_key"].iloc[0]))
    finally:
        conn.close()


def test_a_failing_repeat_is_drawn_as_a_repeat_with_its_run_position_and_a_cross(denied_run: pd.DataFrame) -> None:
    """The operator's denied shell call, six times in a row: a loop of failing calls, not six error dots."""
    calls = run_chart.calls_frame(denied_run)
    shell = calls[(calls["name"] == "shell") & calls["failed"]]
    assert shell["what"].tolist() == ["tool call", *["repeated call"] * 5]
    assert shell["position"].tolist() == [str(i) for i in range(1, 7)]
    spec = run_chart.run_timeline(denied_run).to_dict()
    numbers = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "text")
    crosses = spec["layer"][-1]
    assert crosses["encoding"]["color"]["field"] == "what"  # the ✕ in the colour of what the call was
    assert crosses["encoding"]["shape"]["scale"]["range"][-1] == run_chart.MARK_SHAPES[-1]
    datasets = spec["datasets"]
    assert [r["position"] for r in datasets[numbers["data"]["name"]] if r["name"] == "shell"] == [
        str(i) for i in range(2, 7)
    ]
    assert len(datasets[crosses["data"]["name"]]) == len(shell) == 6


def test_the_time_axis_holds_every_call_whole(denied_run: pd.DataFrame) -> None:
    calls = run_chart.calls_frame(denied_run)
    first, last = run_chart.time_domain(calls)
    assert first < calls["start"].min().value / 1e6 and last > calls["end"].max().value / 1e6
