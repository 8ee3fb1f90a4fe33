"""Every dashboard figure read from the exporter's ``otel_traces`` (in chdb) equals the embedded store's,
for the same spans: the demo scenario, filled as the Collector's clickhouse exporter maps spans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.source import Reader, SQLiteReader, reader_for
from otel_repeat_guard.store.queries import Filters

BANDS = (200_000,)


def _same(left: Any, right: Any) -> None:
    if isinstance(left, pd.DataFrame):
        pd.testing.assert_frame_equal(
            left.reset_index(drop=True), right.reset_index(drop=True), check_dtype=False, check_exact=False
        )
    else:
        assert left == right


def same_drill_down(store: Path, target: Target, tool: str) -> pd.DataFrame:
    """The drill-down of ``tool``'s longest run and that run's timeline agree on both stores; the store's timeline."""
    sqlite, clickhouse = SQLiteReader(store), ClickHouseReader(target)
    expected, got = sqlite.hotspot_runs(Filters(), tool), clickhouse.hotspot_runs(Filters(), tool)
    _same(expected.drop(columns="end_id"), got.drop(columns="end_id"))
    key = str(expected.iloc[0]["agent_key"])
    columns = ["kind", "start_ns", "end_ns", "name", "run_length", "error", "reminder_tier"]
    timeline = sqlite.run_timeline(key)
    _same(timeline[columns], clickhouse.run_timeline(key)[columns])
    return timeline


def _filters(store: Path) -> list[Filters]:
    """No filter, and each filter the sidebar offers, one at a time (and a time range cutting calls off)."""
    reader = SQLiteReader(store)
    bounds = reader.time_bounds().iloc[0]
    first, last = int(bounds["first_ns"]), int(bounds["last_ns"])
    options = reader.filter_options()
    values = {kind: sorted(options[options["kind"] == kind]["value"]) for kind in ("service", "agent", "tool")}
    return [
        Filters(),
        Filters(start_ns=first + (last - first) // 3, end_ns=last - (last - first) // 3),
        Filters(services=(values["service"][0],)),
        Filters(agents=tuple(values["agent"][:2])),
        Filters(tools=(values["tool"][0],)),
        Filters(tiers=("gentle",)),
        Filters(kind="repeat"),
    ]


QUESTIONS: dict[str, Callable[[Reader, Filters], Any]] = {
    "headline": lambda r, f: r.headline(f),
    "hotspots_by_tool": lambda r, f: r.hotspots_by_tool(f),
    "hotspots_by_agent": lambda r, f: r.hotspots_by_agent(f),
    "model_tokens": lambda r, f: r.model_tokens(f, BANDS),
    "wasted_tokens": lambda r, f: r.wasted_tokens(f, BANDS),
    "reminder_outcomes": lambda r, f: r.reminder_outcomes(f),
    "reminder_count": lambda r, f: r.reminder_count(f),
    "over_time": lambda r, f: r.over_time(f, 1.0),
    "run_lengths": lambda r, f: r.run_lengths(f),
    "unguarded_calls": lambda r, f: r.unguarded_calls(f),
    "conversations": lambda r, f: r.conversations(f),
}


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_page_figure_equals_the_embedded_stores(demo_pair: tuple[Path, Target], question: str) -> None:
    store, target = demo_pair
    sqlite, clickhouse = SQLiteReader(store), ClickHouseReader(target)
    for filters in _filters(store):
        expected = QUESTIONS[question](sqlite, filters)
        _same(expected, QUESTIONS[question](clickhouse, filters))


def test_the_store_wide_reads_agree(demo_pair: tuple[Path, Target]) -> None:
    store, target = demo_pair
    sqlite, clickhouse = SQLiteReader(store), ClickHouseReader(target)
    for name in ("has_data", "time_bounds", "filter_options", "has_model_calls"):
        _same(getattr(sqlite, name)(), getattr(clickhouse, name)())
    tools = (*tuple(sorted(sqlite.filter_options().query("kind == 'tool'")["value"])), "todo_write")
    _same(sqlite.excluded_tools(tools), clickhouse.excluded_tools(tools))
    conversation = str(sqlite.conversations(Filters())["conversation"].iloc[0])
    _same(sqlite.conversation_runs(conversation), clickhouse.conversation_runs(conversation))
    for filters in _filters(store):  # the runs' repeated calls follow the filters, on both stores
        _same(sqlite.conversation_runs(conversation, filters), clickhouse.conversation_runs(conversation, filters))


def test_the_drill_down_finds_the_same_runs_and_timeline(demo_pair: tuple[Path, Target]) -> None:
    """Call ids differ (the table has no store order: a call's id there is its end); the runs and rows do not."""
    store, target = demo_pair
    sqlite, clickhouse = SQLiteReader(store), ClickHouseReader(target)
    tool = str(sqlite.hotspots_by_tool(Filters())["tool"].iloc[0])
    expected, got = sqlite.hotspot_runs(Filters(), tool), clickhouse.hotspot_runs(Filters(), tool)
    _same(expected.drop(columns="end_id"), got.drop(columns="end_id"))
    run = expected.iloc[0]
    start = sqlite.loop_start_ns(str(run["agent_key"]), int(run["end_id"]), int(run["run_length"]))
    assert start == clickhouse.loop_start_ns(str(run["agent_key"]), int(got.iloc[0]["end_id"]), int(run["run_length"]))
    columns = ["kind", "start_ns", "end_ns", "name", "run_length", "error", "reminder_tier", "text", "note", "outcome"]
    _same(
        sqlite.run_timeline(str(run["agent_key"]), focus_ns=start)[columns],
        clickhouse.run_timeline(str(run["agent_key"]), focus_ns=start)[columns],
    )


def test_the_seam_picks_the_reader_by_the_store_name(demo_pair: tuple[Path, Target]) -> None:
    store, target = demo_pair
    assert isinstance(reader_for(str(store)), SQLiteReader)
    reader = reader_for(f"chdb://{target.path}")
    assert isinstance(reader, ClickHouseReader)
    assert (
        reader.headline(Filters()).iloc[0]["tool_calls"]
        == SQLiteReader(store).headline(Filters()).iloc[0]["tool_calls"]
    )


def test_nothing_is_written_to_the_users_table(demo_pair: tuple[Path, Target]) -> None:
    _store, target = demo_pair
    reader = ClickHouseReader(target)
    sql = "SELECT count() AS n, max(modification_time) AS m FROM system.parts WHERE database = {db:String} AND table = {tbl:String} AND active"
    before = reader.frame(sql, {"db": target.database, "tbl": target.table})
    for question in QUESTIONS.values():
        question(reader, Filters())
    pd.testing.assert_frame_equal(before, reader.frame(sql, {"db": target.database, "tbl": target.table}))


def test_spans_no_guard_saw_are_a_blind_spot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tool span without the guard's facts or events (the guard was not in that process) is listed, by tool."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.clickhouse.filling import fill

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "unguarded"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("plain")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(3):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
            with tracer.start_as_current_span("execute_tool search", attributes=attributes):
                pass
    target = fill(tmp_path / "chdb", memory.get_finished_spans(), database="other", table="spans")
    frame = ClickHouseReader(target).unguarded_calls(Filters())
    assert frame.to_dict("records") == [{"reason": "no_guard", "tool": "search", "calls": 3}]

    # The page's Why and doctor's line say the guard was not there, and what fixes it.
    from otel_repeat_guard.cli.main import main
    from otel_repeat_guard.decide.blind_spots import explain

    assert explain("no_guard") == "no guard facts or events on the span: the guard was not in the process that made it"
    assert main(["doctor", "--store", f"chdb://{target.path}?database=other&table=spans"]) == 1
    out = capsys.readouterr().out
    assert f"search: no_guard: {explain('no_guard')} (put the guard in the process that made these spans" in out
    assert "otel-repeat-guard ingest --from URL --replay)" in out


def test_doctor_reports_what_the_guard_could_not_see(
    demo_pair: tuple[Path, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_repeat_guard.cli.main import main

    store, target = demo_pair
    assert main(["doctor", "--store", f"chdb://{target.path}"]) == 1  # the demo's http_get has no arguments
    out = capsys.readouterr().out
    headline = SQLiteReader(store).headline(Filters()).iloc[0]
    assert f"{int(headline['tool_calls']):,} tracked tool calls" in out
    assert "http_get: no_arguments" in out


def test_doctor_reads_the_time_range_it_is_given(
    demo_pair: tuple[Path, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--since`` and ``--until`` bound the calls doctor reads as the dashboard's range does (by their ends)."""
    from datetime import datetime, timezone

    from otel_repeat_guard.cli.ingest import time_point
    from otel_repeat_guard.cli.main import main

    store, target = demo_pair
    bounds = SQLiteReader(store).time_bounds().iloc[0]
    first, last = int(bounds["first_ns"]), int(bounds["last_ns"])

    def iso(ns: int) -> str:
        return datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc).isoformat()

    since, until = iso(first + (last - first) // 3), iso(last - (last - first) // 3)
    assert main(["doctor", "--store", f"chdb://{target.path}", "--since", since, "--until", until]) in (0, 1)
    out = capsys.readouterr().out
    headline = SQLiteReader(store).headline(Filters(start_ns=time_point(since), end_ns=time_point(until))).iloc[0]
    assert f"{int(headline['tool_calls']):,} tracked tool calls" in out
    assert 0 < int(headline["tool_calls"]) < int(SQLiteReader(store).headline(Filters()).iloc[0]["tool_calls"])
    assert f"calls that ended from {since[:10]} {since[11:19]} UTC to {until[:10]} {until[11:19]} UTC" in out

    assert main(["doctor", "--store", f"chdb://{target.path}", "--since", "2099-01-01"]) == 0  # nothing unseen
    assert ", calls that ended from 2099-01-01 00:00:00 UTC: 0 tracked tool calls" in capsys.readouterr().out

    assert main(["doctor", "--store", f"chdb://{target.path}", "--since", "1h", "--until", "2h"]) == 2
    assert main(["doctor", "x.jsonl", "--since", "1h"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "otel-repeat-guard: error: --since is after --until: nothing lies between them",
        "otel-repeat-guard: error: --since and --until bound a ClickHouse table (--store URL); files are read whole",
    ]


def test_a_time_is_a_duration_ago_or_an_iso_date_utc_unless_it_says_otherwise() -> None:
    import argparse
    import time

    from otel_repeat_guard.cli.ingest import time_point

    assert time_point("2026-12-05") == 1_796_428_800 * 10**9
    assert time_point("2026-12-05T10:00:00.5") == (1_796_428_800 + 36_000) * 10**9 + 500_000_000
    assert time_point("2026-12-05T10:00+01:00") == (1_796_428_800 + 32_400) * 10**9
    before = time.time_ns()
    point = time_point("24h")
    assert before - 86_400 * 10**9 <= point <= time.time_ns() - 86_400 * 10**9
    assert abs(time_point("90m") - time_point("1.5h")) < 60 * 10**9
    assert time_point("100000000d") == time_point("1900-01-01") == 0  # before the epoch: from the epoch on
    for bad in ("yesterday", "24", "h", "-3h", "2026-13-01"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be a time"):
            time_point(bad)
