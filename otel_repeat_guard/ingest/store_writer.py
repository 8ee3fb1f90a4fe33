"""Writing ingested spans into the store through its own exporter, once each.

Rows are made by :class:`~otel_repeat_guard.store.SQLiteSpanExporter` itself, so an
ingested span and an exported span give identical rows. A span is stored once: the schema
holds a unique key on (trace id, span id) and the exporter inserts OR IGNORE, so two ingests
of one file at once (an overlapping cron job, a restarted ``--follow``) insert nothing twice.
Before a batch goes to the exporter, spans already stored and repeats within the batch are
left out, which only saves work and counts them. What a batch added is counted from the
store itself, before and after. A span the store cannot hold is dropped alone and reported
with its trace and span id, like a bad line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.store import SQLiteSpanExporter, StoreError
from otel_repeat_guard.store.store_file import WritingConnection

_LOOKUP_BATCH = 400  # pairs per query: well under SQLite's bound-parameter limit


class StoreWriteError(StoreError):
    """The store refused a batch (disk full, locked beyond the retries, ...)."""


@dataclass(frozen=True, slots=True)
class WriteCounts:
    """What one batch did, span by span: ``new`` spans have a row now that they had not before; ``duplicate``
    ones were stored already (or came twice in the batch); ``unstored`` ones hold nothing the store keeps
    (no tool call, model call or agent run); ``dropped`` lists the rows the store could not hold."""

    new: int
    duplicate: int
    unstored: int
    dropped: list[str]


class StoreWriter:
    """Sends spans to the store's exporter, skipping those the store already holds."""

    def __init__(self, path: str | Path, *, config: GuardConfig | None = None, store_arguments: bool = True) -> None:
        self.path = Path(path)
        self._exporter = SQLiteSpanExporter(self.path, config=config, store_arguments=store_arguments)
        self._conn = WritingConnection(self.path)  # lookups follow the file if it is deleted or replaced

    def write(self, spans: Sequence[ReadableSpan]) -> WriteCounts:
        """Store the spans not stored yet, and count what that added.

        A span counts as new only if the store holds a row for it afterwards that it did not hold
        before, so a span with nothing to store is never "new", and a run again over the same
        file says 0 new. (A span another writer stores at the same moment counts as new here.)"""
        keyed: dict[tuple[str, str], ReadableSpan] = {}
        for span in spans:
            context = span.context
            if context is not None:
                keyed.setdefault((format_trace_id(context.trace_id), format_span_id(context.span_id)), span)
        repeats = len(spans) - len(keyed)
        stored = self._stored(list(keyed))
        fresh = {key: span for key, span in keyed.items() if key not in stored}
        if not fresh:
            return WriteCounts(0, len(stored) + repeats, 0, [])
        try:
            result = self._exporter.write(list(fresh.values()))
        except Exception as exc:  # the store itself refused (locked beyond the retries, disk full)
            raise StoreWriteError(f"the store {self.path} refused a batch of {len(fresh)} spans: {exc}") from exc
        new = len(self._stored(list(fresh)))
        unstored = max(0, len(fresh) - new - len(result.dropped))
        return WriteCounts(new, len(stored) + repeats, unstored, result.dropped)

    def _stored(self, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these spans the store holds a row for: a tool call, a model call, an agent run, or
        a call the guard counted from the span's model request (keyed ``<span id>/<index>``)."""
        found: set[tuple[str, str]] = set()
        for start in range(0, len(keys), _LOOKUP_BATCH):
            batch = keys[start : start + _LOOKUP_BATCH]
            values = ",".join("(?, ?)" for _ in batch)
            params = [part for key in batch for part in key]
            queries = [
                f"SELECT trace_id, span_id FROM {table} WHERE (trace_id, span_id) IN (VALUES {values})"
                for table in ("tool_calls", "model_calls", "agent_runs")
            ]
            queries.append(  # a range on the unique (trace_id, span_id) index: '/' sorts just before '0'
                f"SELECT v.column1, v.column2 FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM tool_calls c"
                " WHERE c.trace_id = v.column1 AND c.span_id > v.column2 || '/' AND c.span_id < v.column2 || '0')"
            )
            for query in queries:
                try:
                    rows = self._conn.current().execute(query, params).fetchall()
                except sqlite3.OperationalError as exc:
                    raise StoreWriteError(f"cannot read the store {self.path}: {exc}") from exc
                found.update((str(trace), str(span)) for trace, span in rows)
        return found

    def close(self) -> None:
        self._exporter.shutdown()
        self._conn.close()
