"""A real TracerProvider with the guard, and a small scripted agent that emits GenAI spans."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor


@dataclass
class Harness:
    """A provider, the guard on it, and everything that came out."""

    provider: TracerProvider
    guard: RepeatGuardSpanProcessor
    exporter: InMemorySpanExporter
    reminders: list[Reminder] = field(default_factory=list)

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("tests")

    @contextmanager
    def agent_run(self, name: str, agent_id: str | None = None) -> Iterator[Span]:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        if agent_id is not None:
            attributes["gen_ai.agent.id"] = agent_id
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes) as span:
            yield span

    def call(
        self,
        tool: str,
        arguments: Any = None,
        *,
        agent_id: str | None = None,
        error: bool = False,
        raw: bool = False,
    ) -> ReadableSpan:
        """End one tool span; attributes are set after start, as real instrumentations do."""
        with self.tracer.start_as_current_span(f"execute_tool {tool}") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", tool)
            if arguments is not None:
                value = arguments if raw or isinstance(arguments, str) else json.dumps(arguments)
                span.set_attribute("gen_ai.tool.call.arguments", value)
            if agent_id is not None:
                span.set_attribute("gen_ai.agent.id", agent_id)
            if error:
                span.set_status(Status(StatusCode.ERROR, "denied"))
        return self.exporter.get_finished_spans()[-1]

    def overlapping_calls(self, tool: str, arguments: str, count: int, context: Any = None) -> None:
        """``count`` identical tool spans open at once (the model asked for them in one step), ended in order."""
        spans = [self.tracer.start_span(f"execute_tool {tool}", context=context) for _ in range(count)]
        for span in spans:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", tool)
            span.set_attribute("gen_ai.tool.call.arguments", arguments)
        for span in spans:
            span.end()

    def tool_spans(self) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith("execute_tool")]

    def run_lengths(self) -> list[int]:
        """The run length the guard recorded on each tool span (1 where it added no event)."""
        lengths = []
        for span in self.tool_spans():
            repeat = [e for e in span.events if e.name == "repeat_tool_guard.repeat"]
            lengths.append(int(repeat[0].attributes["repeat_tool_guard.run_length"]) if repeat else 1)  # type: ignore[index]
        return lengths


def make_harness(
    config: GuardConfig | None = None, on_reminder: Callable[[Reminder], None] | None = None, **kwargs: Any
) -> Harness:
    """A guard and an exporter after it; the reminders go to ``on_reminder``, else to the harness's list."""
    reminders: list[Reminder] = []
    guard = RepeatGuardSpanProcessor(config, on_reminder or reminders.append, **kwargs)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Harness(provider, guard, exporter, reminders)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = make_harness()
    yield h
    h.provider.shutdown()


def reminder_outcomes(reader: InMemoryMetricReader) -> dict[tuple[str, str, str], int]:
    """The reminder outcomes the guard counted, by (outcome, kind, tier)."""
    data = reader.get_metrics_data()
    return {
        (
            p.attributes["outcome"],
            p.attributes["repeat_tool_guard.kind"],
            p.attributes["repeat_tool_guard.tier"],
        ): p.value
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.reminder_outcomes"
        for p in m.data.data_points
    }
