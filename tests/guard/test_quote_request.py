"""Quote what the model sent (issue 39, item 6): where the guard has the model's request for a tool call, the
detailed reminder quotes its arguments, and the tool span carries them as a fact for the store's preview; the
chain key stays the tool span's, and without a request the tool span's arguments are quoted as before."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.schema import open_for_reading

REQUESTED = "repeat_tool_guard.requested_arguments"  # otel_repeat_guard.core.facts.REQUESTED
SENT = {"path": "a.txt"}


class Agent:
    def __init__(self, store: Path | None = None) -> None:
        self.reminders: list[Reminder] = []
        self.guard = RepeatGuardSpanProcessor(on_reminder=self.reminders.append, record_facts=True)
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.guard)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        if store is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(str(store), store_arguments=True)))
        self.tracer = self.provider.get_tracer("tests")

    def step(self, i: int, tool_arguments: str, *, requested: bool = True) -> None:
        """The model asks for read_file(SENT) as call ``c<i>``; the tool span records ``tool_arguments``."""
        with self.tracer.start_as_current_span("chat gpt-4o") as model:
            model.set_attribute("gen_ai.operation.name", "chat")
            if requested:
                part = {"type": "tool_call", "id": f"c{i}", "name": "read_file", "arguments": SENT}
                model.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))
                model.set_attribute("gen_ai.response.finish_reasons", ["tool_calls"])
        with self.tracer.start_as_current_span("execute_tool read_file") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "read_file")
            span.set_attribute("gen_ai.tool.call.id", f"c{i}")
            span.set_attribute("gen_ai.tool.call.arguments", tool_arguments)

    def run(self, calls: int, tool_arguments: str, *, requested: bool = True) -> None:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reader"}
        with self.tracer.start_as_current_span("invoke_agent reader", attributes=attributes):
            for i in range(calls):
                self.step(i, tool_arguments, requested=requested)


def test_the_detailed_reminder_quotes_the_arguments_the_model_sent() -> None:
    agent = Agent()
    agent.run(5, '"a.txt"')  # the tool span's input is the bare value, as OpenInference's LangChain span records it
    detailed = [r for r in agent.reminders if r.tier == "detailed"]
    assert [r.arguments_preview for r in detailed] == ['{"path":"a.txt"}']
    assert 'in a row with identical arguments:\n{"path":"a.txt"}\nThese repeated calls' in detailed[0].text
    tools = [s for s in agent.exporter.get_finished_spans() if s.name == "execute_tool read_file"]
    assert {s.attributes.get(REQUESTED) for s in tools} == {'{"path":"a.txt"}'}  # type: ignore[union-attr]
    digests = {
        e.attributes["repeat_tool_guard.arguments_digest"]  # type: ignore[index]
        for s in tools
        for e in s.events
        if e.name == "repeat_tool_guard.repeat"
    }
    assert len(digests) == 1  # the chain key is still the tool span's arguments


def test_where_the_request_reads_as_the_tool_span_no_fact_is_added_and_the_quote_is_the_same() -> None:
    agent = Agent()
    agent.run(5, json.dumps(SENT))
    assert [r.arguments_preview for r in agent.reminders if r.tier == "detailed"] == ['{"path":"a.txt"}']
    assert all(REQUESTED not in (s.attributes or {}) for s in agent.exporter.get_finished_spans())


def test_without_the_request_the_tool_spans_arguments_are_quoted() -> None:
    agent = Agent()
    agent.run(5, '"a.txt"', requested=False)
    assert [r.arguments_preview for r in agent.reminders if r.tier == "detailed"] == ['"a.txt"']


def test_the_stored_preview_quotes_what_the_model_sent(tmp_path: Path) -> None:
    store = tmp_path / "guard.db"
    agent = Agent(store)
    agent.run(3, '"a.txt"')
    conn, _ = open_for_reading(store)
    try:
        previews = [row[0] for row in conn.execute("SELECT preview FROM tool_call_arguments")]
        digests = {row[0] for row in conn.execute("SELECT arguments_digest FROM tool_calls")}
    finally:
        conn.close()
    assert previews == ['{"path":"a.txt"}'] * 3
    assert len(digests) == 1
