"""What the guard relies on in the OTel SDK. If an SDK upgrade breaks this, these fail loudly."""

from __future__ import annotations

import gc
from types import MappingProxyType

from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN_CONTEXT, SpanKind, StatusCode, set_span_in_context

from otel_repeat_guard.spans.span_events import (
    IS_VALID,
    SPAN_ID,
    _event,
    append_to_ending_span,
    attributes_of,
    contents_of,
    context_of,
    end_ns,
    ended_id,
    ending_of,
    record_on_ending_span,
    start_ns,
    start_of,
    timing_of,
)


class _Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class _AddsAtEnding(SpanProcessor):
    """Adds one event through the public API and one through the guard's path."""

    def _on_ending(self, span: Span) -> None:
        span.add_event("public add_event")
        append_to_ending_span(span, [("guard event", {"n": 1})])


def test_events_appended_at_ending_reach_every_processor_and_exporter() -> None:
    earlier = _Recorder()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(earlier)  # registered before the guard
    provider.add_span_processor(_AddsAtEnding())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("tool") as span:
        span.add_event("own event")
    (exported,) = exporter.get_finished_spans()
    assert SpanProcessor._on_ending is not None  # the private hook exists (SDK >= 1.40)
    assert [e.name for e in exported.events] == ["own event", "guard event"]
    assert [e.name for e in earlier.ended[0].events] == ["own event", "guard event"]
    assert dict(exported.events[1].attributes or {}) == {"n": 1}
    assert exported.events[1].timestamp == exported.end_time


def test_an_event_the_guard_appends_reads_as_the_sdks_own_event() -> None:
    """The guard makes a fitting event without the SDK's constructors (span_events._FittingEvent): every
    public property reads as on an Event the SDK made with the same values, and it is one."""
    made = _event("e", {"n": 1, "s": "x"}, 123, SpanLimits())
    own = Event("e", MappingProxyType({"n": 1, "s": "x"}), 123)
    assert isinstance(made, Event)
    read = ("name", "timestamp", "dropped_attributes")
    assert [getattr(made, p) for p in read] == [getattr(own, p) for p in read] == ["e", 123, 0]
    assert dict(made.attributes or {}) == dict(own.attributes or {}) == {"n": 1, "s": "x"}
    assert isinstance(made.attributes, MappingProxyType)  # read-only, as the SDK's own are
    assert _event("e", {}, None, SpanLimits()).timestamp > 0  # no timestamp: now, as EventBase does


def test_appended_events_respect_the_span_event_limits() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_events=2, max_event_attributes=1, max_attribute_length=3))
    provider.add_span_processor(_AddsAtEnding())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("tool") as span:
        span.add_event("a")
        span.add_event("b")
    (exported,) = exporter.get_finished_spans()
    assert [e.name for e in exported.events] == ["b", "guard event"]
    assert exported.dropped_events == 1


def test_append_truncates_event_attributes_like_add_event() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_event_attributes=1, max_attribute_length=3))

    class _Long(SpanProcessor):
        def _on_ending(self, span: Span) -> None:
            append_to_ending_span(span, [("e", {"dropped": 1, "text": "abcdef"})])

    provider.add_span_processor(_Long())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("tool").end()
    (event,) = exporter.get_finished_spans()[0].events
    assert dict(event.attributes or {}) == {"text": "abc"}
    assert event.dropped_attributes == 1


def test_the_cheap_readers_see_exactly_what_the_public_accessors_do() -> None:
    """contents_of bypasses the read-only proxy and the tuple copy; it must not see anything else."""
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("s", attributes={"a": 1})
    assert type(attributes_of(span)) is dict  # the fast path is taken, not the fallback
    span.set_attribute("b", "x")
    span.add_event("e", {"k": 1})
    assert dict(attributes_of(span)) == dict(span.attributes or {})
    assert list(contents_of(span)[2]) == list(span.events)
    assert contents_of(span)[:2] == ("s", attributes_of(span))
    assert start_of(span)[:3] == (span.context.span_id, "s", attributes_of(span))
    span.end()
    assert dict(attributes_of(span)) == {"a": 1, "b": "x"}
    assert ending_of(span)[3:] == (span.parent, span.end_time)
    child = provider.get_tracer("t").start_span("child", context=set_span_in_context(span))
    child.end()
    assert ending_of(child)[3:] == (child.parent, child.end_time)
    assert ending_of(child)[3] is not None
    copy = ReadableSpan(name="c", attributes=None, events=())  # hand-built spans take the fallback
    assert attributes_of(copy) == {}
    assert list(contents_of(copy)[2]) == []
    other = ReadableSpan(name="c", attributes={"z": 1})
    assert attributes_of(other) == {"z": 1}
    proxied = ReadableSpan(name="c", attributes=MappingProxyType({"z": 1}))  # any mapping: read as a dict
    assert type(attributes_of(proxied)) is dict and attributes_of(proxied) == {"z": 1}
    odd = ReadableSpan(name="c", attributes=7)  # type: ignore[arg-type]  # no mapping: costs only itself
    assert attributes_of(odd) == {}


def test_a_span_context_is_the_tuple_the_guard_indexes() -> None:
    """SPAN_ID and IS_VALID index a SpanContext as its properties read it; ended_id and timing_of read an
    ended span's id, times and status as the public accessors do."""
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("s")
    context = span.get_span_context()
    assert isinstance(context, tuple)
    assert (context[SPAN_ID], context[IS_VALID]) == (context.span_id, context.is_valid) == (context.span_id, True)
    assert INVALID_SPAN_CONTEXT[IS_VALID] is False
    span.set_status(StatusCode.ERROR)
    span.end()
    assert ended_id(span) == span.context.span_id
    assert context_of(span) == span.context
    assert timing_of(span) == (span.start_time, span.end_time, StatusCode.ERROR, span.context)
    assert ended_id(ReadableSpan(name="c")) is None


def test_a_spans_times_are_read_from_the_fields_behind_the_public_properties() -> None:
    """start_ns and end_ns read the fields behind ``start_time`` and ``end_time`` (a property call each is an
    interpreted call per span): the same values, 0 while unset; an object that is no SDK span is read through
    the public names."""
    span = TracerProvider().get_tracer("t").start_span("s", start_time=1_000)
    assert (start_ns(span), end_ns(span)) == (span.start_time, 0) == (1_000, 0)
    span.end(end_time=2_500)
    assert (start_ns(span), end_ns(span)) == (span.start_time, span.end_time) == (1_000, 2_500)

    class _Duck:
        start_time, end_time = 7, 9

    assert (start_ns(_Duck()), end_ns(_Duck())) == (7, 9)  # type: ignore[arg-type]


class _FactsAtEnding(SpanProcessor):
    """Puts two facts on the span through the guard's path."""

    def _on_ending(self, span: Span) -> None:
        record_on_ending_span(span, [], {"repeat_tool_guard.run": "r#1", "own": "kept"})


def test_facts_recorded_at_ending_reach_every_processor_and_exporter() -> None:
    earlier = _Recorder()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(earlier)
    provider.add_span_processor(_FactsAtEnding())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("tool") as span:
        span.set_attribute("own", "set by the instrumentation")
    (exported,) = exporter.get_finished_spans()
    assert dict(exported.attributes or {}) == {"own": "kept", "repeat_tool_guard.run": "r#1"}
    assert dict(earlier.ended[0].attributes or {}) == dict(exported.attributes or {})


def test_recorded_facts_respect_the_span_attribute_limit() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=1))
    provider.add_span_processor(_FactsAtEnding())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("tool") as span:
        span.set_attribute("own", "first")
    (exported,) = exporter.get_finished_spans()
    assert dict(exported.attributes or {}) == {"own": "kept"}  # a key it holds is updated; a new one is dropped
    assert exported.dropped_attributes == 1


def test_what_the_resolver_keeps_of_an_open_span_follows_it_without_holding_it() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent") as parent:
        span = tracer.start_span("s", kind=SpanKind.CLIENT, attributes={"a": 1})
    _, _, _, (reference, started_as, parent_context, kind, attributes) = start_of(span)
    assert (reference(), started_as, parent_context, kind) == (span, "s", parent.get_span_context(), SpanKind.CLIENT)
    span.set_attribute("b", "x")  # set after the start, in place: the resolver sees it
    span.update_name("renamed")
    assert dict(attributes) == {"a": 1, "b": "x"} and reference().name == "renamed"  # type: ignore[union-attr]
    del span
    gc.collect()
    assert reference() is None  # an abandoned span is not kept alive by what the resolver keeps
