"""Writing ingested spans into the store through its own exporter, once each.

Rows are made by :class:`~otel_repeat_guard.store.SQLiteSpanExporter` itself, so an
ingested span and an exported span give identical rows. Ingest adds one thing:
idempotency. Before a batch goes to the exporter, spans whose (trace id, span id) is
already in the store are dropped, and so are repeats within the batch, so re-reading a
file (a second ``ingest``, a restarted ``--follow``, a Collector retry that wrote a batch
twice) inserts nothing twice. The lookup uses an index on (trace_id, span_id) that ingest
adds to the store if it is missing; it changes no table, so the schema version stays.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.store import SQLiteSpanExporter, StoreError, open_for_writing

_SPAN_INDEX = "CREATE INDEX IF NOT EXISTS tool_calls_span ON tool_calls(trace_id, span_id)"
_LOOKUP_BATCH = 400  # pairs per query: well under SQLite's bound-parameter limit


class StoreWriteError(StoreError):
    """The store refused a batch (disk full, locked beyond the retries, ...)."""


class StoreWriter:
    """Sends spans to the store's exporter, skipping those the store already holds."""

    def __init__(self, path: str | Path, *, config: GuardConfig | None = None, store_arguments: bool = True) -> None:
        self.path = Path(path)
        self._exporter = SQLiteSpanExporter(self.path, config=config, store_arguments=store_arguments)
        self._conn = open_for_writing(self.path)
        self._conn.execute(_SPAN_INDEX)

    def write(self, spans: Sequence[ReadableSpan]) -> tuple[int, int]:
        """Store the spans not stored yet; returns (new, duplicate) counts."""
        keyed: dict[tuple[str, str], ReadableSpan] = {}
        for span in spans:
            context = span.context
            if context is not None:
                keyed.setdefault((format_trace_id(context.trace_id), format_span_id(context.span_id)), span)
        stored = self._stored(list(keyed))
        fresh = [span for key, span in keyed.items() if key not in stored]
        if fresh and self._exporter.export(fresh) is not SpanExportResult.SUCCESS:
            raise StoreWriteError(f"the store {self.path} refused a batch of {len(fresh)} spans (see the log above)")
        return len(fresh), len(spans) - len(fresh)

    def _stored(self, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for start in range(0, len(keys), _LOOKUP_BATCH):
            batch = keys[start : start + _LOOKUP_BATCH]
            values = ",".join("(?, ?)" for _ in batch)
            params = [part for key in batch for part in key]
            for table in ("tool_calls", "agent_runs"):
                query = f"SELECT trace_id, span_id FROM {table} WHERE (trace_id, span_id) IN (VALUES {values})"
                try:
                    rows = self._conn.execute(query, params).fetchall()
                except sqlite3.OperationalError as exc:
                    raise StoreWriteError(f"cannot read the store {self.path}: {exc}") from exc
                found.update((str(trace), str(span)) for trace, span in rows)
        return found

    def close(self) -> None:
        self._exporter.shutdown()
        self._conn.close()
