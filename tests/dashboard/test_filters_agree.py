"""Every page's tables add up to the overview's headline under each filter of the sidebar, one at a time
(the Tool filter once left the conversations at 70 repeated calls under a headline of 0)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from test_app import APP, goto, metrics, run_app, table

from otel_repeat_guard.dashboard.figures import OVERALL
from otel_repeat_guard.store import DB_ENV, open_for_reading, queries
from otel_repeat_guard.store.queries import TIERS, Filters

FILTERS = ("services", "agents", "tools", "tiers")


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def number(text: str) -> int:
    return 0 if text == "filtered" else int(text.replace(",", ""))


def choose(app: AppTest, key: str, values: list[str]) -> None:
    """Only ``values`` in the filter ``key``; every other filter cleared."""
    for other in FILTERS:
        app.multiselect(key=other).set_value(values if other == key else [])
    app.run()
    assert not app.exception, [e.message for e in app.exception]


def total(app: AppTest, first_column: str, column: str, having: str | None = None) -> int | None:
    """The sum of ``column`` in the page's table whose first column is ``first_column``; None when absent."""
    found = [
        df.value
        for df in app.dataframe
        if list(df.value.columns)[:1] == [first_column] and (having is None or having in df.value.columns)
    ]
    if not found:
        return None
    rows = found[0][found[0][first_column] != OVERALL]  # the reminders' overall row repeats the others' sum
    return int(rows[column].sum())


def test_every_table_adds_up_to_the_headline_under_each_filter(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    app = run_app(monkeypatch, seeded_db)
    cases: list[tuple[str, list[str]]] = [("tools", [])]
    for key in ("services", "agents", "tools"):
        cases += [(key, [str(v)]) for v in app.multiselect(key=key).options]
    cases += [("tiers", [tier]) for tier in TIERS]
    assert len(cases) > 15
    checked = 0
    for key, values in cases:
        choose(goto(app, "overview"), key, values)
        shown = metrics(app)
        repeated = number(shown["Repeated calls"])
        reminders = number(shown["Gentle reminders"]) + number(shown["Detailed reminders"])
        wasted_tokens = number(shown["Wasted tokens"]) if "Wasted tokens" in shown else 0
        where = f"{key}={values}"

        goto(app, "hotspots")
        for label in ("tool", "agent"):
            assert (total(app, label, "repeated_calls") or 0) == repeated, (where, label)
            assert (total(app, label, "reminders") or 0) == reminders, (where, label)
        by_model = total(app, "model", "wasted_tokens")
        assert (by_model or 0) == wasted_tokens, where

        goto(app, "reminders")
        assert (total(app, "tier", "reminders", having="heeded") or 0) == reminders, where

        goto(app, "conversations")
        assert (total(app, "conversation", "repeated_calls") or 0) == repeated, where
        assert (total(app, "conversation", "reminders") or 0) == reminders, where
        checked += 1
    assert checked == len(cases)


def test_a_tool_filter_lists_only_the_conversations_that_called_it(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    app = run_app(monkeypatch, seeded_db, page="conversations")
    every = set(table(app, "conversation")["conversation"])
    choose(app, "tools", ["sql_query"])
    listed = table(app, "conversation").set_index("conversation")
    assert set(listed.index) == {c for c in every if c.startswith("analyst")}
    conn, _ = open_for_reading(seeded_db)
    try:  # the runs the box offers count the same repeated calls as their conversation's row
        for conversation, row in listed.iterrows():
            runs = queries.conversation_runs(conn, str(conversation), Filters(tools=("sql_query",)))
            assert int(runs["repeated_calls"].sum()) == int(row["repeated_calls"]) > 0
    finally:
        conn.close()
    choose(app, "tools", ["todo_write"])  # an excluded tool: its calls are no repeats
    assert total(app, "conversation", "repeated_calls") in (None, 0)


def test_a_link_opens_the_same_selection_and_the_address_follows_the_filters(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    monkeypatch.setenv(DB_ENV, str(seeded_db))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params["tool"] = ["sql_query", "no_such_tool"]  # a value the store does not offer is dropped
    app.query_params["range"] = "All time"
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert app.multiselect(key="tools").value == ["sql_query"]
    assert app.selectbox(key="time_range").value == "All time"
    assert metrics(app)["Repeated calls"] == "12"
    assert not app.warning  # no "default value and Session State" complaint
    app.multiselect(key="agents").set_value(["analyst"]).run()
    assert app.query_params == {"tool": "sql_query", "range": "All time", "agent": "analyst"}
    goto(app, "hotspots")
    assert app.multiselect(key="tools").value == ["sql_query"]
    assert list(table(app, "tool")["tool"]) == ["sql_query"]


def test_the_reminders_grouping_and_the_chosen_loop_travel_in_the_address(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    """A link to /reminders?by=agent opened grouped by tier; a link to the Runs page lost the loop shown."""
    monkeypatch.setenv(DB_ENV, str(seeded_db))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params["by"] = "agent"
    app.run()
    goto(app, "reminders")
    assert app.radio(key="efficacy_by").value == "agent"
    assert list(app.dataframe[0].value.columns)[:1] == ["agent"]
    app.radio(key="efficacy_by").set_value("model").run()
    assert app.query_params["by"] == "model"

    runs = AppTest.from_file(str(APP), default_timeout=60)
    runs.run()
    goto(runs, "runs")
    runs.selectbox(key="drill_tool").set_value("web_search").run()
    box = runs.selectbox(key="drill_run:web_search")
    box.set_value(box.options[1] if not isinstance(box.options[1], str) else box.value).run()
    link = dict(runs.query_params)
    assert link["hotspot"] == "web_search" and link["loop"].startswith("repeat:")

    linked = AppTest.from_file(str(APP), default_timeout=60)
    for name, value in link.items():
        linked.query_params[name] = value
    linked.run()
    goto(linked, "runs")
    assert linked.selectbox(key="drill_tool").value == "web_search"
    kind, end_id = link["loop"].split(":")
    assert linked.selectbox(key="drill_run:web_search").value == (kind, int(end_id))
