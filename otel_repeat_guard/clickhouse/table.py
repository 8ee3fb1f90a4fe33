"""The Collector exporter's traces table, as ``clickhouseexporter`` creates and fills it.

:data:`TRACES_DDL` is the exporter's ``internal/sqltemplates/traces_table.sql`` (opentelemetry-collector-contrib)
rendered with its defaults (no full-text search, no TTL, no cluster, ``MergeTree()``); :func:`exporter_row`
maps one SDK span onto a row the way its ``exporter_traces.go`` does: ``Timestamp`` is the span's start,
``Duration`` its length in nanoseconds, every attribute value a string (``pcommon.Value.AsString``: ``true``,
``42``, JSON for arrays), the instrumentation scope in ``ScopeName``/``ScopeVersion``, and the events and
links as parallel arrays. Tests and benchmarks fill a table with these; the reader never writes.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

TRACES_DDL = """
CREATE TABLE IF NOT EXISTS {database}.{table} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""
"""The exporter's DDL; ``{database}`` and ``{table}`` are identifiers the caller has checked."""

_KINDS = {
    SpanKind.INTERNAL: "Internal",
    SpanKind.SERVER: "Server",
    SpanKind.CLIENT: "Client",
    SpanKind.PRODUCER: "Producer",
    SpanKind.CONSUMER: "Consumer",
}
_STATUS = {StatusCode.UNSET: "Unset", StatusCode.OK: "Ok", StatusCode.ERROR: "Error"}


def as_string(value: Any) -> str:  # noqa: PLR0911 - one answer per value type
    """An attribute value as the Collector's ``pcommon.Value.AsString`` writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return format(value, "f").rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return json.dumps([_json_value(item) for item in value], separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _json_value(value: Any) -> Any:
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value


def attributes_map(attributes: Mapping[str, Any] | None) -> dict[str, str]:
    return {key: as_string(value) for key, value in (attributes or {}).items()}


def _timestamp(ns: int) -> str:
    """Epoch nanoseconds as the text a ``DateTime64(9)`` column parses exactly."""
    seconds, fraction = divmod(int(ns), 1_000_000_000)
    return f"{seconds}.{fraction:09d}"


def exporter_row(span: ReadableSpan) -> dict[str, Any]:
    """One ``otel_traces`` row for ``span``, as JSONEachRow columns."""
    context = span.context
    assert context is not None
    resource = dict(span.resource.attributes) if span.resource is not None else {}
    service = resource.get("service.name")
    start = span.start_time or 0
    end = span.end_time or start
    scope = span.instrumentation_scope
    events = list(span.events)
    links = list(span.links)
    return {
        "Timestamp": _timestamp(start),
        "TraceId": format_trace_id(context.trace_id),
        "SpanId": format_span_id(context.span_id),
        "ParentSpanId": format_span_id(span.parent.span_id) if span.parent is not None else "",
        "TraceState": context.trace_state.to_header() if context.trace_state else "",
        "SpanName": span.name,
        "SpanKind": _KINDS.get(span.kind, "Unspecified"),
        "ServiceName": service if isinstance(service, str) else "",
        "ResourceAttributes": attributes_map(resource),
        "ScopeName": scope.name if scope is not None else "",
        "ScopeVersion": (scope.version or "") if scope is not None else "",
        "SpanAttributes": attributes_map(span.attributes),
        "Duration": max(0, end - start),
        "StatusCode": _STATUS[span.status.status_code],
        "StatusMessage": span.status.description or "",
        "Events.Timestamp": [_timestamp(event.timestamp) for event in events],
        "Events.Name": [event.name for event in events],
        "Events.Attributes": [attributes_map(event.attributes) for event in events],
        "Links.TraceId": [format_trace_id(link.context.trace_id) for link in links],
        "Links.SpanId": [format_span_id(link.context.span_id) for link in links],
        "Links.TraceState": [
            link.context.trace_state.to_header() if link.context.trace_state else "" for link in links
        ],
        "Links.Attributes": [attributes_map(link.attributes) for link in links],
    }


def insert_sql(database: str, table: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """An ``INSERT … FORMAT JSONEachRow`` statement carrying ``rows`` as data (not SQL)."""
    body = "\n".join(json.dumps(row, ensure_ascii=False) for row in rows)
    return f"INSERT INTO {database}.{table} FORMAT JSONEachRow\n{body}\n"
