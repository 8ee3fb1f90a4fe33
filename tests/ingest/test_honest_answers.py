"""``ingest`` and ``doctor`` say what the input held: input with no OTLP record is refused in one line with
exit 2 and no store, and ingest's summary counts the rows it added, so a second run says 0 new."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.ingest.otlp import batches, otlp_json_line, record_workload, write_lines

MODEL: dict[str, str | int] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 1000,
    "gen_ai.usage.output_tokens": 100,
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _no_records(kind: str) -> bytes:
    if kind == "text":
        return b"".join(f"2026-12-02 19:30:{i:02d} INFO request served\n".encode() for i in range(300))
    if kind == "binary":
        return random.Random(22).randbytes(200_000)
    return b'{"resourceMetrics": [{"scopeMetrics": []}]}\n' * 3  # collector output, but metrics


@pytest.mark.parametrize("kind", ["text", "binary", "metrics"])
def test_input_with_no_otlp_record_is_refused_in_one_line_and_creates_no_store(tmp_path: Path, kind: str) -> None:
    path, db = tmp_path / "input.jsonl", tmp_path / "store.db"
    path.write_bytes(_no_records(kind))
    for done in (_cli("ingest", str(path), "--db", str(db)), _cli("doctor", str(path))):
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("otel-repeat-guard: error: "), done.stderr
        assert "no OTLP trace record" in done.stderr and str(path) in done.stderr
        assert "every recognised tool call can be compared" not in done.stdout
    assert not db.exists()


def test_an_empty_file_is_nothing_to_ingest_and_nothing_to_diagnose(tmp_path: Path) -> None:
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(b"")
    done = _cli("ingest", str(path), "--db", str(db))
    assert done.returncode == 0 and "0 records, 0 spans: 0 new" in done.stdout
    assert not db.exists()
    doctor = _cli("doctor", str(path))
    assert doctor.returncode == 2 and "no OTLP trace record to diagnose (no record at all)" in doctor.stderr


def _plain_and_model_spans() -> list[ReadableSpan]:
    """A model call (a row in model_calls) and two spans the store keeps nothing of."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.ingest")
    with tracer.start_as_current_span("GET /health"), tracer.start_as_current_span("db.query"):
        pass
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=MODEL):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_a_second_ingest_of_the_same_file_says_0_new(tmp_path: Path) -> None:
    spans = record_workload(guard=True)[0] + _plain_and_model_spans()
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(batch) for batch in batches(spans, 4)])
    db = tmp_path / "store.db"
    stored = len(spans) - 2  # 12 tool calls, 2 agent runs and a model call; the 2 plain spans hold nothing
    first = _cli("ingest", str(path), "--db", str(db))
    assert first.returncode == 0, first.stderr
    assert (
        f"{len(spans)} spans: {stored} new, 0 already stored, 2 with no tool call, model call or agent run to store"
        in first.stdout
    )
    with sqlite3.connect(db) as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("tool_calls", "model_calls")]
    assert counts == [12, 1]
    again = _cli("ingest", str(path), "--db", str(db))
    assert again.returncode == 0, again.stderr
    assert f"{len(spans)} spans: 0 new, {stored} already stored, 2 with no tool call" in again.stdout
    with sqlite3.connect(db) as conn:
        assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("tool_calls", "model_calls")] == [
            12,
            1,
        ]
