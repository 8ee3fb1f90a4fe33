"""The agent label the store keeps is the run's own name, whatever it is, never its key (issue 23, item 5)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.conventions import agent_run_key, agent_run_label
from otel_repeat_guard.store import SQLiteSpanExporter


def graph_run(db: Path, graph: str, *, record_facts: bool) -> list[tuple[str, str, int]]:
    """A LangGraph-shaped run under OpenInference: a root CHAIN span named after the graph (OpenInference
    tags it AGENT only when the name contains "agent"), with four identical TOOL spans; the guard does not
    record its facts on the spans (the README's setup), so the store reads the run from the repeat events."""
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(record_facts=record_facts))
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(db)))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    with tracer.start_as_current_span(graph, attributes={"openinference.span.kind": "CHAIN"}):
        for _ in range(4):
            attributes = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"city": "Paris"}'}
            with tracer.start_as_current_span("lookup", attributes=attributes):
                pass
    provider.shutdown()
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT agent_key, COALESCE(agent_name, agent_key), run_length FROM tool_calls ORDER BY start_ns"
        ).fetchall()


def test_a_graph_named_without_agent_is_labelled_with_its_own_name(tmp_path: Path) -> None:
    rows = graph_run(tmp_path / "s.db", "LangGraph", record_facts=False)
    repeats = [(key.split("#")[0], label, length) for key, label, length in rows if length >= 2]
    assert repeats == [("LangGraph", "LangGraph", 2), ("LangGraph", "LangGraph", 3), ("LangGraph", "LangGraph", 4)]


def test_with_the_guards_facts_the_label_is_the_same_name(tmp_path: Path) -> None:
    rows = graph_run(tmp_path / "s.db", "weather", record_facts=True)
    assert {label for _, label, _ in rows} == {"weather"}
    assert [length for _, _, length in rows] == [1, 2, 3, 4]


def test_the_label_of_a_key_is_the_name_it_was_built_from() -> None:
    assert agent_run_label(agent_run_key(None, "LangGraph", 0x675C9A5250E3E2FE)) == "LangGraph"
    assert agent_run_label(agent_run_key(None, "a#b", 1)) == "a#b"
    assert agent_run_label("trace:0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331") is None
    assert agent_run_label("coder#12") is None
    assert agent_run_label("#675c9a5250e3e2fe") is None
