"""A run the readers know only from the guard's repeat events is labelled by its own name in ClickHouse too."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill


def test_both_stores_label_a_graph_by_its_name_not_its_key(tmp_path: Path) -> None:
    """A root span that is no agent span (a graph's, say) stands for the run; the guard records no facts."""
    memory = InMemorySpanExporter()
    db = tmp_path / "s.db"
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(db)))
    tracer = provider.get_tracer("graph")
    with tracer.start_as_current_span("LangGraph"):
        for _ in range(4):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
            attributes["gen_ai.tool.call.arguments"] = '{"city": "Paris"}'
            with tracer.start_as_current_span("execute_tool lookup", attributes=attributes):
                pass
    provider.shutdown()
    target = fill(tmp_path / "chdb", memory.get_finished_spans())
    labels = {}
    for name, reader in (("sqlite", SQLiteReader(db)), ("clickhouse", ClickHouseReader(target))):
        frame = reader.hotspots_by_agent(Filters())
        labels[name] = dict(zip(frame["agent"].map(lambda a: a.split("/")[0]), frame["repeated_calls"], strict=True))
    assert labels["sqlite"] == labels["clickhouse"]
    assert labels["sqlite"]["LangGraph"] == 3  # the first call is under the provisional trace:… key
