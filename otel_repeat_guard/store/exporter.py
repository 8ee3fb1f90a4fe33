"""``SQLiteSpanExporter``: an OTel span exporter that keeps every recognized tool call in SQLite."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention, SpanRouter, tool_call_reader
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.inputs import checked_flag
from otel_repeat_guard.store import missing_facts
from otel_repeat_guard.store.batch import Batch, write_batch
from otel_repeat_guard.store.origin import written_by_another
from otel_repeat_guard.store.records import (
    agent_run_row,
    model_call_row,
    tool_call_row,
)
from otel_repeat_guard.store.requested_rows import LateDetections, requested_call_rows
from otel_repeat_guard.store.schema import default_db_path
from otel_repeat_guard.store.store_file import WritingConnection

logger = logging.getLogger("otel_repeat_guard")

_LOCK_RETRIES = 5


class _Busy(sqlite3.OperationalError):
    """The store stayed locked through every retry: the batch is not the problem, nothing is dropped."""


@dataclass
class WriteResult:
    """What one write did: spans stored, spans the store held already, and dropped spans (trace/span: why)."""

    stored: int = 0
    duplicates: int = 0
    dropped: list[str] = field(default_factory=list)


def _span_ids(span: ReadableSpan) -> str:
    context = span.context
    if context is None:
        return "(no context)"
    return f"{format_trace_id(context.trace_id)}/{format_span_id(context.span_id)}"


class SQLiteSpanExporter(SpanExporter):
    """Writes the tool calls and model calls among exported spans to a SQLite file; use it behind a
    ``BatchSpanProcessor``.

    ``config`` should be the guard's config: its include/exclude decide which calls count
    as tracked (the denominator of the wasted-call share) and ``arguments_preview_chars``
    bounds the stored argument text and model-output previews. With ``store_arguments=False``
    no argument or model-output text is written at all, only digests and counts: both can hold
    secrets. Several processes may write to one file at once (WAL mode, one short transaction
    per batch).
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
        self._store = WritingConnection(self.path)  # opened again if the file is deleted or replaced
        self._lock = threading.Lock()
        self._closed = False
        self._conventions = tuple(conventions)
        self._read_tool_call = tool_call_reader(self._conventions)
        self._router = SpanRouter(self._conventions)
        self._tracked = ToolFilter(config.include, config.exclude)
        self._store_arguments = checked_flag("store_arguments", store_arguments)  # "false" is no False
        self._preview_chars = config.arguments_preview_chars
        self._late = LateDetections()  # detections of request-counted calls that came before their rows
        self.dropped_spans = 0
        """Spans dropped because the store could not hold them, since this exporter was made."""
        self.unwritten_spans = 0
        """Spans of exports that failed: the store refused them, or its file was gone and could not be made."""
        self.facts_missing = False
        """Whether this exporter stored spans from a guard that records no facts (said once, in the log and the store)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            self.write(spans)
        except Exception:
            self.unwritten_spans += len(spans)
            logger.exception("SQLiteSpanExporter could not write %d spans to %s", len(spans), self.path)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def write(self, spans: Sequence[ReadableSpan]) -> WriteResult:
        """Store ``spans``; what was stored, already there, and dropped.

        One odd span never costs the batch: a value SQLite cannot hold is stored in its
        documented form (:func:`~otel_repeat_guard.store.records.storable`), and a span that
        still cannot be stored is dropped alone, logged with its trace and span id. Raises only
        when the store itself refuses (locked beyond the retries, disk full).
        """
        result = WriteResult()
        batch = self._rows(spans, result)
        if batch:
            self._write(batch, result)
        if batch.facts_missing and not self.facts_missing:
            self.facts_missing = True
            logger.warning("store %s: it got %s. To fix it, %s", self.path, missing_facts.WHAT, missing_facts.FIX)
        self.dropped_spans += len(result.dropped)
        return result

    def shutdown(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    @property
    def reopened(self) -> int:
        """Times the store file was deleted or replaced while in use and a store was opened at its path again."""
        return self._store.reopened

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export commits before it returns

    def _rows(self, spans: Sequence[ReadableSpan], result: WriteResult) -> Batch:
        batch = Batch()
        for span in spans:
            try:
                call = tool_call_row(
                    span,
                    self._read_tool_call,
                    self._tracked,
                    store_arguments=self._store_arguments,
                    preview_chars=self._preview_chars,
                )
                if call is not None:
                    batch.calls.append(call)
                    batch.facts_missing = batch.facts_missing or (
                        not self.facts_missing and missing_facts.lacks_facts(call)
                    )
                    continue
                batch.calls.extend(requested_call_rows(span, self._tracked, self._late))
                model = model_call_row(
                    span, self._router, store_outputs=self._store_arguments, preview_chars=self._preview_chars
                )
                if model is not None:
                    batch.models.append(model)
                    continue
                run = agent_run_row(span, self._conventions)
                if run is not None:
                    batch.runs.append(run)
            except Exception as exc:  # one odd span: dropped alone
                self._drop(result, _span_ids(span), exc)
        return batch

    def _write(self, batch: Batch, result: WriteResult) -> None:
        try:
            self._retrying(batch, result)
        except sqlite3.OperationalError:  # the store itself (read-only, disk full, locked): no span is to blame
            raise
        except Exception:  # some row SQLite refuses: store the batch row by row, dropping only what fails
            for call in batch.calls:
                self._alone(result, Batch(calls=[call]), f"{call.trace_id}/{call.span_id}")
            for model in batch.models:
                self._alone(result, Batch(models=[model]), f"{model.trace_id}/{model.span_id}")
            for run in batch.runs:
                self._alone(result, Batch(runs=[run]), f"{run.trace_id}/{run.span_id}")

    def _alone(self, result: WriteResult, batch: Batch, ids: str) -> None:
        try:
            self._retrying(batch, result)
        except sqlite3.OperationalError:
            raise
        except Exception as exc:
            self._drop(result, ids, exc)

    def _drop(self, result: WriteResult, ids: str, exc: Exception) -> None:
        result.dropped.append(f"{ids}: {type(exc).__name__}: {exc}")
        logger.warning("store %s dropped span %s, which it cannot hold: %s", self.path, ids, exc)

    def _retrying(self, batch: Batch, result: WriteResult) -> None:
        for attempt in range(_LOCK_RETRIES):
            try:
                with self._lock:
                    stored, duplicates = self._transaction(batch)
                result.stored += stored
                result.duplicates += duplicates
                return
            except sqlite3.OperationalError as exc:  # busy beyond the timeout: try again, never drop
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                logger.warning("store %s is busy (attempt %d of %d)", self.path, attempt + 1, _LOCK_RETRIES)
                time.sleep(0.1 * (attempt + 1))
        raise _Busy(f"store {self.path} stayed locked through {_LOCK_RETRIES} attempts")

    def _claim(self, conn: sqlite3.Connection) -> None:
        """In each write: these are not the demo's calls, so a later demo run refuses to empty the store."""
        written_by_another(conn)

    def _transaction(self, batch: Batch) -> tuple[int, int]:
        """Write in one transaction; returns the calls stored and those already in the store."""
        return write_batch(self._store.current(), batch, self._claim)  # never the unlinked or replaced file
