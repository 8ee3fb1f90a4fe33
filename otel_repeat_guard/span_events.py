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

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits
from opentelemetry.sdk.util import BoundedList
from opentelemetry.util.types import AttributeValue

EventSpec = tuple[str, Mapping[str, AttributeValue]]

_NO_ATTRIBUTES: Mapping[str, Any] = {}


def attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes, read-only by convention: the plain dict inside ``BoundedAttributes``.

    Falls back to whatever mapping the span holds (for spans built by hand, or copies).
    """
    held = span._attributes  # noqa: SLF001 - see the module docstring
    if held is None:
        return _NO_ATTRIBUTES
    raw = getattr(held, "_dict", None)
    return raw if type(raw) is dict else held


def events_of(span: ReadableSpan) -> Sequence[Any]:
    """The span's events without copying them (``span.events`` builds a tuple every time)."""
    return contents_of(span)[2]


def contents_of(span: ReadableSpan) -> tuple[str, Mapping[str, Any], Sequence[Any]]:
    """The span's name, :func:`attributes_of` and :func:`events_of` in one call: what the guard
    reads of every span that ends."""
    events = span._events  # noqa: SLF001 - see the module docstring
    if type(events) is not BoundedList and type(events) is not tuple:
        events = span.events
    return span._name, attributes_of(span), events  # noqa: SLF001


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
        return Event(name, MappingProxyType(attributes), timestamp)
    return Event(name, BoundedAttributes(max_count, attributes, max_value_len=max_length, immutable=True), timestamp)


def append_to_ending_span(span: Span, events: Iterable[EventSpec]) -> None:
    """Append events to a span inside ``SpanProcessor._on_ending`` (SDK >= 1.40).

    At that point ``end()`` has frozen the span, so ``add_event`` is dropped; but the
    span's own bounded event list is what ``on_end`` hands to every processor and
    exporter, and its ``append`` applies the span's event limit and drop count.
    """
    limits: SpanLimits = span._limits  # noqa: SLF001 - see the module docstring
    target: BoundedList[Event] = span._events  # type: ignore[assignment]  # noqa: SLF001
    for name, attributes in events:
        target.append(_event(name, attributes, span.end_time, limits))


def copy_with_events(span: ReadableSpan, events: Sequence[EventSpec], limits: SpanLimits) -> ReadableSpan:
    """A copy of an ended span with ``events`` appended, for the wrapping mode."""
    merged = BoundedList.from_seq(limits.max_events, span.events)
    merged.dropped += span.dropped_events
    for name, attributes in events:
        merged.append(_event(name, attributes, span.end_time, limits))
    return replace_events(span, merged)


def replace_events(span: ReadableSpan, events: Sequence[Event]) -> ReadableSpan:
    """A copy of an ended span that differs only in its events."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
