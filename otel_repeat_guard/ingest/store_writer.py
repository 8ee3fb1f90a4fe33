"""Writing ingested spans into the store through its own exporter, once each.

Rows are made by :class:`~otel_repeat_guard.store.SQLiteSpanExporter` itself, so an
ingested span and an exported span give identical rows. A span is stored once: the schema
holds a unique key on (trace id, span id) and the exporter inserts OR IGNORE, so two ingests
of one file at once (an overlapping cron job, a restarted ``--follow``) insert nothing twice.
Before a batch goes to the exporter, spans already stored and repeats within the batch are
left out, which only saves work and counts them. A span the store cannot hold is dropped
alone and reported with its trace and span id, like a bad line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.store import SQLiteSpanExporter, StoreError, open_for_writing

_LOOKUP_BATCH = 400  # pairs per query: well under SQLite's bound-parameter limit


class StoreWriteError(StoreError):
    """The store refused a batch (disk full, locked beyond the retries, ...)."""


class StoreWriter:
    """Sends spans to the store's exporter, skipping those the store already holds."""

    def __init__(self, path: str | Path, *, config: GuardConfig | None = None, store_arguments: bool = True) -> None:
        self.path = Path(path)
        self._exporter = SQLiteSpanExporter(self.path, config=config, store_arguments=store_arguments)
        self._conn = open_for_writing(self.path)

    def write(self, spans: Sequence[ReadableSpan]) -> tuple[int, int, list[str]]:
        """Store the spans not stored yet; returns the new and duplicate counts, and the dropped spans
        (``trace/span: why``)."""
        keyed: dict[tuple[str, str], ReadableSpan] = {}
        for span in spans:
            context = span.context
            if context is not None:
                keyed.setdefault((format_trace_id(context.trace_id), format_span_id(context.span_id)), span)
        stored = self._stored(list(keyed))
        fresh = [span for key, span in keyed.items() if key not in stored]
        if not fresh:
            return 0, len(spans), []
        try:
            result = self._exporter.write(fresh)
        except Exception as exc:  # the store itself refused (locked beyond the retries, disk full)
            raise StoreWriteError(f"the store {self.path} refused a batch of {len(fresh)} spans: {exc}") from exc
        new = len(fresh) - result.duplicates - len(result.dropped)
        return new, len(spans) - new - len(result.dropped), result.dropped

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
