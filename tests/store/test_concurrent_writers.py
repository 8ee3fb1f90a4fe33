"""Two processes exporting into one store at the same time lose no rows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

WRITER = """
import sys, time
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter

db, name, calls, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
provider = TracerProvider(resource=Resource.create({"service.name": name}))
provider.add_span_processor(RepeatGuardSpanProcessor())
provider.add_span_processor(
    BatchSpanProcessor(SQLiteSpanExporter(db), max_export_batch_size=50, schedule_delay_millis=5, max_queue_size=100000)
)
tracer = provider.get_tracer(name)
while time.time() < start_at:  # both writers start together
    time.sleep(0.001)
for i in range(calls):
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "poll",
        "gen_ai.agent.id": name,
        "gen_ai.tool.call.arguments": '{"n": %d}' % (i // 4),  # runs of four
    }
    tracer.start_span("execute_tool poll", attributes=attributes).end()
provider.shutdown()
"""


def test_two_processes_write_one_file_without_losing_rows(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    calls = 3000
    start_at = time.time() + 1.5
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db), name, str(calls), str(start_at)])
        for name in ("writer-a", "writer-b")
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    with sqlite3.connect(db) as conn:
        counts = dict(conn.execute("SELECT service_name, count(*) FROM tool_calls GROUP BY service_name").fetchall())
        runs = dict(conn.execute("SELECT run_length, count(*) FROM tool_calls GROUP BY run_length").fetchall())
        interleaved = conn.execute(
            "SELECT count(*) FROM tool_calls a JOIN tool_calls b ON b.id = a.id + 1"
            " WHERE a.service_name != b.service_name"
        ).fetchone()[0]
    assert counts == {"writer-a": calls, "writer-b": calls}
    assert runs == {1: calls // 2, 2: calls // 2, 3: calls // 2, 4: calls // 2}
    assert interleaved > 0, "the writers did not overlap; the test proved nothing"
