"""The dashboard and ``doctor --store`` over a backend that kept the guard's events only as log records: a chdb
database whose ``otel_traces`` spans carry no events, beside its ``otel_logs``, gives the same figures as the same
spans with their events, as one that kept both (each event counted once), and as the embedded store."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.guard_logs import find_logs
from otel_repeat_guard.clickhouse.logs import LOGS_DDL, exporter_log_row
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, roll_up
from otel_repeat_guard.clickhouse.table import insert_sql
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.source import Reader, SQLiteReader
from otel_repeat_guard.spans.span_events import replace_events
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import demo_spans, fill
from tests.clickhouse.test_figures import QUESTIONS, _filters, _same


@dataclass(frozen=True)
class Logged:
    """One demo run: its embedded store, and its spans in chdb three ways."""

    store: Path
    events: Target
    """The spans with their events, no logs table."""
    bare: Target
    """The spans without events, the guard's log records in ``otel_logs``."""
    both: Target
    """The spans with their events and the log records too."""
    names: frozenset[str]
    """The guard's event names among the log records."""


def _fill_logs(target: Target, records: list[ReadableLogRecord], spans: list[ReadableSpan]) -> None:
    """``otel_logs`` beside ``target``'s table, as the Collector's exporter fills it. Each record names its span's
    service, as a process's logger and tracer share a resource (the demo runs every service in one process)."""
    services = {
        (format_trace_id(s.context.trace_id), format_span_id(s.context.span_id)): s.resource.attributes["service.name"]
        for s in spans
        if s.context is not None
    }
    rows = [exporter_log_row(record) for record in records]
    for row in rows:
        row["ServiceName"] = services.get((row["TraceId"], row["SpanId"]), "")
    client = ChdbClient(target)
    client.execute(LOGS_DDL.format(database=target.database, table="otel_logs"))
    for start in range(0, len(rows), 5000):
        client.execute(insert_sql(target.database, "otel_logs", rows[start : start + 5000]))


@pytest.fixture(scope="module")
def logged(demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory) -> Logged:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    store = tmp_path_factory.mktemp("logged") / "store.db"
    spans = demo_spans(store, logger_provider=provider)
    provider.shutdown()
    records = list(exporter.get_finished_logs())
    directory = demo_filled[2].path
    assert directory is not None
    bare = fill(directory, [replace_events(span, ()) for span in spans], database="logged_bare")
    both = fill(directory, spans, database="logged_both")
    for target in (bare, both):
        _fill_logs(target, records, spans)
    names = frozenset(
        str(r.log_record.event_name) for r in records if str(r.log_record.event_name).startswith("repeat")
    )
    return Logged(store, fill(directory, spans, database="logged_events"), bare, both, names)


def test_the_demo_emits_the_loops_as_log_events(logged: Logged) -> None:
    assert {"repeat_tool_guard.repeat", "repeat_tool_guard.reminder", "repeat_tool_guard.unguarded"} <= logged.names
    reader = ClickHouseReader(logged.bare)
    frame = reader.frame(
        "SELECT count() AS n FROM {db:Identifier}.otel_traces WHERE notEmpty(Events.Name)", reader.params()
    )
    assert int(frame["n"].iloc[0]) == 0  # the bare spans have no events at all


QUICK_FILTERS = 3  # no filter, a time range cutting calls off, one service


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_figure_from_the_log_records_equals_the_span_events_and_the_store(logged: Logged, question: str) -> None:
    sqlite = SQLiteReader(logged.store)
    readers = [ClickHouseReader(t) for t in (logged.events, logged.bare, logged.both)]
    for filters in _filters(logged.store)[:QUICK_FILTERS]:
        expected = QUESTIONS[question](sqlite, filters)
        for reader in readers:
            _same(expected, QUESTIONS[question](reader, filters))


def test_the_loops_are_there_to_compare(logged: Logged) -> None:
    """The figures compared above are not all zeros: the bare spans' loops come from the log records."""
    headline = ClickHouseReader(logged.bare).headline(Filters()).iloc[0]
    expected = SQLiteReader(logged.store).headline(Filters()).iloc[0]
    assert int(headline["repeated_calls"]) == int(expected["repeated_calls"]) > 0
    assert int(headline["reminders"]) == int(expected["reminders"]) > 0


def _drill(reader: Reader, tool: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = reader.hotspot_runs(Filters(), tool)
    columns = ["kind", "start_ns", "end_ns", "name", "run_length", "error", "reminder_tier", "text", "note", "outcome"]
    timeline = reader.run_timeline(str(runs.iloc[0]["agent_key"]), focus_ns=int(runs.iloc[0]["end_ns"]))
    return runs.drop(columns="end_id"), timeline[columns]


OTHER_READS: dict[str, Callable[[Reader], Any]] = {
    "undelivered_reminders": lambda r: r.undelivered_reminders(Filters()),
    "reminder_variants": lambda r: r.reminder_variants(Filters()),
    "filter_options": lambda r: r.filter_options(),
}


def test_the_drill_down_timeline_and_blind_spots_agree(logged: Logged) -> None:
    sqlite = SQLiteReader(logged.store)
    tool = str(sqlite.hotspots_by_tool(Filters())["tool"].iloc[0])
    expected = _drill(sqlite, tool)
    assert len(expected[0]) > 0 and expected[1]["run_length"].max() >= 2
    for target in (logged.events, logged.bare, logged.both):
        reader = ClickHouseReader(target)
        got = _drill(reader, tool)
        _same(expected[0], got[0])
        _same(expected[1], got[1])
        for read in OTHER_READS.values():
            _same(read(sqlite), read(reader))


def _doctor(target: Target, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["doctor", "--store", f"chdb://{target.path}?database={target.database}"])
    return code, re.sub(r"\(logged_\w+\.otel_traces\)", "(DB.otel_traces)", capsys.readouterr().out)


def test_doctor_says_the_same_of_the_log_records(logged: Logged, capsys: pytest.CaptureFixture[str]) -> None:
    expected = _doctor(logged.events, capsys)
    assert expected[0] == 1 and " in loops, " in expected[1] and "http_get: no_arguments" in expected[1]
    assert _doctor(logged.bare, capsys) == expected
    assert _doctor(logged.both, capsys) == expected


def test_the_rollup_of_the_bare_spans_reads_the_log_records(logged: Logged) -> None:
    rolled = replace(logged.bare, rollup="logged_rollup")
    report = roll_up(ChdbClient(rolled), rolled, RollPlan(until_ns=2**62))
    assert report.windows > 0
    sqlite, reader = SQLiteReader(logged.store), ClickHouseReader(rolled)
    for question in ("headline", "hotspots_by_tool", "reminder_outcomes", "unguarded_calls"):
        _same(QUESTIONS[question](sqlite, Filters()), QUESTIONS[question](reader, Filters()))


def test_a_table_without_logs_reads_as_before(demo_pair: tuple[Path, Target]) -> None:
    """No ``otel_logs`` beside the table: none is found (one question), and the reader's SQL is today's."""
    _store, target = demo_pair
    reader = ClickHouseReader(target)
    assert find_logs(reader.client, target) is None and reader.logs() is None
    assert "otel_logs" not in reader.tools(None) and "logged" not in reader.tools(None)


def test_the_calls_counted_from_requests_come_from_their_log_records(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path: Path
) -> None:
    """``repeat_tool_guard.call`` events (on model spans, read with ARRAY JOIN) as log records only."""
    from tests.clickhouse.test_requested import _requested_run

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    spans = _requested_run(tmp_path / "store.db", provider)
    provider.shutdown()
    directory = demo_filled[2].path
    assert directory is not None
    bare = fill(directory, [replace_events(span, ()) for span in spans], database="requested_logged")
    _fill_logs(bare, list(exporter.get_finished_logs()), spans)
    sqlite, reader = SQLiteReader(tmp_path / "store.db"), ClickHouseReader(bare)
    head = reader.headline(Filters()).iloc[0]
    assert (int(head["tool_calls"]), int(head["repeated_calls"]), int(head["longest_run"])) == (7, 5, 4)
    for question in ("headline", "hotspots_by_tool", "reminder_outcomes", "run_lengths", "wasted_tokens"):
        _same(QUESTIONS[question](sqlite, Filters()), QUESTIONS[question](reader, Filters()))


_SPANS = """INSERT INTO {db:Identifier}.otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, SpanAttributes,
    Duration, `Events.Timestamp`, `Events.Name`, `Events.Attributes`) VALUES
    (fromUnixTimestamp64Nano(1796428800000000000), repeat('a', 32), 'aaaaaaaaaaaaaaa1', 'chat m', 'svc',
     map('gen_ai.operation.name', 'chat', 'repeat_tool_guard.run', 'run-1'), 1000, [], [], []),
    (fromUnixTimestamp64Nano(1796428800000000000), repeat('a', 32), 'aaaaaaaaaaaaaaa2', 'chat m', 'svc',
     map('gen_ai.operation.name', 'chat', 'repeat_tool_guard.run', 'run-1'), 1000,
     [fromUnixTimestamp64Nano(1796428800000000500)], ['repeat_tool_guard.undelivered'],
     [map('repeat_tool_guard.reason', 'no_adapter', 'repeat_tool_guard.tier', 'gentle', 'gen_ai.tool.name', 'grep')])"""
_LOG_ROWS = """INSERT INTO {db:Identifier}.otel_logs (Timestamp, TraceId, SpanId, ServiceName, ScopeName, EventName,
    LogAttributes) SELECT fromUnixTimestamp64Nano(1796428800000000500), repeat('a', 32), span, 'svc', 'otel_repeat_guard',
    'repeat_tool_guard.undelivered',
    map('repeat_tool_guard.reason', 'no_adapter', 'repeat_tool_guard.tier', 'gentle', 'gen_ai.tool.name', 'grep')
    FROM (SELECT arrayJoin(['aaaaaaaaaaaaaaa1', 'aaaaaaaaaaaaaaa2']) AS span)"""


_BARE_SPANS = _SPANS[: _SPANS.index("1000,\n     [fromUnix")] + "1000, [], [], [])"


def _undelivered(directory: Path, database: str, spans_sql: str) -> ClickHouseReader:
    """Two model spans of one run (``spans_sql``) and each one's undelivered reminder as a log record."""
    target = fill(directory, [], database=database)
    client = ChdbClient(target)
    client.execute(LOGS_DDL.format(database=target.database, table="otel_logs"))
    assert ClickHouseReader(target).undelivered_reminders(Filters()).empty
    client.execute(spans_sql, {"db": target.database})
    client.execute(_LOG_ROWS, {"db": target.database})
    return ClickHouseReader(target)


def test_undelivered_reminders_kept_as_log_records_only_are_counted(
    demo_filled: tuple[list[ReadableSpan], Path, Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No span carries the guard's events (a pipeline that drops them): both reminders come from the logs."""
    from otel_repeat_guard.clickhouse import guard_logs

    monkeypatch.setattr(guard_logs, "LOOK_AGAIN_S", 0.0)  # each reader looks afresh
    assert demo_filled[2].path is not None
    reader = _undelivered(demo_filled[2].path, "undelivered_logged", _BARE_SPANS)
    assert reader.logs() is not None
    assert reader.undelivered_reminders(Filters()).to_dict("records") == [
        {"reason": "no_adapter", "tier": "gentle", "tool": "grep", "reminders": 2}
    ]


def test_a_table_whose_spans_carry_the_guards_events_is_read_without_the_logs(
    demo_filled: tuple[list[ReadableSpan], Path, Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard records each event both ways: a table whose spans keep them has them all, and the join, which
    costs two to five times a question's time, is left out (a pipeline dropping span events for some services
    only is the documented exception: one reminder here, not two)."""
    from otel_repeat_guard.clickhouse import guard_logs

    monkeypatch.setattr(guard_logs, "LOOK_AGAIN_S", 0.0)
    assert demo_filled[2].path is not None
    reader = _undelivered(demo_filled[2].path, "undelivered_both", _SPANS)
    assert reader.logs() is None
    assert "otel_logs" not in reader.tools(None)
    assert reader.undelivered_reminders(Filters()).to_dict("records") == [
        {"reason": "no_adapter", "tier": "gentle", "tool": "grep", "reminders": 1}
    ]


def test_a_logs_table_is_looked_for_once_a_minute_per_process(
    demo_filled: tuple[list[ReadableSpan], Path, Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard makes a reader per question: what was found of the logs table is kept a minute."""
    from otel_repeat_guard.clickhouse import guard_logs

    directory = demo_filled[2].path
    assert directory is not None
    target = fill(directory, [], database="logs_later")
    assert ClickHouseReader(target).logs() is None
    ChdbClient(target).execute(LOGS_DDL.format(database=target.database, table="otel_logs"))
    assert ClickHouseReader(target).logs() is None  # as found a moment ago
    monkeypatch.setattr(guard_logs, "LOOK_AGAIN_S", 0.0)
    logs = ClickHouseReader(target).logs()
    assert logs is not None and logs.name == "otel_logs" and logs.event_name == "EventName"
