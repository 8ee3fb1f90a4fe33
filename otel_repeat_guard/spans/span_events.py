"""The one place that touches SDK span internals: reading spans cheaply, and putting the
guard's events on tool spans that have already ended.

The guard decides when a tool span ends, because most instrumentations set the tool's
name and arguments only after the span starts. By then the public ``Span.add_event`` is
a silent no-op. This module knows how to get events onto the exported span anyway.

The guard also reads every span that starts or ends, so it reads attributes and events
without the public accessors' cost: ``span.attributes`` wraps them in a read-only proxy
whose failed lookups raise and catch ``KeyError`` (about 10x a dict miss), and
``span.events`` copies the event list into a new tuple on every access.
``tests/guard/test_sdk_contract.py`` fails loudly if an SDK upgrade changes any of this.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from time import time_ns
from types import MappingProxyType
from typing import Any, Final
from weakref import ReferenceType, ref

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

EventSpec = tuple[str, Mapping[str, AttributeValue]]
Attributes = dict[str, Any]
"""A span's attributes as the guard reads them: the dict inside the SDK's ``BoundedAttributes`` (read-only by
convention), or a copy of what a hand-built span holds. Always a ``dict``: the compiled build then reads it
with the dict's own lookups, not a generic ``Mapping`` method call."""

_NO_ATTRIBUTES: Final[Attributes] = {}
_BOUNDED_LIST: Final = BoundedList  # a C static in the compiled build: no module-dict lookup per span
SPAN_ID: Final = 1
"""A ``SpanContext`` is a tuple ``(trace_id, span_id, is_remote, trace_flags, trace_state, is_valid)``:
``context[SPAN_ID]`` is its ``span_id`` without the property's call (the contract test holds it)."""
IS_VALID: Final = 5
"""``context[IS_VALID]`` is a ``SpanContext``'s ``is_valid``, likewise."""

LiveSpan = tuple["ReferenceType[Span]", str, "SpanContext | None", SpanKind, Attributes]
"""What the run resolver keeps of an open span (``RunResolver.live``), never the span itself: a weak reference
to it (for its name, which may change while it is open), its name at its start (should the application drop it
unended), its parent, its kind, and its attributes (the dict the SDK updates in place). So a span that the
application abandons costs the guard a few hundred bytes, not the span with its events and links."""


def name_of(span: object) -> str:
    """The span's name; "" when it is not a string (the SDK never checks one, and mypyc, reading it as the
    ``str`` the SDK declares, would raise ``TypeError``): both builds read such a span alike."""
    name = getattr(span, "_name", None)
    return name if isinstance(name, str) else ""


def nanoseconds(value: object) -> int | None:
    """A span's time as the SDK means it, whole nanoseconds. The SDK does not check the ``start_time`` and
    ``end_time`` it is given: a float (``time.time() * 1e9``) is read as its whole nanoseconds, and what is no
    time (NaN, a string, a bool) as None. So both builds read such a span alike (mypyc, reading the ``int`` the
    SDK declares, would raise ``TypeError``), and one odd time costs only itself."""
    if type(value) is int or value is None:
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


_UNSET: Final = object()


def start_ns(span: ReadableSpan) -> int:
    """The span's start (:func:`nanoseconds`), 0 when it has none. Read from the field behind the SDK's property
    (the property is an interpreted call per read); an object that is no SDK span answers through the property."""
    value = getattr(span, "_start_time", _UNSET)  # getattr: as it is (see nanoseconds)
    return nanoseconds(getattr(span, "start_time", None) if value is _UNSET else value) or 0


def end_ns(span: ReadableSpan) -> int:
    """The span's end (:func:`nanoseconds`), 0 while it has none; read as :func:`start_ns` reads the start."""
    value = getattr(span, "_end_time", _UNSET)
    return nanoseconds(getattr(span, "end_time", None) if value is _UNSET else value) or 0


def _attributes(held: object) -> Attributes:
    """The dict inside ``held`` (a span's ``_attributes``), else a copy of what it holds ({} for nothing or
    something that is no mapping: one odd span costs only its own attributes)."""
    inside = getattr(held, "_dict", None)
    if type(inside) is dict:
        return inside
    if type(held) is dict:
        return held
    if held is None:
        return _NO_ATTRIBUTES
    try:
        copied: Attributes = dict(held)  # type: ignore[call-overload]
    except Exception:
        return {}
    return copied


def contents_of(span: ReadableSpan) -> tuple[str, Attributes, Sequence[Any]]:
    """The span's name, attributes and events in one call: what the guard reads of every span.

    The attributes are the plain dict inside ``BoundedAttributes`` (read-only by
    convention), the events the span's own list (``span.events`` copies it into a new tuple
    on every read); hand-built spans and copies fall back to whatever they hold.
    """
    name, attributes, events, _, _ = ending_of(span)
    return name, attributes, events


def ending_of(span: ReadableSpan) -> tuple[str, Attributes, Sequence[Any], SpanContext | None, int | None]:
    """:func:`contents_of`, plus the span's parent context and end time: :func:`marks_of` and :func:`rest_of`."""
    name, attributes = marks_of(span)
    events, parent, ended = rest_of(span)
    return name, attributes, events, parent, ended


def marks_of(span: ReadableSpan) -> tuple[str, Attributes]:
    """The span's name (``name_of``) and attributes (``_attributes``): what telling its kind needs, the first
    thing the guard reads of every span that starts or ends (inline for the SDK's spans)."""
    held = span._attributes  # noqa: SLF001 - see the module docstring
    attributes = getattr(held, "_dict", None)
    if type(attributes) is not dict:
        attributes = _attributes(held)
    name = getattr(span, "_name", None)
    return name if isinstance(name, str) else "", attributes  # isinstance: a native check when compiled


def rest_of(span: ReadableSpan) -> tuple[Sequence[Any], SpanContext | None, int | None]:
    """What the guard reads of an ending span it has a use for, besides its marks: its events (the deque inside
    the SDK's ``BoundedList``: len() and iteration in C), parent context and end time, without the properties."""
    events = span._events  # noqa: SLF001 - see the module docstring
    if type(events) is _BOUNDED_LIST:
        events = events._dq  # type: ignore[attr-defined]  # noqa: SLF001
    elif type(events) is not tuple:
        events = span.events
    ended = getattr(span, "_end_time", None)  # as it is: the SDK declares an int, and mypyc would check one
    if type(ended) is not int:  # None while open; a float the SDK let through
        ended = nanoseconds(ended)
    return events, span._parent, ended  # noqa: SLF001


def start_of(span: Span) -> tuple[int, str, Attributes, LiveSpan]:
    """A starting span's id, name and attributes (as :func:`contents_of` reads them), and what the run
    resolver keeps of it while it is open: what the guard reads of every span that starts, without the
    ``context``, ``parent``, ``kind`` and ``span_id`` properties' calls."""
    held = span._attributes  # noqa: SLF001 - see the module docstring
    attributes = getattr(held, "_dict", None)  # marks_of(span), inline: every span starts here
    if type(attributes) is not dict:
        attributes = _attributes(held)
    name = getattr(span, "_name", None)
    if not isinstance(name, str):
        name = ""
    live = (ref(span), name, span._parent, span._kind, attributes)  # noqa: SLF001
    return span._context[SPAN_ID], name, attributes, live  # type: ignore[index]  # noqa: SLF001


def ended_id(span: ReadableSpan) -> int | None:
    """The span id of a span that ends, without the ``context`` and ``span_id`` properties' calls."""
    context = getattr(span, "_context", None)
    return None if context is None else context[SPAN_ID]


def context_of(span: ReadableSpan) -> SpanContext | None:
    """The context of a span that ends, without the ``context`` property's call."""
    context: SpanContext | None = getattr(span, "_context", None)
    return context


def timing_of(span: ReadableSpan) -> tuple[int | None, int | None, StatusCode, SpanContext | None]:
    """An ended span's start and end times, status code and context, without four properties' calls."""
    status = span._status  # noqa: SLF001 - see the module docstring
    code = getattr(status, "_status_code", None)  # the property's field, without its call
    if code is None:
        code = status.status_code
    start, end = getattr(span, "_start_time", None), getattr(span, "_end_time", None)  # as they are (nanoseconds)
    return nanoseconds(start), nanoseconds(end), code, span._context  # noqa: SLF001


def attributes_of(span: ReadableSpan) -> Attributes:
    """The span's attributes without the read-only proxy (see :func:`contents_of`)."""
    return contents_of(span)[1]


class _FittingEvent(Event):
    """An SDK ``Event`` whose attributes already fit the span's limits, made by setting the three fields that
    ``Event.__init__`` and ``EventBase.__init__`` set (two interpreted calls that every repeat paid for); its
    properties are the SDK's own (the contract test compares it with ``add_event``'s)."""

    def __init__(self, name: str, attributes: Mapping[str, AttributeValue], timestamp: int | None) -> None:
        self._name = name
        self._attributes = attributes
        self._timestamp = time_ns() if timestamp is None else timestamp


def _event(name: str, attributes: Mapping[str, AttributeValue], timestamp: int | None, limits: SpanLimits) -> Event:
    """An event whose attributes obey the span's limits.

    The guard's own attributes are few and valid, so when they already fit they go in as
    they are: ``BoundedAttributes`` re-validates every value under a lock, which costs more
    than the rest of a repeat's handling.
    """
    max_count, max_length = limits.max_event_attributes, limits.max_attribute_length
    fits = (max_count is None or len(attributes) <= max_count) and (
        max_length is None or all(not isinstance(v, str) or len(v) <= max_length for v in attributes.values())
    )
    if fits:
        return _FittingEvent(name, MappingProxyType(attributes), timestamp)
    return Event(name, BoundedAttributes(max_count, attributes, max_value_len=max_length, immutable=True), timestamp)


def record_on_ending_span(span: Span, events: Iterable[EventSpec], facts: dict[str, Any] | None = None) -> None:
    """Put the guard's events and facts on a span inside ``SpanProcessor._on_ending``.

    The facts are attributes (:mod:`otel_repeat_guard.core.facts`): written into the span's own attribute
    dict, which ``end()`` has frozen for ``set_attribute`` but which is what ``on_end`` hands every
    processor and exporter. The span's attribute limit holds: a span already at its limit keeps its
    own attributes and counts the fact dropped, as ``BoundedAttributes`` counts what it drops. ``facts`` is a
    ``dict`` (a decision's): compiled, its truth, size and update are the dict's own, not generic calls.
    """
    if facts:
        held = span._attributes  # noqa: SLF001 - see the module docstring
        target = getattr(held, "_dict", None)
        if type(target) is dict:
            limit = held.maxlen  # type: ignore[union-attr]
            if limit is None or len(target) + len(facts) <= limit:
                target.update(facts)  # every fact fits: one write (what the loop below would write, in its order)
            else:
                for key, value in facts.items():
                    if key in target or len(target) < limit:
                        target[key] = value
                    else:
                        held.dropped += 1  # type: ignore[union-attr]
    if events:
        append_to_ending_span(span, events)


def append_to_ending_span(span: Span, events: Iterable[EventSpec]) -> None:
    """Append events to a span inside ``SpanProcessor._on_ending`` (SDK >= 1.40).

    At that point ``end()`` has frozen the span, so ``add_event`` is dropped; but the
    span's own bounded event list is what ``on_end`` hands to every processor and
    exporter. Its event limit and drop count apply as ``BoundedList.append`` applies
    them, without its lock: once a span has ended, nothing else appends to it.
    """
    limits: SpanLimits = span._limits  # noqa: SLF001 - see the module docstring
    target: BoundedList[Event] = span._events  # type: ignore[assignment]  # noqa: SLF001
    queue, timestamp = target._dq, nanoseconds(getattr(span, "_end_time", None))  # type: ignore[attr-defined]  # noqa: SLF001
    for name, attributes in events:
        if queue.maxlen is not None and len(queue) == queue.maxlen:
            target.dropped += 1
        queue.append(_event(name, attributes, timestamp, limits))


def copy_with_events(
    span: ReadableSpan,
    events: Sequence[EventSpec],
    limits: SpanLimits,
    facts: Mapping[str, AttributeValue] | None = None,
) -> ReadableSpan:
    """A copy of an ended span with ``events`` appended and ``facts`` among its attributes, for the wrapping mode."""
    merged = BoundedList.from_seq(limits.max_events, span.events)
    merged.dropped += span.dropped_events
    for name, event_attributes in events:
        merged.append(_event(name, event_attributes, nanoseconds(getattr(span, "end_time", None)), limits))
    if not facts:
        return replace_events(span, merged)
    attributes = BoundedAttributes(limits.max_span_attributes, {**(span.attributes or {}), **facts}, immutable=True)
    return replace_events(span, merged, attributes)


def replace_events(
    span: ReadableSpan, events: Sequence[Event], attributes: Mapping[str, AttributeValue] | None = None
) -> ReadableSpan:
    """A copy of an ended span that differs only in its events (and, if given, its attributes)."""
    name: Any = getattr(span, "name", None)  # as it is, a string or not
    return ReadableSpan(
        name=name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes if attributes is None else attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=getattr(span, "start_time", None),  # as they are: a float the SDK let through stays one
        end_time=getattr(span, "end_time", None),
        instrumentation_scope=span.instrumentation_scope,
    )


def scope_of(span: ReadableSpan | None) -> str:
    """The span's instrumentation scope name, "" when unnamed."""
    scope = None if span is None else span.instrumentation_scope
    return "" if scope is None else scope.name
