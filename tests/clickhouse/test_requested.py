"""Calls the guard counted from a model's request (no tool span: CrewAI under OpenLLMetry, Haystack, MCP over
stdio): a ``repeat_tool_guard.call`` event each, on the span that followed. The ClickHouse reader reads them
from the events as the embedded store does, and every figure agrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill
from tests.clickhouse.test_figures import QUESTIONS, _same, same_drill_down

SCRIPT = [{"q": "a"}] * 4 + [{"q": "b"}, {"q": "b"}, {"q": "b"}]


def _requested_run(store: Path, logger_provider: LoggerProvider | None = None) -> list[ReadableSpan]:
    """One agent run whose model asks for each call of SCRIPT in turn; no tool span ever ends."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "crew"}))
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=True, logger_provider=logger_provider))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(store)))
    tracer = provider.get_tracer("tests.clickhouse")
    with tracer.start_as_current_span("invoke_agent crew", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i, arguments in enumerate([*SCRIPT, None]):
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
                span.set_attribute("gen_ai.usage.input_tokens", 1000 * (i + 1))
                span.set_attribute("gen_ai.usage.output_tokens", 10 + i)
                if arguments is not None:
                    part = {"type": "tool_call", "id": f"c{i}", "name": "grep", "arguments": arguments}
                    span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))
                    span.set_attribute("gen_ai.response.finish_reasons", ("tool_call",))
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture(scope="module")
def requested_pair(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Target]:
    store = tmp_path_factory.mktemp("requested") / "store.db"
    spans = _requested_run(store)
    return store, fill(demo_filled[2].path, spans, table="requested_traces")


def test_the_calls_counted_from_requests_are_read_from_their_events(requested_pair: tuple[Path, Target]) -> None:
    head = ClickHouseReader(requested_pair[1]).headline(Filters()).iloc[0]
    assert (int(head["tool_calls"]), int(head["repeated_calls"]), int(head["longest_run"])) == (7, 5, 4)


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_figure_equals_the_embedded_stores(requested_pair: tuple[Path, Target], question: str) -> None:
    store, target = requested_pair
    _same(QUESTIONS[question](SQLiteReader(store), Filters()), QUESTIONS[question](ClickHouseReader(target), Filters()))


def test_the_drill_down_is_the_same_run_and_timeline(requested_pair: tuple[Path, Target]) -> None:
    same_drill_down(*requested_pair, "grep")
