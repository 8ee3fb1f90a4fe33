"""SQLiteSpanExporter behind a real BatchSpanProcessor, with the guard, on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, ToolCall
from otel_repeat_guard.core.canonical import arguments_digest, canonical_bytes
from otel_repeat_guard.store import (
    DB_ENV,
    SCHEMA_VERSION,
    SchemaError,
    SQLiteSpanExporter,
    default_db_path,
    open_for_reading,
)

SECRET = "sk-live-THIS-IS-A-SECRET-TOKEN"


class Harness:
    def __init__(self, db: Path, *, facts: bool = True, **exporter_options: object) -> None:
        """``facts=False``: the guard records none of its facts, so the store reads the spans as an older guard's."""
        self.reminders: list[Reminder] = []
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "checkout-agent"}))
        self.guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=(3, 5)), self.reminders.append, record_facts=facts)
        self.exporter = SQLiteSpanExporter(db, config=GuardConfig(thresholds=(3, 5)), **exporter_options)  # type: ignore[arg-type]
        self.provider.add_span_processor(self.guard)
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter, max_export_batch_size=7))
        self.tracer = self.provider.get_tracer("test")

    def agent(self, name: str) -> trace.Span:
        return self.tracer.start_span(
            f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        )

    def call(
        self, parent: trace.Span | None, tool: str, arguments: object, *, denied: bool = False, **attrs: str
    ) -> None:
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(f"execute_tool {tool}", context=context, start_time=1_000_000_000)
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **attrs})
        if arguments is not None:
            span.set_attribute(
                "gen_ai.tool.call.arguments", arguments if isinstance(arguments, str) else json.dumps(arguments)
            )
        if denied:
            span.set_status(Status(StatusCode.ERROR, "denied"))
        span.end(end_time=1_250_000_000)

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def harness(db: Path) -> Iterator[Harness]:
    h = Harness(db)
    yield h
    h.close()


def rows(db: Path, sql: str = "SELECT * FROM tool_calls ORDER BY id") -> list[sqlite3.Row]:
    conn, _ = open_for_reading(db)
    conn.row_factory = sqlite3.Row
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


def test_every_field_of_a_tool_call_is_stored(harness: Harness, db: Path) -> None:
    run = harness.agent("support")
    for _ in range(3):
        harness.call(run, "lookup_order", {"order": 42, "fields": ["status"]})
    run.end()
    harness.close()
    stored = rows(db)
    assert len(stored) == 3
    first, _, third = stored
    span = next(s for s in harness.memory.get_finished_spans() if s.name == "execute_tool lookup_order")
    assert first["service_name"] == "checkout-agent"
    assert first["trace_id"] == f"{span.context.trace_id:032x}"
    assert len(first["span_id"]) == 16
    assert (first["start_ns"], first["end_ns"], first["duration_ns"]) == (1_000_000_000, 1_250_000_000, 250_000_000)
    assert first["tool_name"] == "lookup_order"
    assert first["tracked"] == 1 and first["error"] == 0
    assert [r["run_length"] for r in stored] == [1, 2, 3]
    assert (third["reminder_tier"], third["reminder_threshold"]) == ("gentle", 3)
    assert first["reminder_tier"] is None
    canonical = canonical_bytes({"order": 42, "fields": ["status"]})
    assert {r["arguments_digest"] for r in stored} == {arguments_digest(canonical)}
    previews = rows(db, "SELECT preview FROM tool_call_arguments")
    assert [p["preview"] for p in previews] == ['{"fields":["status"],"order":42}'] * 3


def test_agent_key_of_first_calls_is_the_guards_key(harness: Harness, db: Path) -> None:
    # The exporter never sees the ancestors of a tool span; the first call of a run (no guard
    # event yet) gets its agent from the agent-run span once that is exported.
    run = harness.agent("planner")
    for _ in range(3):
        harness.call(run, "search", {"q": "x"})
    run.end()
    harness.close()
    stored = rows(db)
    (reminder,) = harness.reminders
    assert {r["agent_key"] for r in stored} == {reminder.agent_id}
    assert {r["agent_name"] for r in stored} == {"planner"}
    assert {r["agent_pending"] for r in stored} == {0}


def test_concurrent_runs_of_one_agent_stay_apart(harness: Harness, db: Path) -> None:
    first, second = harness.agent("worker"), harness.agent("worker")
    for _ in range(2):
        harness.call(first, "fetch", {"url": "a"})
        harness.call(second, "fetch", {"url": "a"})
    first.end()
    second.end()
    harness.close()
    stored = rows(db)
    assert len({r["agent_key"] for r in stored}) == 2
    assert sorted(r["run_length"] for r in stored) == [1, 1, 2, 2]


def test_explicit_agent_id_denied_calls_and_excluded_tools(harness: Harness, db: Path) -> None:
    for tool in ("shell", "todo_write", "shell"):
        harness.call(None, tool, {"cmd": "rm -rf /"}, denied=True, **{"gen_ai.agent.id": "agent-7"})
    harness.call(None, "shell", {"cmd": "ls"}, **{"gen_ai.agent.id": "agent-7", "error.type": "timeout"})
    harness.close()
    stored = rows(db)
    assert [(r["tool_name"], r["tracked"], r["run_length"], r["error"]) for r in stored] == [
        ("shell", 1, 1, 1),
        ("todo_write", 0, None, 1),
        ("shell", 1, 2, 1),
        ("shell", 1, 1, 1),
    ]
    assert {r["agent_key"] for r in stored} == {"agent-7"}
    assert {r["agent_known"] for r in stored} == {1}


def test_calls_without_agent_or_arguments_are_still_recorded(harness: Harness, db: Path) -> None:
    harness.call(None, "ping", None)
    harness.call(None, "ping", "not json {")
    harness.close()
    first, second = rows(db)
    assert first["arguments_digest"] is None
    assert first["agent_key"] == f"trace:{first['trace_id']}/-"
    assert first["agent_known"] == 0
    assert second["arguments_digest"] == arguments_digest(b"not json {")


def test_store_arguments_false_keeps_argument_text_out_of_the_file(db: Path) -> None:
    harness = Harness(db, store_arguments=False)
    run = harness.agent("billing")
    for _ in range(3):
        harness.call(run, "charge", {"api_key": SECRET, "amount": 10})
    run.end()
    harness.close()
    assert rows(db, "SELECT count(*) AS n FROM tool_call_arguments")[0]["n"] == 0
    assert all(r["arguments_digest"] for r in rows(db))
    for path in db.parent.iterdir():  # the database, and any WAL or shared-memory file
        assert SECRET.encode() not in path.read_bytes(), path


def test_preview_is_bounded_like_the_reminder(db: Path) -> None:
    provider = TracerProvider()
    exporter = SQLiteSpanExporter(db, config=GuardConfig(arguments_preview_chars=10))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    span = provider.get_tracer("t").start_span(
        "execute_tool t", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "x" * 50}
    )
    span.end()
    provider.shutdown()
    assert (
        rows(db, "SELECT preview FROM tool_call_arguments")[0]["preview"] == "x" * 10 + "… [40 more characters omitted]"
    )


def test_conventions_parameter_decides_what_is_a_tool_span(db: Path) -> None:
    class EveryTool:
        def tool_call(self, name: str, attributes: object, events: object) -> ToolCall | None:
            return ToolCall(tool_name=name, arguments="{}", agent_id="a") if name.startswith("tool:") else None

        def agent_run(self, name: str, attributes: object) -> None:
            return None

    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(SQLiteSpanExporter(db, conventions=(EveryTool(), *DEFAULT_CONVENTIONS)))
    )
    tracer = provider.get_tracer("t")
    tracer.start_span("tool:grep").end()
    tracer.start_span("something else").end()
    provider.shutdown()
    assert [r["tool_name"] for r in rows(db)] == ["tool:grep"]


def test_non_tool_spans_are_not_stored(harness: Harness, db: Path) -> None:
    harness.tracer.start_span("chat gpt-5", attributes={"gen_ai.operation.name": "chat"}).end()
    harness.close()
    assert rows(db) == []


def test_file_is_wal_with_a_schema_version(harness: Harness, db: Path) -> None:
    harness.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT application, version FROM repeat_guard_schema").fetchall() == [
            ("otel-repeat-guard", SCHEMA_VERSION)
        ]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_reopening_appends_and_never_loses_rows(db: Path) -> None:
    for _ in range(2):
        h = Harness(db)
        h.call(None, "t", {"a": 1}, **{"gen_ai.agent.id": "x"})
        h.close()
    assert len(rows(db)) == 2


def test_foreign_database_is_refused_with_its_path(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(SchemaError, match=r"store\.db is a SQLite database of another program \(tables: users\)"):
        SQLiteSpanExporter(db)
    with sqlite3.connect(db) as conn:  # and it was left alone
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]


def test_newer_schema_is_refused(db: Path) -> None:
    SQLiteSpanExporter(db).shutdown()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE repeat_guard_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer than"):
        SQLiteSpanExporter(db)


def test_not_a_database_is_refused(db: Path) -> None:
    db.write_text("hello, I am a text file\n" * 100)
    with pytest.raises(SchemaError, match=r"store\.db is corrupt, truncated or not a SQLite database \(file is not"):
        SQLiteSpanExporter(db)


def test_default_path_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DB_ENV, raising=False)
    assert default_db_path() == Path("repeat-guard.db")
    monkeypatch.setenv(DB_ENV, str(tmp_path / "env.db"))
    exporter = SQLiteSpanExporter()
    assert exporter.path == tmp_path / "env.db"
    exporter.shutdown()
    assert (tmp_path / "env.db").is_file()


def test_export_after_shutdown_fails_without_raising(db: Path) -> None:
    exporter = SQLiteSpanExporter(db)
    exporter.shutdown()
    exporter.shutdown()
    assert exporter.export([]).name == "FAILURE"
    assert exporter.force_flush()
