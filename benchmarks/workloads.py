"""Real pipelines and span lifecycles to time: a provider, a quiet batch processor, tool and non-tool spans."""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import orjson
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer, set_span_in_context

from otel_repeat_guard import REPEAT_EVENT
from otel_repeat_guard.spans.span_events import attributes_of

AGENT_ATTRIBUTES = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class NoopProcessor(SpanProcessor):
    """The control: a processor that does nothing, to show what the harness's noise is."""


class FloorProcessor(SpanProcessor):
    """Only the floor of exact canonicalization, ``orjson.loads`` then ``orjson.dumps`` with sorted
    keys, on each tool span's arguments: to measure that floor in place, in the same pipeline
    and cache conditions as the guard, rather than in a hot loop of its own."""

    def _on_ending(self, span: Span) -> None:
        arguments = attributes_of(span).get("gen_ai.tool.call.arguments")
        if isinstance(arguments, str):
            orjson.dumps(orjson.loads(arguments), option=orjson.OPT_SORT_KEYS)


@dataclass
class Pipeline:
    tracer: Tracer
    provider: TracerProvider
    batch: BatchSpanProcessor

    def flush(self) -> None:
        self.batch.force_flush()


def pipeline(*front: SpanProcessor, capacity: int = 100_000) -> Pipeline:
    """``front`` processors, then a batch processor whose export thread never wakes inside a segment."""
    provider = TracerProvider()
    for processor in front:
        provider.add_span_processor(processor)
    batch = BatchSpanProcessor(
        NoopExporter(), max_queue_size=capacity, max_export_batch_size=capacity, schedule_delay_millis=10**9
    )
    provider.add_span_processor(batch)
    return Pipeline(provider.get_tracer("bench"), provider, batch)


def tool_arguments(size: int, count: int, repeat_share: float, seed: int = 7) -> list[str]:
    """JSON arguments of about ``size`` bytes; ``repeat_share`` of calls repeat the previous one."""
    rng = random.Random(seed)
    filler = "".join(rng.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(size))
    calls: list[str] = []
    for i in range(count):
        if calls and rng.random() < repeat_share:
            calls.append(calls[-1])
            continue
        body = {"path": f"src/module_{i}.py", "pattern": "def main", "limit": 200, "content": filler}
        text = orjson.dumps(body).decode()
        calls.append(orjson.dumps({**body, "content": filler[: max(0, size - (len(text) - size))]}).decode())
    return calls


def expected_repeats(calls: Sequence[str]) -> int:
    return sum(1 for previous, current in itertools.pairwise(calls) if previous == current)


def tool_segment(p: Pipeline, calls: Sequence[str], tool: str = "read_file") -> float:
    """One agent run making ``calls``; returns seconds per tool-span lifecycle."""
    tracer = p.tracer
    agent = tracer.start_span("invoke_agent coder", attributes=AGENT_ATTRIBUTES)
    context: Context = set_span_in_context(agent)
    name = f"execute_tool {tool}"
    start = time.perf_counter()
    for arguments in calls:
        span = tracer.start_span(name, context=context)
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", tool)
        span.set_attribute("gen_ai.tool.call.arguments", arguments)
        span.end()
    elapsed = time.perf_counter() - start
    agent.end()
    return elapsed / len(calls)


def tool_segment_for_agents(p: Pipeline, agents: Sequence[str], arguments: str) -> float:
    """Tool spans keyed by an explicit agent id, one per entry of ``agents``."""
    tracer = p.tracer
    start = time.perf_counter()
    for agent in agents:
        span = tracer.start_span("execute_tool read_file")
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", "read_file")
        span.set_attribute("gen_ai.tool.call.arguments", arguments)
        span.set_attribute("gen_ai.agent.id", agent)
        span.end()
    return (time.perf_counter() - start) / len(agents)


OUTPUT_MESSAGES = json.dumps(
    [{"role": "assistant", "parts": [{"type": "text", "content": "The build passes. " * 20}], "finish_reason": "stop"}]
)


def non_tool_segment(p: Pipeline, count: int, output_messages: bool = False) -> float:
    """Chat and HTTP spans inside an agent run: what most of an agent's spans are. With
    ``output_messages`` each chat span records the model's answer, as with content capture on."""
    tracer = p.tracer
    agent = tracer.start_span("invoke_agent coder", attributes=AGENT_ATTRIBUTES)
    context = set_span_in_context(agent)
    start = time.perf_counter()
    for i in range(count):
        if i % 2:
            span = tracer.start_span("chat gpt-5", context=context)
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", "gpt-5")
            span.set_attribute("gen_ai.usage.input_tokens", 1200)
            if output_messages:
                span.set_attribute("gen_ai.output.messages", OUTPUT_MESSAGES)
        else:
            span = tracer.start_span("POST", context=context)
            span.set_attribute("http.request.method", "POST")
            span.set_attribute("url.full", "https://api.example.com/v1/responses")
            span.set_attribute("http.response.status_code", 200)
        span.end()
    elapsed = time.perf_counter() - start
    agent.end()
    return elapsed / count


def count_repeat_events(front: SpanProcessor, calls: Sequence[str]) -> int:
    """Runs ``calls`` through ``front`` into memory and counts the repeat events it added."""
    provider = TracerProvider()
    provider.add_span_processor(front)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    p = Pipeline(provider.get_tracer("check"), provider, BatchSpanProcessor(NoopExporter()))
    tool_segment(p, calls)
    # the reference design hands a copy downstream instead of adding to the span
    spans = getattr(front, "exported", None) or exporter.get_finished_spans()
    return sum(1 for span in spans for event in span.events if event.name == REPEAT_EVENT)
