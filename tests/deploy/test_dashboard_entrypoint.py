"""``deploy/dashboard-entrypoint.sh`` stopped, and the processes it runs."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from tests.backends.servers import poll, server_process
from tests.deploy.test_services_run import BIN
from tests.ingest.otlp import otlp_json_line, record_workload

STOPPED = 10.0  # seconds: well inside `docker stop`'s grace period, after which Docker kills the container


def test_the_follower_stops_on_sigterm_as_on_ctrl_c_with_its_store_closed(tmp_path: Path) -> None:
    """What the entrypoint sends it: SIGTERM ends ``ingest --follow`` as Ctrl+C does (exit 0, the summary said,
    the store closed, its write-ahead log folded in), not as a kill that leaves the summary unsaid."""
    traces, db = tmp_path / "traces.jsonl", tmp_path / "repeat-guard.db"
    spans, _ = record_workload(guard=True)
    traces.write_bytes(otlp_json_line(spans) + b"\n")
    log = tmp_path / "ingest.log"
    command = [str(BIN / "otel-repeat-guard"), "ingest", "--follow", "--quiet", "--db", str(db), str(traces)]
    with server_process(command, log, {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}) as process:

        def stored() -> int | None:
            try:  # read-only: never the empty file a plain connect would make before the follower's
                with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
                    (count,) = conn.execute("SELECT count(*) FROM tool_calls").fetchone()
            except sqlite3.OperationalError:  # not there yet, or its schema not yet
                return None
            return count if count == 12 else None

        poll(stored, timeout=30, what="12 ingested tool calls", process=process, log=log)
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(STOPPED) == 0, log.read_text()
        assert time.monotonic() - began < STOPPED
    assert f"ingested {traces} into {db}: " in log.read_text()
    assert not db.with_name(db.name + "-wal").exists()  # the last connection closed: checkpointed and removed
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM tool_calls").fetchone() == (12,)
