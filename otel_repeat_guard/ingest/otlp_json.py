"""OTLP JSON (one ``ExportTraceServiceRequest`` per line) back into SDK ``ReadableSpan`` objects.

The OTel Collector's ``file`` exporter writes the protobuf JSON mapping with one
exception the OTLP spec makes: trace and span ids are hex strings, not base64. The line
is parsed into the official ``opentelemetry-proto`` message with ``json_format`` (so
anything that is not a valid request is rejected, with the reason), and each span
becomes a ``ReadableSpan``: the very type the SDK hands to exporters, so the store turns
an ingested span into exactly the row it writes for an exported one.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, cast

import orjson
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope as SDKScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

_IS_REMOTE = 0x200  # SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_KINDS = {
    ProtoSpan.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    ProtoSpan.SPAN_KIND_SERVER: SpanKind.SERVER,
    ProtoSpan.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    ProtoSpan.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    ProtoSpan.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_HEX = frozenset("0123456789abcdefABCDEF")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class MalformedRecord(ValueError):
    """A record that is not a valid OTLP JSON trace request; the message says why."""


def _id_to_base64(value: object, field: str, size: int) -> object:
    """Hex ids (the OTLP JSON rule) become the base64 that ``json_format`` expects for bytes."""
    if not isinstance(value, str) or not value:
        return value
    if len(value) == size * 2 and _HEX.issuperset(value):
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    try:  # tolerate producers that kept the plain proto3 mapping (base64)
        if len(base64.b64decode(value, validate=True)) == size:
            return value
    except (binascii.Error, ValueError):
        pass
    raise MalformedRecord(f"{field} {value!r} is not a {size}-byte id in hex")


def _fix_ids(item: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        if field in item:
            item[field] = _id_to_base64(item[field], field, 16 if field == "traceId" else 8)


def _document(data: bytes | str) -> dict[str, Any]:
    """The record as JSON, if it is one trace request's object at its top level."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedRecord(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedRecord(f"expected a JSON object (an ExportTraceServiceRequest), got {type(document).__name__}")
    if "resourceSpans" not in document and "resource_spans" not in document:
        raise MalformedRecord("no resourceSpans: not an OTLP trace request (metrics or logs?)")
    return document


def _normalize(document: dict[str, Any]) -> dict[str, Any]:
    for resource_spans in _list(document.get("resourceSpans", document.get("resource_spans"))):
        for scope_spans in _list(resource_spans.get("scopeSpans", resource_spans.get("scope_spans"))):
            for span in _list(scope_spans.get("spans")):
                _fix_ids(span)
                for link in _list(span.get("links")):
                    _fix_ids(link)
    return document


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; ``label`` is gone in 7
    return bool(flag) if flag is not None else getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED


def _check_types(value: object, descriptor: Descriptor, where: str) -> None:
    """Reject the wrong JSON types ``json_format`` lets through with ``ignore_unknown_fields``.

    That flag (needed: newer OTLP versions add fields) also makes it read a string or a list
    given for a message as an object with no known keys, and ignore a number or a bool given
    for an enum, so ``"status": "error"`` would silently become an unset status. Unknown
    field names and unknown enum names stay accepted, as the OTLP JSON rules ask.
    """
    if not isinstance(value, dict):
        raise MalformedRecord(f"{where} must be an object, got {type(value).__name__}")
    fields = descriptor.fields_by_camelcase_name
    for key, item in value.items():
        field = fields.get(key) or descriptor.fields_by_name.get(key)
        if field is None or item is None:
            continue
        path = f"{where}.{key}"
        if _repeated(field):
            if not isinstance(item, list):
                raise MalformedRecord(f"{path} must be a list, got {type(item).__name__}")
            items: list[object] = item
        else:
            items = [item]
        for element in items:
            if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None:
                _check_types(element, field.message_type, path)
            elif field.type == FieldDescriptor.TYPE_ENUM and (
                isinstance(element, bool) or not isinstance(element, (int, str))
            ):
                raise MalformedRecord(f"{path} must be an enum name or number, got {element!r}")


def _list(value: object) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _request(document: dict[str, Any]) -> ExportTraceServiceRequest:
    """``document`` as the official request message; raises :class:`MalformedRecord` with the reason."""
    request = ExportTraceServiceRequest()
    reason = _unreadable(_normalize, document, request, "trace request")
    if reason is not None:
        raise MalformedRecord(reason)
    return request


def _unreadable(prepare: Callable[[Any], object], value: Any, message: Message, what: str) -> str | None:
    """Why ``value`` (``prepare`` fixes its ids) cannot be read into ``message`` (``what`` it should be); None
    when it was read."""
    try:
        prepare(value)
        descriptor = cast("Descriptor", message.DESCRIPTOR)  # the C build's type, the same fields
        _check_types(value, descriptor, descriptor.name)  # the path names the message, as json_format's
        json_format.ParseDict(value, message, ignore_unknown_fields=True)
    except MalformedRecord as exc:
        return str(exc)
    except (json_format.ParseError, RecursionError, TypeError) as exc:  # RecursionError: deeper than the check
        return f"not an OTLP {what}: {exc}"
    return None


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as the Python value the SDK would have held."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return {item.key: any_value(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind)


def attributes(items: Sequence[KeyValue]) -> dict[str, Any]:
    return {item.key: any_value(item.value) for item in items}


def _context(trace_id: bytes, span_id: bytes, flags: int) -> SpanContext:
    return SpanContext(
        int.from_bytes(trace_id, "big"),
        int.from_bytes(span_id, "big"),
        is_remote=bool(flags & _IS_REMOTE),
        trace_flags=TraceFlags(flags & 0xFF),
    )


def _scope(scope: InstrumentationScope, schema_url: str) -> SDKScope:
    return SDKScope(scope.name, scope.version or None, schema_url or None, attributes(scope.attributes) or None)


def _span(span: ProtoSpan, resource: Resource, scope: SDKScope) -> ReadableSpan:
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        raise MalformedRecord(f"span {span.name!r} has no valid trace or span id")
    parent = None
    if span.parent_span_id:
        parent = _context(span.trace_id, span.parent_span_id, span.flags)
    status = Status(StatusCode(span.status.code) if span.status.code in (0, 1, 2) else StatusCode.UNSET)
    if status.status_code is StatusCode.ERROR and span.status.message:
        status = Status(StatusCode.ERROR, span.status.message)
    return ReadableSpan(
        name=span.name,
        context=_context(span.trace_id, span.span_id, 0),
        parent=parent,
        resource=resource,
        attributes=attributes(span.attributes),
        events=tuple(
            Event(event.name, attributes(event.attributes), event.time_unix_nano or None) for event in span.events
        ),
        links=tuple(
            Link(_context(link.trace_id, link.span_id, link.flags), attributes(link.attributes))
            for link in span.links
            if len(link.trace_id) == 16 and len(link.span_id) == 8
        ),
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=status,
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def request_spans(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """Every span of a request, with its resource and instrumentation scope."""
    spans: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(attributes(resource_spans.resource.attributes), resource_spans.schema_url or None)
        for scope_spans in resource_spans.scope_spans:
            scope = _scope(scope_spans.scope, scope_spans.schema_url)
            spans.extend(_span(span, resource, scope) for span in scope_spans.spans)
    return spans


class DecodedRecord(NamedTuple):
    """The spans of one record; why each span of it that could not be read was skipped; and each value dropped
    from a span that was kept (an attribute, an event or a link that could not be read)."""

    spans: list[ReadableSpan]
    skipped: list[str]
    dropped: list[str]


def decode_record(data: bytes | str) -> DecodedRecord:
    """The spans of one OTLP JSON line. A Collector writes a whole batch as one line, often of many traces: a span
    that cannot be read (an id that is not hex, a time in words) costs only itself, and is named in ``skipped``; an
    attribute, event or link that cannot be read costs only itself, and is named in ``dropped``. Raises
    :class:`MalformedRecord` when the line is not a trace request, or no span of it can be read."""
    document = _document(data)
    try:
        return DecodedRecord(request_spans(_request(document)), [], [])
    except MalformedRecord as whole:
        failure = whole  # read span by span: each becomes a request of its own
    spans: list[ReadableSpan] = []
    skipped: list[str] = []
    dropped: dict[str, None] = {}  # a resource's odd attribute is met once per span: said once
    for name, piece in _one_span_requests(document):
        try:
            spans.extend(request_spans(_request(piece)))
            continue
        except MalformedRecord as exc:
            reason = exc
        kept, odd = _salvaged(piece, name)
        try:
            spans.extend(request_spans(_request(kept)) if odd else ())
        except MalformedRecord:
            odd = []
        if odd:
            dropped.update(dict.fromkeys(odd))
        else:
            skipped.append(f"span {name!r}: {reason}")
    if not spans:
        raise failure
    return DecodedRecord(spans, skipped, list(dropped))


def _salvaged(piece: dict[str, Any], name: object) -> tuple[dict[str, Any], list[str]]:
    """One span's request (``_one_span_requests``) without the values that cannot be read alone: an attribute
    (the span's, an event's, a link's, its resource's or scope's), an event or a link; and what each was and why.
    The span's own fields are never dropped: without its name, ids, times or status it is not the span."""
    odd: list[str] = []
    try:
        [resource_spans] = piece["resourceSpans"]
        [scope_spans] = resource_spans["scopeSpans"]
        [span] = scope_spans["spans"]
        resource, scope = resource_spans.get("resource"), scope_spans.get("scope")
    except (AttributeError, KeyError, TypeError, ValueError):  # an entry that is no object: nothing to salvage
        return piece, odd
    if not isinstance(span, dict):
        return piece, odd
    where = f"of span {name!r}"
    span = {**_kept_attributes(span, where, odd)}
    if isinstance(span.get("events"), list):
        events = [_kept_attributes(event, f"of an event {where}", odd) for event in span["events"]]
        span["events"] = _readable(events, ProtoSpan.Event, ("event", "name", where), odd)
    if isinstance(span.get("links"), list):
        links = [_kept_attributes(link, f"of a link {where}", odd) for link in span["links"]]
        span["links"] = _readable(links, ProtoSpan.Link, ("link", "spanId", where), odd, prepare=_fix_ids)
    scope_spans = {**scope_spans, "scope": _kept_attributes(scope, "of the scope", odd), "spans": [span]}
    resource_spans = {**resource_spans, "resource": _kept_attributes(resource, "of the resource", odd)}
    return {**piece, "resourceSpans": [{**resource_spans, "scopeSpans": [scope_spans]}]}, odd


def _kept_attributes(holder: Any, where: str, odd: list[str]) -> Any:
    """``holder`` (a span, event, link, resource or scope object) with only the attributes that can be read."""
    if not isinstance(holder, dict) or not isinstance(holder.get("attributes"), list):
        return holder  # no list of attributes to pick from: read (or refused) as it is
    return {**holder, "attributes": _readable(holder["attributes"], KeyValue, ("attribute", "key", where), odd)}


def _readable(
    entries: list[Any],
    message: type[Message],
    what: tuple[str, str, str],
    odd: list[str],
    *,
    prepare: Callable[[Any], object] = lambda _: None,
) -> list[Any]:
    """The entries that read as ``message`` alone (``prepare`` fixes a copy's ids first). Each other one is said in
    ``odd`` by ``what``: its kind, the field that names it, and where it was; and left out."""
    kind, field, where = what
    kept = []
    for entry in entries:
        copy = dict(entry) if isinstance(entry, dict) else entry
        reason = _unreadable(prepare, copy, message(), kind)
        if reason is None:
            kept.append(copy)
        else:
            label = entry.get(field) if isinstance(entry, dict) else entry
            odd.append(f"{kind} {label!r} {where}: {reason}")
    return kept


def _one_span_requests(document: dict[str, Any]) -> Iterator[tuple[object, dict[str, Any]]]:
    """Each span of ``document`` as a request holding it alone, under its own resource and scope. A resource or
    scope entry that is not an object is a request of its own, which fails: it is named, never dropped unsaid."""
    for resource_spans in _entries(document.get("resourceSpans", document.get("resource_spans"))):
        if not isinstance(resource_spans, dict):
            yield None, {"resourceSpans": [resource_spans]}
            continue
        resource = _without(resource_spans, ("scopeSpans", "scope_spans"))
        for scope_spans in _entries(resource_spans.get("scopeSpans", resource_spans.get("scope_spans"))):
            if not isinstance(scope_spans, dict):
                yield None, {"resourceSpans": [{**resource, "scopeSpans": [scope_spans]}]}
                continue
            scope = _without(scope_spans, ("spans",))
            for span in _entries(scope_spans.get("spans")):
                name = span.get("name") if isinstance(span, dict) else None
                yield name, {"resourceSpans": [{**resource, "scopeSpans": [{**scope, "spans": [span]}]}]}


def _entries(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _without(item: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in keys}


def decode_line(data: bytes | str) -> list[ReadableSpan]:
    """The spans of one OTLP JSON line that can be read (:func:`decode_record` also says which were skipped);
    raises :class:`MalformedRecord` if it is not one."""
    return decode_record(data).spans
