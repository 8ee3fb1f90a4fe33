"""The exporter's ``otel_traces`` rows back into SDK spans: ``ingest --from clickhouse://… --replay``.

:class:`TableSpans` is a :class:`~otel_repeat_guard.ingest.spans.SpanSource`: it reads the rows whose
``Timestamp`` (the span's start) lies in a range, optionally of some services (the table's partition and
ordering key), a page at a time in ``(Timestamp, TraceId, SpanId)`` order, each page after the last row
of the one before (keyset paging: no OFFSET, no page read twice). Every value is a bound parameter, and
the table is only read.

Each row becomes the ``ReadableSpan`` the exporter was handed (see ``ingest/otlp_json.py``): its context
and parent, its resource (``ServiceName`` and ``ResourceAttributes``), scope, attributes, events, links,
kind, status, and its start and end (``Timestamp`` and ``Timestamp + Duration``). Attribute values are the
table's strings except the few keys ``clickhouse/values.py`` types again. A row that cannot be a span (an
id that is not hex) is reported and skipped alone.

Replay needs whole traces, and rows come in start order, a trace's root first. So the spans of a trace are
held until its root has ended (plus :data:`SETTLE_NS`) before the rows now being read start: every child
that started inside its root has been read by then. Traces whose root is outside the range, or missing,
go at the end (or when more than ``max_held`` spans wait).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceState

from otel_repeat_guard.clickhouse.calls import SERVICE_CONDITION, TABLE
from otel_repeat_guard.clickhouse.client import Client, Value
from otel_repeat_guard.clickhouse.logs import TableLogEvents
from otel_repeat_guard.clickhouse.values import typed_attributes
from otel_repeat_guard.ingest.spans import SpanBatch

PAGE_ROWS = 5_000
SETTLE_NS = 60 * 1_000_000_000
"""How long after its root ended a trace may still get a span (a child that started late) before it goes."""
MAX_HELD = 200_000


def _valid_map(column: str) -> str:
    return f"mapApply((k, v) -> (toValidUTF8(k), toValidUTF8(v)), {column})"


ROWS = f"""
SELECT
    toUnixTimestamp64Nano(Timestamp) AS start_ns, toInt64(Duration) AS duration_ns,
    TraceId AS trace_id, SpanId AS span_id, ParentSpanId AS parent_id, toValidUTF8(TraceState) AS trace_state,
    toValidUTF8(SpanName) AS span_name, SpanKind AS span_kind, toValidUTF8(toString(ServiceName)) AS service,
    {_valid_map("ResourceAttributes")} AS resource, toValidUTF8(ScopeName) AS scope_name,
    toValidUTF8(ScopeVersion) AS scope_version, {_valid_map("SpanAttributes")} AS span_attributes,
    StatusCode AS status_code, toValidUTF8(StatusMessage) AS status_message,
    arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS event_times,
    arrayMap(n -> toValidUTF8(n), Events.Name) AS event_names,
    toValidUTF8(toJSONString(Events.Attributes)) AS event_attributes,
    Links.TraceId AS link_traces, Links.SpanId AS link_spans, arrayMap(s -> toValidUTF8(s), Links.TraceState) AS link_states,
    toValidUTF8(toJSONString(Links.Attributes)) AS link_attributes
FROM {TABLE}
WHERE Timestamp >= fromUnixTimestamp64Nano({{lo:Int64}}) AND Timestamp < fromUnixTimestamp64Nano({{hi:Int64}})
  {{services}}
  AND (Timestamp, TraceId, SpanId) > (fromUnixTimestamp64Nano({{after_ns:Int64}}), {{after_trace:String}}, {{after_span:String}})
ORDER BY Timestamp, TraceId, SpanId
LIMIT {{page:UInt64}}
"""
"""One page of rows: those after ``(after_ns, after_trace, after_span)``, in the range, in table order. The
events' and links' attributes come as JSON text: chdb crashes handing an ``Array(Map(…))`` column to pandas.
Every text is valid UTF-8 (``toValidUTF8``: the Collector stores the bytes it was given, and one odd byte
must not cost a page its spans)."""

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_STATUS = {"ok": StatusCode.OK, "error": StatusCode.ERROR}


class MalformedRow(ValueError):
    """A row that cannot be a span; the message says why."""


def _enum(text: object, prefix: str) -> str:
    """``Server``, ``SPAN_KIND_SERVER`` (older exporter versions) and the like as ``server``."""
    value = str(text or "").lower()
    return value[len(prefix) :] if value.startswith(prefix) else value


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _hex_id(text: object, size: int, what: str) -> int:
    value = str(text or "")  # hex digits only: int(_, 16) also takes "0x", "_" and spaces
    number = int(value, 16) if len(value) == size * 2 and _HEX_DIGITS.issuperset(value) else 0
    if number == 0:
        raise MalformedRow(f"{what} {value!r} is not a {size}-byte id in hex")
    return number


def _trace_state(text: object) -> TraceState | None:
    return TraceState.from_header([str(text)]) if text else None


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):  # an array column sent as JSON text
        value = json.loads(value) if value else []
    return [] if value is None else list(value)


def _map(value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    return dict(value)  # a list of (key, value) pairs


def row_span(row: Mapping[str, Any]) -> ReadableSpan:
    """The SDK span one ``otel_traces`` row was exported from; :class:`MalformedRow` if it cannot be one."""
    trace_id = _hex_id(row["trace_id"], 16, "TraceId")
    span_id = _hex_id(row["span_id"], 8, "SpanId")
    parent = None
    if row["parent_id"]:
        parent = SpanContext(trace_id, _hex_id(row["parent_id"], 8, "ParentSpanId"), is_remote=False)
    resource_attributes = typed_attributes(_map(row["resource"]))
    if row["service"] and "service.name" not in resource_attributes:
        resource_attributes["service.name"] = str(row["service"])
    code = _STATUS.get(_enum(row["status_code"], "status_code_"), StatusCode.UNSET)
    status = Status(code, str(row["status_message"]) or None) if code is StatusCode.ERROR else Status(code)
    start = int(row["start_ns"])
    events = tuple(
        Event(str(name), typed_attributes(_map(attributes)), int(time) or None)
        for time, name, attributes in zip(
            _items(row["event_times"]), _items(row["event_names"]), _items(row["event_attributes"]), strict=False
        )
    )
    links = []
    for link_trace, link_span, state, attributes in zip(
        _items(row["link_traces"]),
        _items(row["link_spans"]),
        _items(row["link_states"]),
        _items(row["link_attributes"]),
        strict=False,
    ):
        try:
            context = SpanContext(
                _hex_id(link_trace, 16, "link TraceId"),
                _hex_id(link_span, 8, "link SpanId"),
                is_remote=True,
                trace_state=_trace_state(state),
            )
        except MalformedRow:
            continue  # a link that names no span: the span itself is fine
        links.append(Link(context, typed_attributes(_map(attributes))))
    return ReadableSpan(
        name=str(row["span_name"]),
        context=SpanContext(trace_id, span_id, is_remote=False, trace_state=_trace_state(row["trace_state"])),
        parent=parent,
        resource=Resource(resource_attributes),
        attributes=typed_attributes(_map(row["span_attributes"])),
        events=events,
        links=tuple(links),
        kind=_KINDS.get(_enum(row["span_kind"], "span_kind_"), SpanKind.INTERNAL),
        status=status,
        start_time=start,
        end_time=start + max(0, int(row["duration_ns"])),
        instrumentation_scope=InstrumentationScope(str(row["scope_name"]), str(row["scope_version"]) or None),
    )


class TableSpans:
    """The spans of ``client``'s table that started in ``[start_ns, end_ns)``, of ``services`` if given."""

    def __init__(
        self,
        client: Client,
        start_ns: int,
        end_ns: int,
        services: Sequence[str] = (),
        *,
        page_rows: int = PAGE_ROWS,
        max_held: int = MAX_HELD,
    ) -> None:
        self.client = client
        self.start_ns, self.end_ns = start_ns, end_ns
        self.services = list(services)
        self.page_rows = page_rows
        self.max_held = max_held
        self._held: dict[int, list[ReadableSpan]] = {}
        self._root_end: dict[int, int] = {}
        self._count = 0
        self.log_events = TableLogEvents(client, start_ns)  # the guard's log events, back on their spans

    @property
    def name(self) -> str:
        return self.client.target.describe()

    def pages(self) -> Iterator[list[dict[str, Any]]]:
        """The rows of the range, a page at a time."""
        sql = ROWS.replace("{services}", SERVICE_CONDITION if self.services else "")
        after: tuple[int, str, str] = (self.start_ns - 1, "", "")
        while True:
            params: dict[str, Value] = {
                "db": self.client.target.database,
                "tbl": self.client.target.table,
                "lo": self.start_ns,
                "hi": self.end_ns,
                "after_ns": after[0],
                "after_trace": after[1],
                "after_span": after[2],
                "page": self.page_rows,
            }
            if self.services:
                params["services"] = self.services
            rows: list[dict[str, Any]] = self.client.frame(sql, params).to_dict("records")  # type: ignore[assignment]
            if not rows:
                return
            yield rows
            last = rows[-1]
            after = (int(last["start_ns"]), str(last["trace_id"]), str(last["span_id"]))
            if len(rows) < self.page_rows:
                return

    def batches(self) -> Iterator[SpanBatch]:
        read = 0
        for rows in self.pages():
            problems: list[tuple[str, str]] = []
            for row in rows:
                try:
                    self._hold(row_span(row))
                except (MalformedRow, ValueError, TypeError, KeyError) as exc:
                    where = f"{self.name}: row {row.get('trace_id')!s:.40}/{row.get('span_id')!s:.20}"
                    problems.append((where, str(exc)))
            read += len(rows)
            watermark = int(rows[-1]["start_ns"])  # every row still to come starts at or after it
            ready = [t for t, end in self._root_end.items() if end + SETTLE_NS < watermark]
            if self._count > self.max_held:  # bounded memory: the oldest traces go now
                ready.extend(list(self._held)[: max(1, len(self._held) // 2)])
            yield SpanBatch(self._release(ready), len(rows), problems, read, read)
        yield SpanBatch(self._release(list(self._held)), 0, [], read, read)

    def _hold(self, span: ReadableSpan) -> None:
        context = span.context
        assert context is not None
        self._held.setdefault(context.trace_id, []).append(span)
        self._count += 1
        if span.parent is None and span.end_time is not None:
            self._root_end[context.trace_id] = span.end_time

    def _release(self, trace_ids: Iterable[int]) -> list[ReadableSpan]:
        spans: list[ReadableSpan] = []
        for trace_id in dict.fromkeys(trace_ids):
            self._root_end.pop(trace_id, None)
            trace = self._held.pop(trace_id, None)
            if trace is not None:
                self._count -= len(trace)
                spans.extend(trace)
        return self.log_events.joined_to(spans)
