"""The exporter's ``otel_logs`` table: the guard's log events read back onto the spans ``TableSpans`` reads.

A backend fed by the Collector may keep the guard's events as log records (``otel_logs``, the contrib
``clickhouseexporter``'s ``internal/sqltemplates/logs_table.sql``) while its spans have none (a pipeline that
drops span events). :class:`TableLogEvents` reads, for the traces ``ingest --from`` releases, the log records
named ``repeat_tool_guard.*`` (by ``EventName``; a table made before that column, by
``LogAttributes['event.name']``; read with the dashboard's SQL, ``guard_logs``) and puts them on their spans (:func:`~otel_repeat_guard.ingest.log_records.with_log_events`),
so the store, ``doctor`` and the dashboard over it see the loops. Every value is a bound parameter; the table
is only read. No logs table: the spans go on as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.clickhouse.client import Client, Value
from otel_repeat_guard.clickhouse.guard_logs import LogsTable, find_logs, logs_table
from otel_repeat_guard.clickhouse.table import attributes_map
from otel_repeat_guard.clickhouse.values import typed_attributes
from otel_repeat_guard.ingest.log_records import LogEvent, with_log_events

TRACES_PER_QUERY = 1_000

LOGS_DDL = """
CREATE TABLE IF NOT EXISTS {database}.{table} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TimestampTime DateTime DEFAULT toDateTime(Timestamp),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    LogAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(TimestampTime)
PRIMARY KEY (ServiceName, TimestampTime)
ORDER BY (ServiceName, TimestampTime, Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""
"""The exporter's logs DDL with its defaults; ``{database}`` and ``{table}`` are identifiers the caller has checked."""

_EVENTS = """
SELECT log_trace_id AS trace_id, log_span_id AS span_id, toUnixTimestamp64Nano(log_time) AS time_ns,
    toValidUTF8(log_name) AS event_name, mapApply((k, v) -> (toValidUTF8(k), toValidUTF8(v)), log_attributes) AS attributes
FROM ({rows})
ORDER BY log_time
"""
_CONDITION = "Timestamp >= fromUnixTimestamp64Nano({lo:Int64}) AND TraceId IN {traces:Array(String)}"


class TableLogEvents:
    """The guard's log events of the traces a table source releases, from the logs table beside its traces."""

    def __init__(self, client: Client, start_ns: int) -> None:
        self.client = client
        self.start_ns = start_ns
        self.table = logs_table(client.target.table)
        self._logs: tuple[LogsTable | None] | None = None  # looked up on first use
        self.joined = 0

    def _found(self) -> LogsTable | None:
        if self._logs is None:
            self._logs = (find_logs(self.client, self.client.target),)
        return self._logs[0]

    def joined_to(self, spans: list[ReadableSpan]) -> list[ReadableSpan]:
        """``spans`` with the guard's log events of their traces put back on them."""
        logs = self._found() if spans else None
        if logs is None:
            return spans
        traces = list(dict.fromkeys(format_trace_id(s.context.trace_id) for s in spans if s.context is not None))
        found: dict[tuple[int, int], list[LogEvent]] = {}
        for start in range(0, len(traces), TRACES_PER_QUERY):
            for event in self._events(logs, traces[start : start + TRACES_PER_QUERY]):
                found.setdefault((event.trace_id, event.span_id), []).append(event)
        if not found:
            return spans
        out = []
        for span in spans:
            context = span.context
            events = found.get((context.trace_id, context.span_id)) if context is not None else None
            joined = with_log_events(span, events) if events else span
            self.joined += len(events) if events and joined is not span else 0
            out.append(joined)
        return out

    def _events(self, logs: LogsTable, traces: list[str]) -> Iterable[LogEvent]:
        params: dict[str, Value] = {"db": self.client.target.database, "lo": self.start_ns, "traces": traces}
        params.update(logs.params())
        sql = _EVENTS.format(rows=logs.rows(_CONDITION))
        rows: list[dict[str, Any]] = self.client.frame(sql, params).to_dict("records")  # type: ignore[assignment]
        for row in rows:
            try:
                trace_id, span_id = int(str(row["trace_id"]), 16), int(str(row["span_id"]), 16)
            except ValueError:
                continue  # a record that names no span
            attributes = typed_attributes(_map(row["attributes"]))  # the name told as SQL reads it (guard_logs)
            yield LogEvent(trace_id, span_id, str(row["event_name"]), dict(attributes), int(row["time_ns"]))


def _map(value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    return value if isinstance(value, Mapping) else dict(value)


def exporter_log_row(record: ReadableLogRecord) -> dict[str, Any]:
    """One ``otel_logs`` row for an SDK log record, as the exporter writes it (JSONEachRow columns); for tests."""
    log = record.log_record
    resource = dict(record.resource.attributes) if record.resource is not None else {}
    service = resource.get("service.name")
    seconds, fraction = divmod(int(log.timestamp or log.observed_timestamp or 0), 1_000_000_000)
    scope = record.instrumentation_scope
    return {
        "Timestamp": f"{seconds}.{fraction:09d}",
        "TraceId": format_trace_id(log.trace_id) if log.trace_id else "",
        "SpanId": format_span_id(log.span_id) if log.span_id else "",
        "TraceFlags": int(log.trace_flags or 0),
        "SeverityText": log.severity_text or "",
        "SeverityNumber": log.severity_number.value if log.severity_number is not None else 0,
        "ServiceName": service if isinstance(service, str) else "",
        "Body": "" if log.body is None else str(log.body),
        "ResourceAttributes": attributes_map(resource),
        "ScopeName": scope.name if scope is not None else "",
        "ScopeVersion": (scope.version or "") if scope is not None else "",
        "LogAttributes": attributes_map(log.attributes),
        "EventName": log.event_name or "",
    }
