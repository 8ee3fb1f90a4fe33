"""A store fed by a guard that records no facts says so once, in the log and for the dashboard's banner, with the
fix; a guard wired by hand with the defaults records them, and the store says nothing (issue 40, item 1)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_repeat_guard import Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter, open_for_reading, queries

Guard = dict[str, object]


def graph_runs(db: Path, guard_options: Guard, runs: int = 2) -> tuple[SQLiteSpanExporter, list[Reminder]]:
    """LangGraph-shaped runs under OpenInference (a CHAIN root, no agent span), each of four identical
    TOOL spans, from a guard made by hand beside the store, as docs/runtimes.md shows."""
    reminders: list[Reminder] = []
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(on_reminder=reminders.append, **guard_options))  # type: ignore[arg-type]
    store = SQLiteSpanExporter(db)
    provider.add_span_processor(SimpleSpanProcessor(store))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    for _ in range(runs):
        with tracer.start_as_current_span("weather", attributes={"openinference.span.kind": "CHAIN"}):
            for _ in range(4):
                attributes = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"c": 1}'}
                with tracer.start_as_current_span("lookup", attributes=attributes):
                    pass
    provider.shutdown()
    return store, reminders


def banner(db: Path) -> str | None:
    conn, _ = open_for_reading(db)
    try:
        return queries.missing_facts(conn)
    finally:
        conn.close()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_guard_without_facts_makes_the_store_say_so_once_with_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        store, reminders = graph_runs(db, {"record_facts": False})
    assert [(r.run_length, r.tier) for r in reminders] == [(3, "gentle")] * 2  # the reminders do not change
    (said,) = warnings_of(caplog)  # once, though both runs repeat
    assert said.startswith(f"store {db}: it got spans from a repeat guard that records no facts")
    assert "drop record_facts=False from the RepeatGuardSpanProcessor" in said
    assert store.facts_missing is True
    text = banner(db)
    assert text is not None
    assert text.startswith("This store holds spans from a repeat guard that records no facts")
    assert "drop record_facts=False" in text and "ingest --replay" in text


def test_a_bare_guard_records_its_facts_and_the_store_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        store, reminders = graph_runs(db, {})
    assert [(r.run_length, r.tier) for r in reminders] == [(3, "gentle")] * 2
    assert warnings_of(caplog) == []
    assert store.facts_missing is False
    assert banner(db) is None
    conn, _ = open_for_reading(db)
    try:
        keys = conn.execute("SELECT DISTINCT agent_key FROM tool_calls").fetchall()
    finally:
        conn.close()
    assert len(keys) == 2 and all(key.startswith("weather#") for (key,) in keys)  # one key per run, none provisional


def test_a_second_exporter_on_the_same_store_says_it_again_and_the_store_keeps_one_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        graph_runs(db, {"record_facts": False}, runs=1)
        graph_runs(db, {"record_facts": False}, runs=1)
    assert len(warnings_of(caplog)) == 2  # once per process that feeds it
    conn, _ = open_for_reading(db)
    try:
        assert conn.execute("SELECT count(*) FROM store_info WHERE key = 'facts_missing'").fetchone() == (1,)
    finally:
        conn.close()
