"""The Collector's log records back onto their spans: the guard's events, when a backend kept them as log events.

The guard emits each event it puts on a span also as a log event with the span's trace and span ids
(:mod:`otel_repeat_guard.decide.log_events`). A backend may keep those and drop span events (or receive spans from
a pipeline that strips them). So ``ingest`` reads log records too: from the file exporter's OTLP JSON lines (one
``ExportLogsServiceRequest`` per line, ``resourceLogs``) and from ClickHouse's ``otel_logs``, and puts each
``repeat_tool_guard.*`` event back on the span it names, where the store, ``doctor`` and the dashboard read it.
Other log records (the application's, the ``gen_ai.evaluation.result`` events, which say nothing the guard's
events do not) are read and left.

A span that already carries guard events was exported with them: log events for it are not added again. The
join waits: :class:`LogJoin` holds spans (reading a file once, to its end; following, :data:`FOLLOW_HOLD_S`
after the input first showed a log record) and log events whose span has not come yet, each map bounded.
"""

from __future__ import annotations

import base64
import binascii
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk.trace import Event, ReadableSpan

from otel_repeat_guard.decide.log_names import EVENT_NAME_ATTRIBUTE, GUARD_PREFIX, GUARD_SCOPE, MARKS
from otel_repeat_guard.ingest.otlp_json import MalformedRecord, attributes
from otel_repeat_guard.spans.span_events import replace_events

MAX_HELD = 50_000
"""The most spans, and the most spans' log events, held while waiting for the other half."""
FOLLOW_HOLD_S = 10.0
"""Following a file, how long a span waits for its log events (the two pipelines batch independently)."""
SpanKey = tuple[int, int]


class LogEvent(NamedTuple):
    """One guard event read from a log record: the span it belongs to, its name, attributes and time."""

    trace_id: int
    span_id: int
    name: str
    attributes: dict[str, Any]
    time_ns: int


def is_logs_document(data: bytes | str) -> bool:
    """Whether a record is an OTLP JSON logs request (its ``resourceLogs`` key), without reading all of it."""
    head = data[:256] if isinstance(data, bytes) else data[:256].encode("utf-8", "replace")
    return b'"resourceLogs"' in head or b'"resource_logs"' in head


def _hex_to_base64(value: object, size: int) -> object:
    if isinstance(value, str) and len(value) == size * 2:
        try:
            return base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            return value
    return value


def decode_logs_record(data: bytes | str) -> list[LogEvent]:
    """The guard's events among one OTLP JSON logs line's records (:class:`MalformedRecord` if it is none).
    A record without a valid trace and span id, or not the guard's, is left out."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedRecord(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedRecord(f"expected a JSON object (an ExportLogsServiceRequest), got {type(document).__name__}")
    for resource_logs in _list(document.get("resourceLogs", document.get("resource_logs"))):
        for scope_logs in _list(resource_logs.get("scopeLogs", resource_logs.get("scope_logs"))):
            for record in _list(scope_logs.get("logRecords", scope_logs.get("log_records"))):
                record["traceId"] = _hex_to_base64(record.get("traceId"), 16)
                record["spanId"] = _hex_to_base64(record.get("spanId"), 8)
    request = ExportLogsServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, TypeError, ValueError, binascii.Error) as exc:
        raise MalformedRecord(f"not an OTLP logs request: {' '.join(str(exc).split())}") from None
    events = []
    for resources in request.resource_logs:
        for scopes in resources.scope_logs:
            for log_record in scopes.log_records:
                found = _event(log_record, scopes.scope.name)
                if found is not None:
                    events.append(found)
    return events


def inferred_name(values: Mapping[str, Any]) -> str:
    """The guard event a record of the guard's scope is, by the attributes only it has: a Collector older than
    the ``EventName`` field (OTLP 1.5) drops the name. "" for none of them (an evaluation)."""
    return next((name for key, name in MARKS if key in values), "")


def _event(record: Any, scope: str) -> LogEvent | None:
    if len(record.trace_id) != 16 or len(record.span_id) != 8:
        return None
    values = attributes(record.attributes)
    name = getattr(record, "event_name", "") or values.pop(EVENT_NAME_ATTRIBUTE, "")
    if not name and scope == GUARD_SCOPE:
        name = inferred_name(values)
    if not isinstance(name, str) or not name.startswith(GUARD_PREFIX):
        return None
    values.pop(EVENT_NAME_ATTRIBUTE, None)
    return LogEvent(
        int.from_bytes(record.trace_id, "big"),
        int.from_bytes(record.span_id, "big"),
        name,
        values,
        record.time_unix_nano or record.observed_time_unix_nano,
    )


def _list(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _key(span: ReadableSpan) -> SpanKey | None:
    context = span.context
    return None if context is None else (context.trace_id, context.span_id)


def with_log_events(span: ReadableSpan, events: Iterable[LogEvent]) -> ReadableSpan:
    """``span`` with the guard's ``events`` added in time order, unless it already carries guard events."""
    if any(event.name.startswith(GUARD_PREFIX) for event in span.events):
        return span
    added = [Event(e.name, e.attributes, e.time_ns or None) for e in sorted(events, key=lambda e: e.time_ns)]
    return replace_events(span, (*span.events, *added)) if added else span


class LogJoin:
    """Puts log events back on their spans across records: spans wait for their log events, and log events for
    their spans, within bounds. ``hold``: spans wait from the start (reading a file once); otherwise only once
    a log record has been seen (following: files without log records go on as they come)."""

    def __init__(self, *, hold: bool) -> None:
        self._hold = hold
        self._spans: OrderedDict[SpanKey, tuple[ReadableSpan, float, list[LogEvent]]] = OrderedDict()
        self._events: OrderedDict[SpanKey, list[LogEvent]] = OrderedDict()
        self.joined = 0
        """Log events put on their spans."""
        self.log_records = 0
        """Records that were logs requests."""

    def spans(self, spans: list[ReadableSpan], now: float) -> list[ReadableSpan]:
        """What can go on of ``spans`` now: each with its log events if they came; the rest are held."""
        ready: list[ReadableSpan] = []
        for span in spans:
            key = _key(span)
            pending = self._events.pop(key, []) if key is not None and self._events else []
            if self._hold and key is not None:
                earlier = self._spans.pop(key, None)
                if earlier is not None:  # the same span twice (a Collector's retry): each goes on, as read
                    ready.append(self._joined(*earlier))
                self._spans[key] = (span, now, pending)
                if len(self._spans) > MAX_HELD:
                    ready.append(self._joined(*self._spans.popitem(last=False)[1]))
            else:
                ready.append(self._joined(span, now, pending))
        return ready

    def events(self, events: list[LogEvent]) -> None:
        """A logs record's guard events: to their held spans, or kept for the spans to come."""
        self.log_records += 1
        self._hold = True
        for event in events:
            key = (event.trace_id, event.span_id)
            held = self._spans.get(key)
            if held is not None:
                held[2].append(event)
                continue
            self._events.setdefault(key, []).append(event)
            if len(self._events) > MAX_HELD:
                self._events.popitem(last=False)

    def _joined(self, span: ReadableSpan, _since: float, events: list[LogEvent]) -> ReadableSpan:
        joined = with_log_events(span, events) if events else span
        if joined is not span:
            self.joined += len(events)
        return joined

    def due(self, now: float, wait_s: float = FOLLOW_HOLD_S) -> list[ReadableSpan]:
        """The held spans that have waited ``wait_s`` by ``now`` (following a file)."""
        ready = []
        while self._spans:
            key, held = next(iter(self._spans.items()))
            if now - held[1] < wait_s:
                break
            del self._spans[key]
            ready.append(self._joined(*held))
        return ready

    def flush(self) -> list[ReadableSpan]:
        """Every held span (the input ended)."""
        ready = [self._joined(*held) for held in self._spans.values()]
        self._spans.clear()
        self._events.clear()
        return ready
