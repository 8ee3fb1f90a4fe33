"""Secrets and exposure on the store and dashboard side.

A secret is planted in tool arguments and real spans go through a real TracerProvider,
the guard and a BatchSpanProcessor over ``SQLiteSpanExporter(store_arguments=False)``.
The secret must appear in no byte of the store (main file, -wal and -shm), no guard event,
no metric and no log record. The dashboard binds to 127.0.0.1 by default, and a filter
value that is an SQL injection attempt is only ever a value.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from streamlit.testing.v1 import AppTest

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.cli import main as cli
from otel_repeat_guard.cli import serve
from otel_repeat_guard.dashboard.sections.headline import read_headline
from otel_repeat_guard.dashboard.sections.overview import OVER_TIME_KEY
from otel_repeat_guard.store import DB_ENV, SQLiteSpanExporter, open_for_reading, queries
from otel_repeat_guard.store.queries import Filters

SECRET = "sk-live-PLANTED-51c9e0f4a7d3"
CALLS = 6  # one run of six: a gentle reminder at 3, a detailed one (which quotes the arguments) at 5
APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"


def store_files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.iterdir()) if p.name.startswith(db.name)}


def run_agent(db: Path, *, redact: bool) -> tuple[list[ReadableSpan], list[Reminder], str, dict[str, bytes]]:
    """A guarded agent hammering a tool whose arguments hold the secret; returns what left the guard."""
    reminders: list[Reminder] = []
    reader = InMemoryMetricReader()
    guard = RepeatGuardSpanProcessor(
        GuardConfig(),
        reminders.append,
        meter_provider=MeterProvider(metric_readers=[reader]),
        **({"redact": lambda text: "[redacted]"} if redact else {}),  # type: ignore[arg-type]
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "vault-agent"}))
    provider.add_span_processor(guard)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter(db, store_arguments=False)))
    tracer = provider.get_tracer("tests.reliability")
    arguments = json.dumps({"url": "https://api.example/v1/charges", "headers": {"Authorization": f"Bearer {SECRET}"}})
    with tracer.start_as_current_span(
        "invoke_agent payer", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "payer"}
    ):
        for _ in range(CALLS):
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "http_get",
                "gen_ai.tool.call.arguments": arguments,
            }
            with tracer.start_as_current_span("execute_tool http_get", attributes=attributes):
                pass
    provider.force_flush()
    live_files = store_files(db)  # while the exporter's connection is open: the -wal and -shm exist
    provider.shutdown()
    metrics = reader.get_metrics_data()
    assert metrics is not None
    return list(memory.get_finished_spans()), reminders, metrics.to_json(), live_files


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    yield caplog


def guard_events(spans: list[ReadableSpan]) -> list[dict[str, object]]:
    return [dict(e.attributes or {}) for s in spans for e in s.events if e.name.startswith("repeat_tool_guard.")]


def assert_secret_nowhere(db: Path, live_files: dict[str, bytes], metrics: str, logs: str) -> None:
    assert {"store.db", "store.db-wal", "store.db-shm"} <= set(live_files)
    assert sum(len(data) for data in live_files.values()) > 10_000  # real files were searched
    for name, data in [*live_files.items(), *store_files(db).items()]:
        for needle in (SECRET.encode(), SECRET.encode("utf-16-le"), b"Authorization", b"api.example"):
            assert needle not in data, f"{needle!r} found in {name}"
    assert "http_get" in metrics and SECRET not in metrics and "Authorization" not in metrics
    assert SECRET not in logs


def test_store_arguments_false_keeps_argument_text_out_of_every_file(
    tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "store.db"
    _spans, reminders, metrics, live_files = run_agent(db, redact=False)
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in all_logs.records)
    assert_secret_nowhere(db, live_files, metrics, logs)
    with sqlite3.connect(db) as conn:  # the calls themselves are all there, with digests
        rows = conn.execute("SELECT run_length, reminder_tier, arguments_digest FROM tool_calls ORDER BY id").fetchall()
        assert conn.execute("SELECT count(*) FROM tool_call_arguments").fetchone() == (0,)
    assert [r[:2] for r in rows] == [(1, None), (2, None), (3, "gentle"), (4, None), (5, "detailed"), (6, None)]
    assert len({r[2] for r in rows}) == 1 and len(str(rows[0][2])) == 32
    # Without redact= the detailed reminder quotes the arguments: the store is clean, the reminder is not.
    assert [r.tier for r in reminders] == ["gentle", "detailed"] and SECRET in reminders[1].text


def test_redact_keeps_the_secret_out_of_events_and_reminders_too(
    tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "store.db"
    spans, reminders, metrics, live_files = run_agent(db, redact=True)
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in all_logs.records)
    assert_secret_nowhere(db, live_files, metrics, logs)
    events = guard_events(spans)
    assert len(events) == (CALLS - 1) + 2  # a repeat event on calls 2..6, plus two reminders
    assert SECRET not in json.dumps(events) and "Authorization" not in json.dumps(events)
    digests = {e["repeat_tool_guard.arguments_digest"] for e in events if "repeat_tool_guard.arguments_digest" in e}
    assert len(digests) == 1  # the events carry a digest of the arguments, not the arguments
    assert [(r.tier, r.arguments_preview) for r in reminders] == [("gentle", "[redacted]"), ("detailed", "[redacted]")]
    assert "[redacted]" in reminders[1].text and all(SECRET not in r.text for r in reminders)


# -- the dashboard: bound to this machine, and filter values are only values --------------------------


def test_dashboard_binds_to_localhost_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    SQLiteSpanExporter(db).shutdown()
    commands: list[list[str]] = []

    class Server:
        def __init__(self, command: list[str], env: dict[str, str]) -> None:
            commands.append(command)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(serve.subprocess, "Popen", Server)
    assert cli.main(["dashboard", "--db", str(db)]) == 0
    assert cli.main(["dashboard", "--db", str(db), "--host", "0.0.0.0", "--port", "9000"]) == 0
    bound = [(c[c.index("--server.address") + 1], c[c.index("--server.port") + 1]) for c in commands]
    assert bound == [("127.0.0.1", "8501"), ("0.0.0.0", "9000")]
    assert "at http://127.0.0.1:8501" in capsys.readouterr().out


INJECTION = "'; DROP TABLE tool_calls; --"


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A guarded run, plus filter options (as the exporter keeps them) whose values are SQL."""
    db = tmp_path_factory.mktemp("hostile") / "store.db"
    run_agent(db, redact=True)
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO dimensions (kind, value) VALUES (?, ?)",
            [(kind, INJECTION) for kind in ("service", "agent", "tool")] + [("tool", '") OR 1=1 --')],
        )
    return db


def table_state(db: Path) -> tuple[list[str], int]:
    with sqlite3.connect(db) as conn:
        tables = sorted(n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        return tables, conn.execute("SELECT count(*) FROM tool_calls").fetchone()[0]


def test_injection_through_every_query_is_only_a_value(hostile_store: Path) -> None:
    before = table_state(hostile_store)
    assert before[1] == CALLS
    conn, _ = open_for_reading(hostile_store)
    try:
        for hostile in (INJECTION, '") OR 1=1 --', "x' OR '1'='1"):
            for filters in (
                Filters(services=(hostile,)),
                Filters(agents=(hostile,)),
                Filters(tools=(hostile,)),
                Filters(tiers=(hostile,)),
            ):
                row = queries.headline(conn, filters).iloc[0]
                if filters.tiers:  # the tier filter narrows reminders only: the calls still count
                    assert (row["tool_calls"], row["reminders"]) == (CALLS, 0)
                else:
                    assert (row["tool_calls"], row["repeated_calls"], row["reminders"]) == (0, 0, 0)
                    assert queries.hotspots_by_tool(conn, filters).empty
                    assert queries.hotspots_by_agent(conn, filters).empty
                    assert queries.over_time(conn, filters, 60).empty
                    assert queries.run_lengths(conn, filters).empty
                assert queries.hotspot_runs(conn, Filters(), hostile).empty
            assert queries.chain(conn, hostile, 10**6, 5).empty
        # and the real values still answer correctly
        assert queries.headline(conn, Filters(tools=("http_get",))).iloc[0]["repeated_calls"] == CALLS - 1
    finally:
        conn.close()
    assert table_state(hostile_store) == before


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def _headline(app: AppTest) -> dict[str, str]:
    """The Overview's headline figures, label -> value as shown."""
    return {f.label: f.value for element in app.get("html") for f in read_headline(element.value)}


@pytest.mark.usefixtures("fresh_cache")
def test_injection_through_the_dashboard_filters(hostile_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = table_state(hostile_store)
    monkeypatch.setenv(DB_ENV, str(hostile_store))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.session_state[OVER_TIME_KEY] = True  # the chart, folded until opened, reads the filters too
    app.run()
    assert not app.exception
    assert _headline(app)["Repeated calls"] == str(CALLS - 1)
    for key in ("services", "agents", "tools"):
        assert INJECTION in app.multiselect(key=key).options
        app.multiselect(key=key).set_value([INJECTION]).run()
        assert not app.exception, [e.message for e in app.exception]
        shown = _headline(app)
        assert (shown["Tool calls"], shown["Repeated calls"], shown["Longest run"]) == ("0", "0", "0")
        assert [c.value for c in app.caption if c.value.startswith("No ")] == [
            "No repeated calls, no ignored reminders and no blind spots in this selection.",
            "No repeated calls in this selection.",
        ]
        app.multiselect(key=key).set_value([]).run()
        assert _headline(app)["Repeated calls"] == str(CALLS - 1)
    assert table_state(hostile_store) == before
