"""The wrapping mode: downstream processors get a copy of each span with the guard's events."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor


def test_downstream_processors_receive_spans_with_events(monkeypatch: object) -> None:
    exporter = InMemorySpanExporter()
    direct = InMemorySpanExporter()
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(
        GuardConfig(thresholds=(2,)), reminders.append, downstream=[SimpleSpanProcessor(exporter)]
    )
    provider = TracerProvider()
    provider.add_span_processor(guard)
    provider.add_span_processor(SimpleSpanProcessor(direct))
    tracer = provider.get_tracer("t")
    for _ in range(2):
        with tracer.start_as_current_span("execute_tool grep") as span:
            span.add_event("own")
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep", "gen_ai.tool.call.arguments": "x"}
            )
            span.set_attribute("gen_ai.agent.id", "a")
    first, second = exporter.get_finished_spans()
    assert [e.name for e in first.events] == ["own"]
    assert [e.name for e in second.events] == ["own", "repeat_tool_guard.repeat", "repeat_tool_guard.reminder"]
    assert second.name == "execute_tool grep"
    assert second.context == direct.get_finished_spans()[1].context
    facts = {"repeat_tool_guard.run": "a", "repeat_tool_guard.run_name": "a"}  # on by default: on the copy only
    assert dict(second.attributes or {}) == {**dict(direct.get_finished_spans()[1].attributes or {}), **facts}
    assert [e.name for e in direct.get_finished_spans()[1].events] == ["own"]  # not wrapped: untouched
    assert [r.run_length for r in reminders] == [2]
    assert guard.force_flush() is True
    guard.shutdown()
    assert exporter._stopped


def test_copies_respect_event_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")  # the SDK's limits, as the copies' SpanLimits() read them
    exporter = InMemorySpanExporter()
    guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=(2,)), downstream=[SimpleSpanProcessor(exporter)])
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("t")
    for _ in range(2):
        with tracer.start_as_current_span("execute_tool grep") as span:
            span.add_event("own")
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "g", "gen_ai.agent.id": "a"}
            )
            span.set_attribute("gen_ai.tool.call.arguments", "x")
    second = exporter.get_finished_spans()[1]
    assert [e.name for e in second.events] == ["repeat_tool_guard.repeat", "repeat_tool_guard.reminder"]
    assert second.dropped_events == 1


def test_the_end_of_span_hook_is_passed_on_to_wrapped_processors() -> None:
    """A wrapped processor that relies on ``_on_ending`` (as the guard itself does) still gets it."""
    seen: list[str] = []

    class Ending(SpanProcessor):
        def _on_ending(self, span: Span) -> None:
            seen.append(span.name)

    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(downstream=[Ending()]))
    with provider.get_tracer("t").start_as_current_span("work"):
        pass
    assert seen == ["work"]


def test_a_wrapped_processor_that_raises_costs_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK catches nothing a processor raises: wrapped by the guard, one that fails in any hook is logged,
    and the application and the processors after it carry on."""

    class Broken(SpanProcessor):
        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            raise RuntimeError("on_start")

        def _on_ending(self, span: Span) -> None:
            raise RuntimeError("_on_ending")

        def on_end(self, span: ReadableSpan) -> None:
            raise RuntimeError("on_end")

        def shutdown(self) -> None:
            raise RuntimeError("shutdown")

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            raise RuntimeError("force_flush")

    exporter = InMemorySpanExporter()
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(
        GuardConfig(thresholds=(2,)), reminders.append, downstream=[Broken(), SimpleSpanProcessor(exporter)]
    )
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        for _ in range(2):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "g", "gen_ai.agent.id": "a"}
            with tracer.start_as_current_span("execute_tool g", attributes=attributes) as span:
                span.set_attribute("gen_ai.tool.call.arguments", "{}")
        assert provider.force_flush() is False  # the broken one did not flush
        provider.shutdown()
    assert [r.run_length for r in reminders] == [2]
    assert [len(s.events) for s in exporter.get_finished_spans()] == [0, 2]
    assert exporter._stopped
    failed = [r.getMessage() for r in caplog.records]
    for hook in ("on_start", "_on_ending", "on_end", "shutdown", "force_flush"):
        assert f"span processor Broken failed in {hook}; the guard and the other processors carry on" in failed
