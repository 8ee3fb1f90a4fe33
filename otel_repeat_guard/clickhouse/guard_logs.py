"""The guard's log events in the exporter's ``otel_logs``, as SQL: read onto their spans where the spans have none.

The guard emits each event it puts on a span also as a log event in the span's context
(``decide/log_events.py``). A backend may keep those while its ``otel_traces`` rows carry no events (a pipeline
that drops span events). :func:`find_logs` looks once whether the logs table beside the traces table exists (and
how it names an event: ``EventName``, or ``LogAttributes['event.name']`` in a table made before that column);
:func:`joined` turns a fragment that reads the guard's events from ``Events.*`` into one that reads them from
the span's own events when it carries any of the guard's, else from its log events (joined by ``TraceId`` and
``SpanId``): an event kept both ways counts once. With no logs table the fragments stay exactly as they are.

A record whose name a Collector dropped (older than OTLP 1.5) is known, in the guard's scope, by the attributes
only its event has (``decide/log_names.py``, as ``ingest/log_records.py`` reads them). Every value is a parameter
(:meth:`LogsTable.params`); the table is only read. This module imports neither the SDK's logs nor the ingest
extra: the dashboard and ``doctor`` read a table without them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from otel_repeat_guard.clickhouse.calls import REQUESTED_CALLS, TABLE, TOOL_CALLS, TOOL_SPANS
from otel_repeat_guard.clickhouse.client import Client, Value
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.decide.log_names import EVENT_NAME_ATTRIBUTE, GUARD_PREFIX, GUARD_SCOPE, MARKS

DEFAULT_LOGS_TABLE: Final = "otel_logs"
_NEEDED: Final = ("Timestamp", "TraceId", "SpanId", "ScopeName", "LogAttributes")
_COLUMNS: Final = "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {logs:String}"


def logs_table(traces_table: str) -> str:
    """The logs table beside a traces table: ``otel_traces`` → ``otel_logs``, ``x_traces`` → ``x_logs``."""
    return traces_table.removesuffix("traces") + "logs" if traces_table.endswith("_traces") else DEFAULT_LOGS_TABLE


@dataclass(frozen=True, slots=True)
class LogsTable:
    """The logs table beside a traces table, as found: its name, and the SQL text of a record's event name."""

    name: str
    event_name: str
    """``EventName``, or ``LogAttributes['event.name']`` in a table made before that column (fixed SQL text)."""

    def params(self) -> dict[str, Value]:
        return {"logs": self.name, "log_prefix": GUARD_PREFIX, "log_scope": GUARD_SCOPE}

    def named(self) -> str:
        """A record's guard event name: its own, else (in the guard's scope) the one its attributes tell."""
        inferred = ", ".join(f"mapContains(LogAttributes, '{key}'), '{name}'" for key, name in MARKS)
        return (
            f"multiIf({self.event_name} != '', toString({self.event_name}), ScopeName = {{log_scope:String}}, "
            f"multiIf({inferred}, ''), '')"
        )

    def rows(self, condition: str) -> str:
        """The guard's log records (trace, span, time, name, attributes) passing ``condition`` (fixed SQL text on
        ``Timestamp`` and ``TraceId``): a cheap test on the name and scope first, then the name."""
        return f"""
            SELECT TraceId AS log_trace_id, SpanId AS log_span_id, Timestamp AS log_time, {self.named()} AS log_name,
                   mapFilter((k, v) -> k != '{EVENT_NAME_ATTRIBUTE}', LogAttributes) AS log_attributes
            FROM {{db:Identifier}}.{{logs:Identifier}}
            WHERE {condition}
              AND (startsWith({self.event_name}, {{log_prefix:String}}) OR ScopeName = {{log_scope:String}})
              AND startsWith(log_name, {{log_prefix:String}})"""

    def per_span(self) -> str:
        """Each span's guard log events in time order (then by name), from the records a range's spans can carry:
        from the scan's start to a day past its end (an event comes at the span's end, or while it is open). Of
        every service: a logger's resource need not name the tracer's service, the ids join them."""
        rows = self.rows(
            "Timestamp >= fromUnixTimestamp64Nano({scan_lo:Int64})"
            " AND Timestamp <= fromUnixTimestamp64Nano({scan_hi:Int64}) + INTERVAL 1 DAY"
        )
        return f"""
            SELECT log_trace_id, log_span_id,
                   arraySort(e -> (e.1, e.2), groupArray((log_time, log_name, log_attributes))) AS log_events
            FROM ({rows}) GROUP BY log_trace_id, log_span_id"""


def find_logs(client: Client, target: Target) -> LogsTable | None:
    """The logs table beside ``target``'s traces table, or None when there is none the reader can read (missing,
    or without the exporter's columns; its attributes not a ``Map``): one question to the server."""
    name = logs_table(target.table)
    types: dict[str, str] = dict(client.frame(_COLUMNS, {"db": target.database, "logs": name}).itertuples(index=False))
    if any(column not in types for column in _NEEDED) or not str(types["LogAttributes"]).startswith("Map"):
        return None
    event_name = "EventName" if "EventName" in types else f"LogAttributes['{EVENT_NAME_ATTRIBUTE}']"
    return LogsTable(name, event_name)


_SPANS_CARRY_THEM: Final = """SELECT count() AS carried FROM (
    SELECT 1 FROM {db:Identifier}.{tbl:Identifier}
    WHERE arrayExists(n -> startsWith(n, {log_prefix:String}), Events.Name) LIMIT 1)"""


def needed_logs(client: Client, target: Target) -> LogsTable | None:
    """The logs table a reader joins: :func:`find_logs`, unless the traces table carries the guard's span events.
    The guard records every event both ways, so a table that kept them on its spans has them all there, and the
    join would only cost time (two to five times a question's on the benchmark's 200,000 calls). One more
    question, which stops at the first such span; a pipeline that drops span events for some services only
    reads the others' spans (docs/operations.md)."""
    logs = find_logs(client, target)
    if logs is None:
        return None
    params: dict[str, Value] = {"db": target.database, "tbl": target.table, "log_prefix": GUARD_PREFIX}
    return None if int(client.frame(_SPANS_CARRY_THEM, params)["carried"].iloc[0]) else logs


LOOK_AGAIN_S: Final = 60.0
"""How long a process trusts what it found of a logs table (the dashboard makes a reader per question)."""
_FOUND: dict[tuple[str, str, str], tuple[float, LogsTable | None]] = {}


def known_logs(client: Client, target: Target) -> LogsTable | None:
    """:func:`needed_logs`, asked at most once per :data:`LOOK_AGAIN_S` per table in a process: a reader's
    questions cost no more than before where no logs table is, and one made later is found within a minute."""
    key = (target.describe(), target.database, target.table)
    now = time.monotonic()
    found = _FOUND.get(key)
    if found is None or now - found[0] > LOOK_AGAIN_S:
        found = (now, needed_logs(client, target))
        _FOUND[key] = found
    return found[1]


_MERGED: Final = """WITH arrayExists(n -> startsWith(n, {log_prefix:String}), Events.Name) AS guard_own,
         if(guard_own, Events.Name, arrayConcat(Events.Name, arrayMap(e -> e.2, logged.log_events))) AS guard_names,
         if(guard_own, Events.Attributes, arrayConcat(Events.Attributes, arrayMap(e -> e.3, logged.log_events)))
             AS guard_attributes,
         if(guard_own, Events.Timestamp, arrayConcat(Events.Timestamp, arrayMap(e -> e.1, logged.log_events)))
             AS guard_times"""


def joined(fragment: str, logs: LogsTable | None) -> str:
    """``fragment`` (one ``SELECT`` over the traces table reading ``Events.*``) reading each span's guard events
    from its own events when it carries any of the guard's, else from its log events too; as is without ``logs``."""
    if logs is None:
        return fragment
    source = f"FROM {TABLE}"
    assert fragment.count(source) == 1 and fragment.lstrip().startswith("SELECT"), "one SELECT over the table"
    body = (
        fragment.replace("Events.Name", "guard_names")
        .replace("Events.Attributes", "guard_attributes")
        .replace("Events.Timestamp", "guard_times")
    )
    join = f"""{source}
    LEFT JOIN ({logs.per_span()}) AS logged ON logged.log_trace_id = TraceId AND logged.log_span_id = SpanId"""
    return "\n    " + _MERGED + "\n" + body.replace(source, join)


def tool_calls(logs: LogsTable | None) -> str:
    """``calls.TOOL_CALLS``, each part reading the guard's log events too when there is a logs table."""
    if logs is None:
        return TOOL_CALLS
    return joined(TOOL_SPANS, logs) + "    UNION ALL" + joined(REQUESTED_CALLS, logs)
