"""One odd value never costs good data: poison spans through the exporter and through ingest, and
concurrent ingests of one file that store each span once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, EventLike, ToolCall
from otel_repeat_guard.store import SQLiteSpanExporter
from tests.ingest.otlp import otlp_json_line, record_workload, write_lines

GOOD = '{"q": "ok"}'


def _tool(tracer: Any, name: str, arguments: str, *, end_time: int | None = None) -> None:
    span = tracer.start_span(f"execute_tool {name}")
    span.set_attribute("gen_ai.operation.name", "execute_tool")
    span.set_attribute("gen_ai.tool.name", name)
    span.set_attribute("gen_ai.tool.call.arguments", arguments)
    span.end(end_time=end_time)


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT tool_name, end_ns FROM tool_calls ORDER BY id").fetchall()


@pytest.mark.parametrize(
    ("odd", "stored_as"),
    [
        (("grep", '{"q": "\\ud83d"}', None), ("grep", None)),  # ASCII JSON of a cut-off emoji
        (("gr\ud800ep", GOOD, None), ("gr\ufffdep", None)),  # a lone surrogate in the tool name
        (("grep", GOOD, time.time_ns() * 1000), ("grep", 2**63 - 1)),  # a harness ending spans in the wrong unit
    ],
    ids=["surrogate-arguments", "surrogate-tool-name", "end-time-overflow"],
)
def test_one_odd_span_in_a_batch_costs_nothing(
    tmp_path: Path, odd: tuple[str, str, int | None], stored_as: tuple[str, int | None]
) -> None:
    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db)
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor())
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    tracer = provider.get_tracer("poison")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(5):
            _tool(tracer, f"good{i}", GOOD)
        name, arguments, end_time = odd
        _tool(tracer, name, arguments, end_time=end_time)
    provider.shutdown()  # one batch of all of them
    rows = _rows(db)
    assert [r[0] for r in rows] == ["good0", "good1", "good2", "good3", "good4", stored_as[0]]
    if stored_as[1] is not None:
        assert rows[-1][1] == stored_as[1]
    assert exporter.dropped_spans == 0


class _Exploding:
    """A convention that fails on one span: the worst an unforeseen value can do to the row builder."""

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        if name == "execute_tool boom":
            raise RuntimeError("cannot read this span")
        return None

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> None:
        return None


def test_a_span_that_still_cannot_be_stored_is_dropped_alone_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db, conventions=[_Exploding(), *DEFAULT_CONVENTIONS])
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    tracer = provider.get_tracer("poison")
    with tracer.start_as_current_span("root"):
        for i in range(5):
            _tool(tracer, f"good{i}", GOOD)
        boom = tracer.start_span("execute_tool boom")
        boom.end()
    provider.shutdown()
    assert [r[0] for r in _rows(db)] == [f"good{i}" for i in range(5)]
    assert exporter.dropped_spans == 1
    ids = f"{boom.get_span_context().trace_id:032x}/{boom.get_span_context().span_id:016x}"
    assert any(ids in r.getMessage() and "cannot read this span" in r.getMessage() for r in caplog.records)


def _ingest(path: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", "ingest", str(path), "--db", str(db), "--quiet"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ingest_stores_every_good_span_around_poison(tmp_path: Path) -> None:
    spans, _ = record_workload(guard=True)
    line = json.loads(otlp_json_line(spans))
    span_list = line["resourceSpans"][0]["scopeSpans"][0]["spans"]
    tools = [s for s in span_list if s["name"].startswith("execute_tool")]
    for attribute in tools[0]["attributes"]:
        if attribute["key"] == "gen_ai.tool.call.arguments":
            attribute["value"] = {"stringValue": '{"path": "\\ud83d"}'}
    tools[1]["endTimeUnixNano"] = "18446744073709551615"  # a valid fixed64
    path = write_lines(tmp_path / "traces.json", [json.dumps(line).encode()])
    done = _ingest(path, tmp_path / "store.db")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "store.db") as conn:
        stored = conn.execute("SELECT COUNT(*), MAX(end_ns) FROM tool_calls").fetchone()
    assert stored == (len(tools), 2**63 - 1)


@pytest.mark.parametrize("processes", [2, 4])
def test_concurrent_ingests_of_one_file_store_each_span_once(tmp_path: Path, processes: int) -> None:
    lines = [otlp_json_line(record_workload(guard=True)[0]) for _ in range(200)]
    path = write_lines(tmp_path / "traces.json", lines)
    db = tmp_path / "store.db"
    command = [sys.executable, "-m", "otel_repeat_guard.cli.main", "ingest", str(path), "--db", str(db), "--quiet"]
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(processes)]
    for process in running:
        assert process.wait(timeout=300) == 0, process.stderr.read() if process.stderr else ""
    tools_per_line = 12  # record_workload: 8 researcher calls and 4 coder calls
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 200 * tools_per_line
        assert conn.execute("SELECT COUNT(DISTINCT trace_id || span_id) FROM tool_calls").fetchone()[0] == 2400
        assert conn.execute("SELECT SUM(calls) FROM call_rollup").fetchone()[0] == 2400
