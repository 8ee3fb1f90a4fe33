"""Reminders that did not reach the model (issue 39, item 5), from the guard's events to the store, the ClickHouse
reader and the Blind spots page: each count equal, each reason in words with its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import ReminderInbox, RepeatGuardSpanProcessor
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.decide import delivery
from otel_repeat_guard.integrations._common import due_reminders
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store.queries import Filters
from tests.clickhouse.filling import fill
from tests.clickhouse.test_figures import _same
from tests.dashboard.test_app import run_app


def _agents(db: Path) -> list:  # type: ignore[type-arg]
    """Two agent runs into the store at ``db``: ``reader`` loops 8 times with no adapter (3 reminders undelivered),
    ``writer`` 3 times with an adapter that takes its reminder. Returns the spans, as the Collector gets them."""
    inbox = ReminderInbox()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    guard = RepeatGuardSpanProcessor(on_reminder=inbox.put, record_facts=True)
    provider.add_span_processor(guard)
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(db)))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    for agent, tool, calls, adapter in (("reader", "read_file", 8, False), ("writer", "write_file", 3, True)):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes):
            for step in range(calls + 1):
                if adapter:
                    with due_reminders(guard, inbox):
                        pass
                chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
                with tracer.start_as_current_span("chat gpt-4o", attributes=chat):
                    pass
                if step < calls:
                    tool_attributes = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": '{"path": "a.txt"}',
                    }
                    tracer.start_span(f"execute_tool {tool}", attributes=tool_attributes).end()
    provider.shutdown()
    return list(memory.get_finished_spans())


EXPECTED = [("no_adapter", "detailed", "read_file", 2), ("no_adapter", "gentle", "read_file", 1)]


def test_the_store_and_the_clickhouse_reader_count_the_same_undelivered_reminders(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    spans = _agents(db)
    target = fill(tmp_path / "chdb", spans)
    sqlite, clickhouse = SQLiteReader(db), ClickHouseReader(target)
    got = sqlite.undelivered_reminders(Filters())
    assert got[["reason", "tier", "tool", "reminders"]].values.tolist() == [list(row) for row in EXPECTED]
    bounds = sqlite.time_bounds().iloc[0]
    for filters in (
        Filters(),
        Filters(tools=("write_file",)),
        Filters(tools=("read_file",)),
        Filters(agents=("reader",)),
        Filters(agents=("writer",)),
        Filters(services=("unknown_service",)),
        Filters(start_ns=int(bounds["last_ns"]) + 1),
    ):
        _same(sqlite.undelivered_reminders(filters), clickhouse.undelivered_reminders(filters))
    assert sqlite.undelivered_reminders(Filters(agents=("writer",))).empty


def test_the_blind_spots_page_says_which_reminders_never_reached_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store.db"
    _agents(db)
    app = run_app(monkeypatch, db, page="blind_spots")
    warnings = [w.value for w in app.warning]
    assert (
        "3 reminders never reached the model: the guard handed them on, but no adapter added them to the run's "
        "next model request." in warnings
    )
    said = [m.value.replace("\\", "") for m in app.markdown]
    assert said[-2:] == [
        f"**No adapter asked** · 3 reminders: {delivery.explain('no_adapter')}.",
        f"**Fix:** {delivery.fix_for('no_adapter', '')}.",
    ]
    tables = [df.value.values.tolist() for df in app.dataframe if "reminders" in df.value.columns]
    assert tables == [[["read_file", "detailed", 2], ["read_file", "gentle", 1]]]
