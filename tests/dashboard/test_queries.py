"""The query module against a store seeded by the demo scenario, checked against the replay."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from replay import replay

from otel_repeat_guard.dashboard import queries
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.demo.scenario import AgentScript
from otel_repeat_guard.store import open_for_reading
from otel_repeat_guard.store.schema import ROLLUP_FROM_CALLS


@pytest.fixture
def conn(seeded_db: Path) -> Iterator[sqlite3.Connection]:
    connection, has_schema = open_for_reading(seeded_db)
    assert has_schema
    yield connection
    connection.close()


def test_headline_matches_the_replayed_scenario(conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]) -> None:
    expected = replay(scripts).headline()
    row = queries.headline(conn, Filters()).iloc[0].to_dict()
    assert {k: row[k] for k in expected} == pytest.approx(expected)
    assert row["reminders"] == expected["gentle_reminders"] + expected["detailed_reminders"]  # type: ignore[operator]


def test_headline_pins_the_scenario_numbers(conn: sqlite3.Connection) -> None:
    # The same numbers, written out, so a change to the scenario is a visible decision.
    row = queries.headline(conn, Filters()).iloc[0]
    assert (row["tool_calls"], row["untracked_calls"], row["repeated_calls"]) == (60, 3, 35)
    assert (row["gentle_reminders"], row["detailed_reminders"]) == (6, 6)
    assert (row["agents_with_loops"], row["longest_run"]) == (6, 12)
    assert row["repeated_seconds"] == pytest.approx(17.845)


@pytest.mark.parametrize(
    ("by", "query", "label"), [("tool", "hotspots_by_tool", "tool"), ("agent", "hotspots_by_agent", "agent")]
)
def test_hotspot_rows_match_the_replay(
    conn: sqlite3.Connection, scripts: tuple[AgentScript, ...], by: str, query: str, label: str
) -> None:
    expected = replay(scripts).grouped(by)
    frame = getattr(queries, query)(conn, Filters())
    got = {row.pop(label): row for row in frame.to_dict("records")}
    assert got.keys() == expected.keys()
    for name, figures in expected.items():
        assert got[name] == pytest.approx(figures), name
    assert list(frame["repeated_calls"]) == sorted(frame["repeated_calls"], reverse=True)


def test_run_length_distribution_is_the_final_run_lengths(
    conn: sqlite3.Connection, scripts: tuple[AgentScript, ...]
) -> None:
    frame = queries.run_lengths(conn, Filters())
    assert dict(zip(frame["run_length"], frame["runs"], strict=True)) == dict(replay(scripts).final_runs)


def test_over_time_counts_repeats_and_reminders_by_tier(conn: sqlite3.Connection) -> None:
    frame = queries.over_time(conn, Filters(), bucket_s=86400)
    totals = frame.groupby("series")["count"].sum().to_dict()
    assert totals == {"repeated calls": 35, "gentle reminders": 6, "detailed reminders": 6}


def test_filters_narrow_every_figure(conn: sqlite3.Connection) -> None:
    by_tool = queries.headline(conn, Filters(tools=("sql_query",))).iloc[0]
    assert (by_tool["tool_calls"], by_tool["repeated_calls"], by_tool["longest_run"]) == (16, 12, 12)
    ops = queries.headline(conn, Filters(services=("ops-bot",))).iloc[0]
    assert (ops["tool_calls"], ops["repeated_calls"], ops["agents_with_loops"]) == (12, 7, 2)
    agent = queries.hotspots_by_tool(conn, Filters(agents=("coder",)))
    assert list(agent["tool"]) == ["run_tests", "grep"]
    gentle_only = queries.headline(conn, Filters(tiers=("gentle",))).iloc[0]
    assert (gentle_only["gentle_reminders"], gentle_only["detailed_reminders"]) == (6, 0)
    assert gentle_only["repeated_calls"] == 35  # the tier filter narrows reminders only
    future = queries.headline(conn, Filters(start_ns=2**62)).iloc[0]
    assert (future["tool_calls"], future["wasted_share"], future["longest_run"]) == (0, 0.0, 0)


def test_drill_down_lists_runs_and_their_ordered_calls(conn: sqlite3.Connection) -> None:
    runs = queries.hotspot_runs(conn, Filters(), "grep")
    assert list(runs["run_length"]) == [4]  # the operator's single grep is a run of one
    run = runs.iloc[0]
    calls = queries.chain(conn, str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    # todo_write is excluded but shown where it happened, between the repeated greps.
    assert list(calls["tool"]) == ["grep", "todo_write", "grep", "todo_write", "grep", "todo_write", "grep"]
    assert list(calls["run_length"].fillna(0).astype(int)) == [1, 0, 2, 0, 3, 0, 4]
    assert list(calls["reminder_tier"].fillna("")) == ["", "", "", "", "gentle", "", ""]
    assert calls["arguments"].iloc[0] == '{"path":"src","pattern":"def parse_config"}'


def test_drill_down_of_a_denied_call_shows_its_status(conn: sqlite3.Connection) -> None:
    run = queries.hotspot_runs(conn, Filters(), "shell").iloc[0]
    calls = queries.chain(conn, str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    assert len(calls) == 6
    assert set(calls["status"]) == {"error / denied"}


def test_drill_down_keeps_runs_split_by_a_new_prompt(conn: sqlite3.Connection) -> None:
    runs = queries.hotspot_runs(conn, Filters(), "web_search")
    assert list(runs["run_length"]) == [2, 2]  # 2 + 2 around the second prompt, never 4


def test_filter_options_and_bounds(conn: sqlite3.Connection) -> None:
    options = queries.filter_options(conn)
    services = list(options.loc[options["kind"] == "service", "value"])
    assert services == ["coding-agent", "ops-bot", "research-assistant"]
    assert "researcher/fact-checker" in set(options.loc[options["kind"] == "agent", "value"])
    bounds = queries.time_bounds(conn).iloc[0]
    assert bounds["rows"] == 1  # there are calls
    assert bounds["first_ns"] <= bounds["last_ns"]


@pytest.mark.parametrize(("span_s", "width"), [(0, 1), (59, 1), (600, 10), (3600, 60), (10**7, 7 * 86400)])
def test_bucket_width_gives_about_sixty_buckets(span_s: int, width: int) -> None:
    assert queries.bucket_seconds(span_s * 1_000_000_000) == width


def test_the_demo_store_rollup_equals_its_calls(conn: sqlite3.Connection) -> None:
    # The demo writes through the exporter with real batching, so first calls are resolved late.
    kept = conn.execute("SELECT * FROM call_rollup ORDER BY 1, 2, 3, 4, 5").fetchall()
    assert kept == conn.execute(f"{ROLLUP_FROM_CALLS} ORDER BY 1, 2, 3, 4, 5").fetchall()
    assert not [row for row in kept if str(row[2]).startswith("trace:")]
