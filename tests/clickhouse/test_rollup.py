"""The guard's rollup of the Collector's table (``?rollup=DB``): the reader's call and model rows kept in a database of
the guard's own. Every figure, drill-down and timeline read through it equals the one read from the table itself
(and so the embedded store's); rolling up again changes nothing; what is not rolled up yet is read from the table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.clickhouse.client import ChdbClient, ClickHouseStoreError
from otel_repeat_guard.clickhouse.commands import open_reader
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, RollReport, roll_up
from otel_repeat_guard.clickhouse.target import Target, TargetError, parse
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill
from tests.clickhouse.test_figures import QUESTIONS, _filters, _same, same_drill_down

EVERYTHING = RollPlan(until_ns=4 * 10**18)
"""Every window up to 2096: all the tests' spans."""
_PARTS = "SELECT count() AS n, max(modification_time) AS m FROM system.parts WHERE database = {db:String} AND active"


def rolled(target: Target, database: str, plan: RollPlan = EVERYTHING) -> tuple[Target, RollReport]:
    """``target`` read through its rollup in ``database``, rolled up by ``plan``."""
    through = replace(target, rollup=database)
    return through, roll_up(ChdbClient(through), through, plan)


def _rows(target: Target) -> dict[str, int]:
    """How many rows each of the rollup's tables holds."""
    client = ChdbClient(target)
    counts = {}
    for kind in ("calls", "models", "runs", "windows"):
        sql = "SELECT count() AS n FROM {rdb:Identifier}.{t:Identifier}"
        counts[kind] = int(client.frame(sql, {"rdb": str(target.rollup), "t": f"{target.table}_{kind}"})["n"].iloc[0])
    return counts


def _every_read(store: Path, target: Target, through: Target) -> None:
    """Every page question under every sidebar filter, the store-wide reads, a conversation's runs, the drill-down
    and a run's timeline: the same through the rollup as from the table, and as the embedded store's."""
    sqlite, table, rollup = SQLiteReader(store), ClickHouseReader(target), ClickHouseReader(through)
    for question in QUESTIONS.values():
        for filters in _filters(store):
            expected = question(table, filters)
            _same(expected, question(rollup, filters))
            _same(question(sqlite, filters), question(rollup, filters))
    for name in ("has_data", "time_bounds", "filter_options", "has_model_calls"):
        _same(getattr(table, name)(), getattr(rollup, name)())
    tools = tuple(sorted(sqlite.filter_options().query("kind == 'tool'")["value"]))
    _same(table.excluded_tools(tools), rollup.excluded_tools(tools))
    conversations = sqlite.conversations(Filters())
    for conversation in conversations["conversation"].head(3):
        _same(table.conversation_runs(str(conversation)), rollup.conversation_runs(str(conversation)))
    tool = str(sqlite.hotspots_by_tool(Filters())["tool"].iloc[0])
    runs = table.hotspot_runs(Filters(), tool)
    _same(runs, rollup.hotspot_runs(Filters(), tool))
    key, end_id, length = str(runs.iloc[0]["agent_key"]), int(runs.iloc[0]["end_id"]), int(runs.iloc[0]["run_length"])
    start = table.loop_start_ns(key, end_id, length)
    assert start is not None
    assert rollup.loop_start_ns(key, end_id, length) == start
    _same(table.run_timeline(key, focus_ns=start), rollup.run_timeline(key, focus_ns=start))
    _same(table.run_timeline(key), rollup.run_timeline(key))
    timeline = same_drill_down(store, through, tool)
    assert len(timeline) > 0


def test_the_rollup_gives_every_figure_the_raw_table_gives(demo_pair: tuple[Path, Target]) -> None:
    store, target = demo_pair
    through, report = rolled(target, "guard_demo")
    assert report.windows >= 1
    assert report.spans == int(ChdbClient(target).frame("SELECT count() AS n FROM otel.otel_traces", {})["n"].iloc[0])
    counts = _rows(through)
    head = SQLiteReader(store).headline(Filters()).iloc[0]
    assert counts["calls"] == int(head["tool_calls"]) + int(head["untracked_calls"])
    assert report.rolled_to > int(
        ClickHouseReader(target).time_bounds().iloc[0]["last_ns"]
    )  # nothing left to the table
    _every_read(store, target, through)


def test_the_capture_through_its_rollup_is_the_same_loop(capture_pair: tuple[Path, Target]) -> None:
    """The real LangChain capture: nine identical lookups, reminded three times, the same through the rollup."""
    store, target = capture_pair
    through, _report = rolled(target, "guard_demo")  # a second table's rollup beside the demo's, named after it
    head = ClickHouseReader(through).headline(Filters()).iloc[0]
    assert (int(head["tool_calls"]), int(head["repeated_calls"]), int(head["longest_run"])) == (9, 8, 9)
    assert int(ClickHouseReader(through).reminder_count(Filters())) == 3
    _every_read(store, target, through)


def test_rolling_up_twice_changes_nothing(demo_pair: tuple[Path, Target]) -> None:
    _store, target = demo_pair
    through, _first = rolled(target, "guard_twice")
    before = _rows(through)
    headline = ClickHouseReader(through).headline(Filters())
    _through, again = rolled(target, "guard_twice")
    assert (again.windows, again.spans) == (0, 0)
    assert _rows(through) == before
    pd.testing.assert_frame_equal(headline, ClickHouseReader(through).headline(Filters()))


def test_a_range_not_yet_rolled_up_is_read_from_the_table(demo_pair: tuple[Path, Target]) -> None:
    """Rolled up to the middle of the demo only (windows of 100 ms): the rest comes from the table, the figures
    are the table's, and the next run rolls the rest up."""
    store, target = demo_pair
    bounds = ClickHouseReader(target).time_bounds().iloc[0]
    first, last = int(bounds["first_ns"]), int(bounds["last_ns"])
    plan = RollPlan(until_ns=(first + last) // 2, window_ns=10**8)
    through, report = rolled(target, "guard_half", plan)
    assert 0 < report.rolled_to <= (first + last) // 2
    whole, _report = rolled(target, "guard_demo")
    assert 0 < _rows(through)["calls"] < _rows(whole)["calls"]
    table, rollup = ClickHouseReader(target), ClickHouseReader(through)
    for question in QUESTIONS.values():
        for filters in _filters(store):
            _same(question(table, filters), question(rollup, filters))
    _same(table.filter_options(), rollup.filter_options())
    _through, rest = rolled(target, "guard_half", replace(plan, until_ns=4 * 10**18))
    assert rest.windows >= 1
    assert rest.rolled_to > last
    _same(table.headline(Filters()), rollup.headline(Filters()))


def test_a_window_that_got_late_spans_is_rolled_up_again(demo_filled: tuple[list[ReadableSpan], Path, Target]) -> None:
    """Spans that reach the table after their window was rolled up: the next run rolls that window up again."""
    spans, _store, target = demo_filled
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
    early, late = tools[: len(tools) // 2], tools[len(tools) // 2 :]
    table = fill(target.path or Path(), early, database="late", table="spans")
    plan = RollPlan(until_ns=4 * 10**18, window_ns=10**18)  # one window holds them all
    through, first = rolled(table, "guard_late", plan)
    assert (first.windows, first.spans) == (1, len(early))
    calls = _rows(through)["calls"]
    fill(target.path or Path(), late, database="late", table="spans")
    _through, again = rolled(table, "guard_late", plan)
    assert (again.windows, again.spans) == (1, len(tools))
    assert _rows(through)["calls"] > calls
    _same(ClickHouseReader(table).headline(Filters()), ClickHouseReader(through).headline(Filters()))


def test_nothing_is_written_to_the_users_database_by_the_rollup(demo_pair: tuple[Path, Target]) -> None:
    _store, target = demo_pair
    client = ChdbClient(target)
    before = client.frame(_PARTS, {"db": target.database})
    rolled(target, "guard_untouched")
    ClickHouseReader(replace(target, rollup="guard_untouched")).headline(Filters())
    pd.testing.assert_frame_equal(before, client.frame(_PARTS, {"db": target.database}))


def test_the_store_url_names_the_rollup_database() -> None:
    assert parse("chdb:///data?rollup=guard").rollup == "guard"
    assert parse("clickhouse://reader@ch:8123/otel?table=otel_traces&rollup=guard", {}).rollup == "guard"
    assert parse("chdb:///data").rollup is None
    with pytest.raises(TargetError, match="'otel' is the table's own database"):
        parse("chdb:///data?rollup=otel")
    with pytest.raises(TargetError, match="rollup database name 'a-b'"):
        parse("chdb:///data?rollup=a-b")
    with pytest.raises(ValueError, match="window_ns must be at least 1"):
        RollPlan(until_ns=0, window_ns=0)


def test_the_rollup_command_rolls_up_and_refuses_in_one_line(
    demo_pair: tuple[Path, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_repeat_guard.cli.main import main

    _store, target = demo_pair
    url = f"chdb://{target.path}"
    with pytest.raises(ClickHouseStoreError, match=r"holds no rollup of otel\.otel_traces in database guard_cli"):
        open_reader(f"{url}?rollup=guard_cli")
    assert main(["rollup", "--store", url]) == 2
    assert main(["rollup", "--store", f"{url}?rollup=otel"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "rollup needs the database to keep it in" in err[0]
    assert "is the table's own database" in err[1]
    assert main(["rollup", "--store", f"{url}?rollup=guard_cli", "--settle", "0"]) == 0
    out = capsys.readouterr().out
    assert "otel.otel_traces: rolled up " in out
    assert "into guard_cli" in out
    assert "the spans after it are read from the table" in out
    assert main(["doctor", "--store", f"{url}?rollup=guard_cli"]) == 1  # the demo's http_get has no arguments
    assert "tracked tool calls" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("include", "exclude"), [(("*search*", "http_*"), ()), ((), ()), (("*",), ("http_get", "todo_write"))]
)
def test_the_tracked_tools_follow_the_configuration_through_the_rollup(
    demo_pair: tuple[Path, Target], include: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    """Tracked tools are not rolled up: the same rollup answers for any include/exclude patterns, as the table."""
    from otel_repeat_guard.core.config import GuardConfig

    store, target = demo_pair
    through, _report = rolled(target, "guard_demo")
    config = GuardConfig(include=include, exclude=exclude)
    table, rollup = ClickHouseReader(target, config), ClickHouseReader(through, config)
    for name in ("headline", "hotspots_by_tool", "unguarded_calls", "run_lengths"):
        _same(QUESTIONS[name](table, Filters()), QUESTIONS[name](rollup, Filters()))
    head = rollup.headline(Filters()).iloc[0]
    every = SQLiteReader(store).headline(Filters()).iloc[0]
    total = int(every["tool_calls"]) + int(every["untracked_calls"])
    assert int(head["tool_calls"]) + int(head["untracked_calls"]) == total
    if not include and not exclude:
        assert int(head["untracked_calls"]) == 0
    else:
        assert 0 < int(head["tool_calls"]) < total
