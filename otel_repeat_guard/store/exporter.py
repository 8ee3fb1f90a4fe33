"""``SQLiteSpanExporter``: an OTel span exporter that keeps every recognized tool call in SQLite."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention
from otel_repeat_guard.patterns import ToolFilter
from otel_repeat_guard.store.records import AgentRunRow, ToolCallRow, agent_run_row, tool_call_row
from otel_repeat_guard.store.schema import default_db_path, open_for_writing

logger = logging.getLogger("otel_repeat_guard")

_INSERT_CALL = """
INSERT INTO tool_calls (
    start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id,
    agent_key, agent_name, agent_known, agent_pending, tool_name, tracked, arguments_digest,
    error, run_length, reminder_tier, reminder_threshold
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_INSERT_ARGUMENTS = "INSERT INTO tool_call_arguments (call_id, preview) VALUES (?, ?)"
_INSERT_RUN = "INSERT OR REPLACE INTO agent_runs (trace_id, span_id, agent_key, agent_name) VALUES (?, ?, ?, ?)"
# Calls made directly under an agent-run span take its key (if theirs was provisional) and name.
_RESOLVE_PENDING = """
UPDATE tool_calls
SET agent_key = CASE WHEN agent_known THEN agent_key ELSE :key END,
    agent_name = COALESCE(agent_name, :name),
    agent_known = 1,
    agent_pending = 0
WHERE trace_id = :trace_id AND parent_span_id = :span_id AND agent_pending = 1
"""
_INSERT_DIMENSION = "INSERT OR IGNORE INTO dimensions (kind, value) VALUES (?, ?)"
_LOCK_RETRIES = 5


class SQLiteSpanExporter(SpanExporter):
    """Writes the tool calls among exported spans to a SQLite file; use it behind a ``BatchSpanProcessor``.

    ``config`` should be the guard's config: its include/exclude decide which calls count
    as tracked (the denominator of the wasted-call share) and ``arguments_preview_chars``
    bounds the stored argument text. With ``store_arguments=False`` no argument text is
    written at all, only digests: tool arguments can hold secrets. Several processes may
    write to one file at once (WAL mode, one short transaction per batch).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: GuardConfig | None = None,
        store_arguments: bool = True,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
    ) -> None:
        config = GuardConfig() if config is None else config
        self.path = default_db_path() if path is None else Path(path)
        self._conn = open_for_writing(self.path)
        self._lock = threading.Lock()
        self._closed = False
        self._conventions = tuple(conventions)
        self._tracked = ToolFilter(config.include, config.exclude)
        self._store_arguments = bool(store_arguments)
        self._preview_chars = config.arguments_preview_chars

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            calls, runs = self._rows(spans)
            if calls or runs:
                self._write(calls, runs)
        except Exception:
            logger.exception("SQLiteSpanExporter could not write %d spans to %s", len(spans), self.path)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export commits before it returns

    def _rows(self, spans: Sequence[ReadableSpan]) -> tuple[list[ToolCallRow], list[AgentRunRow]]:
        calls: list[ToolCallRow] = []
        runs: list[AgentRunRow] = []
        for span in spans:
            call = tool_call_row(
                span,
                self._conventions,
                self._tracked,
                store_arguments=self._store_arguments,
                preview_chars=self._preview_chars,
            )
            if call is not None:
                calls.append(call)
                continue
            run = agent_run_row(span, self._conventions)
            if run is not None:
                runs.append(run)
        return calls, runs

    def _write(self, calls: list[ToolCallRow], runs: list[AgentRunRow]) -> None:
        for attempt in range(_LOCK_RETRIES):
            try:
                with self._lock:
                    self._transaction(calls, runs)
                return
            except sqlite3.OperationalError as exc:  # busy beyond the timeout: try again, never drop
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                logger.warning("store %s is busy (attempt %d of %d)", self.path, attempt + 1, _LOCK_RETRIES)
                time.sleep(0.1 * (attempt + 1))
        raise sqlite3.OperationalError(f"store {self.path} stayed locked through {_LOCK_RETRIES} attempts")

    def _transaction(self, calls: list[ToolCallRow], runs: list[AgentRunRow]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            dimensions: set[tuple[str, str]] = set()
            for call in calls:
                agent = self._insert_call(conn, call)
                dimensions.update((("service", call.service_name), ("tool", call.tool_name)))
                if agent is not None:
                    dimensions.add(("agent", agent))
            for run in runs:
                conn.execute(_INSERT_RUN, (run.trace_id, run.span_id, run.agent_key, run.agent_name))
                resolved = conn.execute(
                    _RESOLVE_PENDING,
                    {"key": run.agent_key, "name": run.agent_name, "trace_id": run.trace_id, "span_id": run.span_id},
                ).rowcount
                if resolved:
                    dimensions.add(("agent", run.agent_name or run.agent_key))
            conn.executemany(_INSERT_DIMENSION, sorted(dimensions))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _insert_call(self, conn: sqlite3.Connection, call: ToolCallRow) -> str | None:
        """Insert one call; returns its agent's label for the filter lists, unless still provisional."""
        key, name, known, pending = call.agent_key, call.agent_name, call.agent_known, call.agent_pending
        if pending:  # the agent-run span was exported first (unusual, but possible)
            found = conn.execute(
                "SELECT agent_key, agent_name FROM agent_runs WHERE trace_id = ? AND span_id = ?",
                (call.trace_id, call.parent_span_id),
            ).fetchone()
            if found is not None:
                key = key if known else str(found[0])
                name = name if name is not None else found[1]
                known, pending = True, False
        cursor = conn.execute(
            _INSERT_CALL,
            (
                call.start_ns,
                call.end_ns,
                call.duration_ns,
                call.service_name,
                call.trace_id,
                call.span_id,
                call.parent_span_id,
                key,
                name,
                known,
                pending,
                call.tool_name,
                call.tracked,
                call.arguments_digest,
                call.error,
                call.run_length,
                call.reminder_tier,
                call.reminder_threshold,
            ),
        )
        if call.arguments_preview is not None:
            conn.execute(_INSERT_ARGUMENTS, (cursor.lastrowid, call.arguments_preview))
        if pending and not known:
            return None  # labelled when its agent-run span arrives
        return name or key
