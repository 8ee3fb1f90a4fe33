"""A writer process for the store durability tests: a real guarded pipeline into a shared store.

Run as ``python store_writer.py DB NAME CALLS START_AT [--stall-after ROWS]``. It builds a
TracerProvider with the guard and a BatchSpanProcessor over a SQLiteSpanExporter, waits
until ``START_AT`` (a ``time.time()`` value) so that all writers start together, then
ends ``CALLS`` tool spans of agent ``NAME`` in runs of four identical calls.

After each batch the exporter commits it prints ``committed <rows so far>``. With
``--stall-after ROWS`` the first batch that starts once ROWS rows are committed stops
halfway through its transaction (rows inserted, not committed, the write lock held) and
prints ``stalled <rows committed>``: the test then kills the process with SIGKILL.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter
from otel_repeat_guard.store import batch as batch_module

RUN = 4  # identical calls per run
BATCH = 2000


class ReportingExporter(SQLiteSpanExporter):
    """The store's exporter, saying on stdout what it has committed (and stalling on demand)."""

    def __init__(self, db: str, stall_after: int | None) -> None:
        super().__init__(db)
        self.committed = 0
        self.batches = 0
        self._stall_after = stall_after
        self._stalling = False
        self._inserted = 0
        self._stall_at = 0
        if stall_after is not None:
            # A tiny page cache: the stalled transaction's pages spill into the WAL file before the
            # kill, so recovery has uncommitted frames to discard, not just an unwritten cache.
            self._store.current().execute("PRAGMA cache_size = 8")
        insert_call = batch_module.insert_call  # the transaction's write of one call (store/batch.py's, of writes.py)

        def inserting(*args: Any, **kwargs: Any) -> Any:
            agent = insert_call(*args, **kwargs)
            self._inserted += 1
            if self._stalling and self._inserted == self._stall_at:
                print(f"stalled {self.committed}", flush=True)
                threading.Event().wait()  # inside the open transaction, until SIGKILL
            return agent

        batch_module.insert_call = inserting  # this process has one exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches += 1
        self._inserted = 0
        self._stall_at = max(1, len(spans) // 2)
        self._stalling = self._stall_after is not None and self.committed >= self._stall_after
        result = super().export(spans)
        if result is SpanExportResult.SUCCESS:
            self.committed += len(spans)
            print(f"committed {self.committed}", flush=True)
        return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("name")
    parser.add_argument("calls", type=int)
    parser.add_argument("start_at", type=float)
    parser.add_argument("--stall-after", type=int, default=None)
    args = parser.parse_args(argv)

    provider = TracerProvider(resource=Resource.create({"service.name": args.name}))
    provider.add_span_processor(RepeatGuardSpanProcessor())
    exporter = ReportingExporter(args.db, args.stall_after)
    # The queue holds every span: the BatchSpanProcessor drops spans when its queue is full,
    # which would be the SDK losing them, not the store.
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter, max_queue_size=args.calls + 1, max_export_batch_size=BATCH, schedule_delay_millis=20
        )
    )
    tracer = provider.get_tracer("tests.reliability")
    while time.time() < args.start_at:
        time.sleep(0.001)
    for i in range(args.calls):
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "poll",
            "gen_ai.agent.id": args.name,
            "gen_ai.tool.call.arguments": f'{{"n": {i // RUN}}}',
        }
        tracer.start_span("execute_tool poll", attributes=attributes).end()
    # Shutdown gives the queue 30 s, then drops what is left: on a loaded machine four writers can need more,
    # and that would again be the SDK losing spans, not the store. A flush without that deadline first.
    provider.force_flush(timeout_millis=600_000)
    provider.shutdown()
    print(f"done {exporter.committed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
