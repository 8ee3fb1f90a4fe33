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

from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention, SpanRouter, tool_call_reader
from otel_repeat_guard.patterns import ToolFilter
from otel_repeat_guard.store.records import (
    AgentRunRow,
    CallRow,
    ModelCallRow,
    ToolCallRow,
    agent_run_row,
    model_call_row,
    requested_call_rows,
    tool_call_row,
)
from otel_repeat_guard.store.schema import (
    ROLLUP_BUCKET_NS,
    SMALL_INPUT_TOKENS,
    default_db_path,
    open_for_writing,
)
from otel_repeat_guard.store.storable import storable_int

logger = logging.getLogger("otel_repeat_guard")

_INSERT_CALL = """
INSERT OR IGNORE INTO tool_calls (
    start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id,
    agent_key, agent_name, agent_known, agent_pending, tool_name, tracked, arguments_digest,
    error, run_length, reminder_tier, reminder_threshold, unguarded_reason
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_INSERT_ARGUMENTS = "INSERT INTO tool_call_arguments (call_id, preview) VALUES (?, ?)"
_INSERT_DETECTION = """
INSERT INTO detections (
    call_id, kind, end_ns, run_length, period, repetitions, cycle_tools, outcome_digest,
    reminder_tier, reminder_threshold
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_INSERT_MODEL_CALL = """
INSERT OR IGNORE INTO model_calls (
    start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id,
    agent_key, agent_name, agent_known, agent_pending, model, provider,
    input_tokens, output_tokens, total_tokens, conversation_id, error
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_INSERT_OUTPUT = "INSERT INTO model_call_outputs (call_id, preview) VALUES (?, ?)"
# Model calls made directly under an agent-run span take its key and name, as tool calls do.
_RESOLVE_PENDING_MODELS = """
UPDATE model_calls
SET agent_key = CASE WHEN agent_known THEN agent_key ELSE :key END,
    agent_name = COALESCE(agent_name, :name),
    agent_known = 1,
    agent_pending = 0
WHERE trace_id = :trace_id AND parent_span_id = :span_id AND agent_pending = 1
"""
# An agent label no call carries any more (a run key its run span has since named) leaves the filter list.
_DROP_UNUSED_AGENT = """
DELETE FROM dimensions WHERE kind = 'agent' AND value = ?
  AND NOT EXISTS (SELECT 1 FROM call_rollup WHERE agent = ?)
"""
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
# The pending calls a run span is about to resolve, as the roll-up sees them.
_PENDING_UNDER = """
SELECT end_ns, service_name, agent_key, agent_name, agent_known, tool_name, tracked, run_length,
       reminder_tier, duration_ns
FROM tool_calls WHERE trace_id = ? AND parent_span_id = ? AND agent_pending = 1
"""
_ADD_ROLLUP = """
INSERT INTO call_rollup (
    bucket_ns, service_name, agent, tool_name, tracked,
    calls, repeated_calls, gentle_reminders, detailed_reminders, longest_run, repeated_ns
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (bucket_ns, service_name, agent, tool_name, tracked) DO UPDATE SET
    calls = calls + excluded.calls,
    repeated_calls = repeated_calls + excluded.repeated_calls,
    gentle_reminders = gentle_reminders + excluded.gentle_reminders,
    detailed_reminders = detailed_reminders + excluded.detailed_reminders,
    longest_run = MAX(longest_run, excluded.longest_run),
    repeated_ns = repeated_ns + excluded.repeated_ns
"""
_SUBTRACT_ROLLUP = """
UPDATE call_rollup SET
    calls = calls - ?, repeated_calls = repeated_calls - ?, gentle_reminders = gentle_reminders - ?,
    detailed_reminders = detailed_reminders - ?, repeated_ns = repeated_ns - ?
WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND tool_name = ? AND tracked = ?
RETURNING calls, longest_run
"""
_DROP_EMPTY_ROLLUP = """
DELETE FROM call_rollup WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND tool_name = ? AND tracked = ?
"""
# The longest run left in a group that lost calls to another agent label (rare: only when
# the group still holds calls and lost its longest); reads one day of calls by time.
_RECOUNT_LONGEST = """
UPDATE call_rollup SET longest_run = (
    SELECT COALESCE(MAX(run_length), 0) FROM tool_calls
    WHERE end_ns >= :bucket AND end_ns < :bucket + :width AND service_name = :service
      AND COALESCE(agent_name, agent_key) = :agent AND tool_name = :tool AND tracked = :tracked
)
WHERE bucket_ns = :bucket AND service_name = :service AND agent = :agent AND tool_name = :tool AND tracked = :tracked
"""
_LOCK_RETRIES = 5
_ADD_MODEL_ROLLUP = """
INSERT INTO model_rollup (
    bucket_ns, service_name, agent, model, provider, wasted_tool,
    calls, input_tokens, output_tokens, total_tokens, unsplit_calls
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (bucket_ns, service_name, agent, model, provider, wasted_tool) DO UPDATE SET
    calls = calls + excluded.calls,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    total_tokens = total_tokens + excluded.total_tokens,
    unsplit_calls = unsplit_calls + excluded.unsplit_calls
"""
_DROP_EMPTY_MODEL_ROLLUP = """
DELETE FROM model_rollup WHERE bucket_ns = ? AND service_name = ? AND agent = ? AND model = ? AND provider = ?
  AND wasted_tool = ? AND calls <= 0
"""
_MODEL_FIGURES = (
    "id, end_ns, service_name, agent_key, agent_name, agent_known, agent_pending, model, provider,"
    " input_tokens, output_tokens, total_tokens, wasted_tool"
)
# A repeated call's issuer: the latest model call under the same parent span that started before it ended ...
_ISSUER_BY_PARENT = f"""
SELECT {_MODEL_FIGURES} FROM model_calls
WHERE trace_id = ? AND parent_span_id = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1
"""
# ... else the latest model call of its agent run (tool spans nested below the run's model calls' parent).
_ISSUER_BY_AGENT = f"""
SELECT {_MODEL_FIGURES} FROM model_calls
WHERE agent_key = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1
"""
_ISSUER_BY_ID = f"SELECT {_MODEL_FIGURES} FROM model_calls WHERE trace_id = ? AND span_id = ?"
_PENDING_MODELS_UNDER = f"""
SELECT {_MODEL_FIGURES} FROM model_calls WHERE trace_id = ? AND parent_span_id = ? AND agent_pending = 1
"""


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


def _call_columns(row: CallRow, key: str, name: str | None, known: bool, pending: bool) -> tuple[object, ...]:
    """The columns ``tool_calls`` and ``model_calls`` both start with, in order: when, where, and the agent
    (as :meth:`SQLiteSpanExporter._agent_of` completed it)."""
    return (
        row.start_ns,
        row.end_ns,
        row.duration_ns,
        row.service_name,
        row.trace_id,
        row.span_id,
        row.parent_span_id,
        key,
        name,
        known,
        pending,
    )


def _label(name: str | None, key: str) -> str:
    """The agent label the dashboard shows: ``COALESCE(agent_name, agent_key)``."""
    return name if name is not None else key


RollupKey = tuple[int, str, str, str, bool]  # bucket_ns, service, agent label, tool, tracked


class _Rollup:
    """Per-group figures of some calls: added to (or taken from) ``call_rollup`` in one statement each."""

    def __init__(self) -> None:
        # calls, repeated calls, gentle, detailed, longest run, repeated ns
        self.groups: dict[RollupKey, list[int]] = {}

    def add(
        self,
        end_ns: int,
        service: str,
        agent: str,
        tool: str,
        tracked: bool,
        run_length: int | None,
        tier: str | None,
        duration_ns: int,
    ) -> None:
        key = (end_ns - end_ns % ROLLUP_BUCKET_NS, service, agent, tool, bool(tracked))
        figures = self.groups.setdefault(key, [0, 0, 0, 0, 0, 0])
        repeated = run_length is not None and run_length >= 2
        figures[0] += 1
        figures[1] += repeated
        figures[2] += tier == "gentle"
        figures[3] += tier == "detailed"
        figures[4] = max(figures[4], run_length or 0)
        figures[5] = storable_int(figures[5] + duration_ns) if repeated else figures[5]  # a wrong-unit end: clamped

    def labels(self) -> set[str]:
        """The agent labels of these figures."""
        return {key[2] for key in self.groups}

    def apply(self, conn: sqlite3.Connection) -> None:
        conn.executemany(_ADD_ROLLUP, [(*key, *figures) for key, figures in sorted(self.groups.items())])

    def take_from(self, conn: sqlite3.Connection) -> None:
        """Subtract these calls from their groups (after they moved to another agent label)."""
        for key, (calls, repeated, gentle, detailed, longest, repeated_ns) in sorted(self.groups.items()):
            left = conn.execute(_SUBTRACT_ROLLUP, (calls, repeated, gentle, detailed, repeated_ns, *key)).fetchone()
            if left is None:  # pragma: no cover - every stored call is in the roll-up
                continue
            if left[0] <= 0:
                conn.execute(_DROP_EMPTY_ROLLUP, key)
            elif longest >= left[1]:
                bucket, service, agent, tool, tracked = key
                conn.execute(
                    _RECOUNT_LONGEST,
                    {
                        "bucket": bucket,
                        "width": ROLLUP_BUCKET_NS,
                        "service": service,
                        "agent": agent,
                        "tool": tool,
                        "tracked": tracked,
                    },
                )


@dataclass
class _Batch:
    """The rows of one export: tool calls, model calls and agent-run spans."""

    calls: list[ToolCallRow] = field(default_factory=list)
    models: list[ModelCallRow] = field(default_factory=list)
    runs: list[AgentRunRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.calls or self.models or self.runs)


ModelRollupKey = tuple[int, str, str, str, str, str]  # bucket_ns, service, agent label, model, provider, wasted tool


class _ModelRollup:
    """Token sums of some model calls, added to (or, with ``sign=-1``, taken from) ``model_rollup``."""

    def __init__(self) -> None:
        self.groups: dict[ModelRollupKey, list[int]] = {}  # calls, input, output, total, unsplit

    def add(self, row: tuple[object, ...], agent: str, wasted_tool: str | None, sign: int = 1) -> None:
        """Add (or take) one model call, given as the columns of ``_MODEL_FIGURES``."""
        _, end_ns, service, _, _, _, _, model, provider, tokens_in, tokens_out, total, _ = row
        end = int(end_ns)  # type: ignore[call-overload]
        key = (
            end - end % ROLLUP_BUCKET_NS,
            str(service),
            agent,
            str(model or ""),
            str(provider or ""),
            wasted_tool or "",
        )
        figures = self.groups.setdefault(key, [0, 0, 0, 0, 0])
        known_in = tokens_in if isinstance(tokens_in, int) else None
        known_out = tokens_out if isinstance(tokens_out, int) else None
        figures[0] += sign
        figures[1] += sign * (known_in or 0)
        figures[2] += sign * (known_out or 0)
        figures[3] += sign * (total if isinstance(total, int) else (known_in or 0) + (known_out or 0))
        figures[4] += sign * (known_in is None or known_out is None)

    def apply(self, conn: sqlite3.Connection) -> None:
        rows = [(*key, *figures) for key, figures in sorted(self.groups.items()) if any(figures)]
        conn.executemany(_ADD_MODEL_ROLLUP, rows)
        conn.executemany(
            _DROP_EMPTY_MODEL_ROLLUP, [key for key, figures in sorted(self.groups.items()) if figures[0] < 0]
        )


def _rolled_up(pending: object, tokens_in: object) -> bool:
    """Whether ``model_rollup`` holds a model call (schema.ROLLED_UP_MODEL_CALL)."""
    return not pending and (tokens_in if isinstance(tokens_in, int) else 0) <= SMALL_INPUT_TOKENS


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
        self._conn = open_for_writing(self.path)
        self._lock = threading.Lock()
        self._closed = False
        self._conventions = tuple(conventions)
        self._read_tool_call = tool_call_reader(self._conventions)
        self._router = SpanRouter(self._conventions)
        self._tracked = ToolFilter(config.include, config.exclude)
        self._store_arguments = bool(store_arguments)
        self._preview_chars = config.arguments_preview_chars
        self.dropped_spans = 0
        """Spans dropped because the store could not hold them, since this exporter was made."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            self.write(spans)
        except Exception:
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
        self.dropped_spans += len(result.dropped)
        return result

    def shutdown(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export commits before it returns

    def _rows(self, spans: Sequence[ReadableSpan], result: WriteResult) -> _Batch:
        batch = _Batch()
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
                    continue
                batch.calls.extend(requested_call_rows(span, self._tracked))
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

    def _write(self, batch: _Batch, result: WriteResult) -> None:
        try:
            self._retrying(batch, result)
        except sqlite3.OperationalError:  # the store itself (read-only, disk full, locked): no span is to blame
            raise
        except Exception:  # some row SQLite refuses: store the batch row by row, dropping only what fails
            for call in batch.calls:
                self._alone(result, _Batch(calls=[call]), f"{call.trace_id}/{call.span_id}")
            for model in batch.models:
                self._alone(result, _Batch(models=[model]), f"{model.trace_id}/{model.span_id}")
            for run in batch.runs:
                self._alone(result, _Batch(runs=[run]), f"{run.trace_id}/{run.span_id}")

    def _alone(self, result: WriteResult, batch: _Batch, ids: str) -> None:
        try:
            self._retrying(batch, result)
        except sqlite3.OperationalError:
            raise
        except Exception as exc:
            self._drop(result, ids, exc)

    def _drop(self, result: WriteResult, ids: str, exc: Exception) -> None:
        result.dropped.append(f"{ids}: {type(exc).__name__}: {exc}")
        logger.warning("store %s dropped span %s, which it cannot hold: %s", self.path, ids, exc)

    def _retrying(self, batch: _Batch, result: WriteResult) -> None:
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

    def _transaction(self, batch: _Batch) -> tuple[int, int]:
        """Write in one transaction; returns the calls stored and those already in the store."""
        conn = self._conn
        calls, runs = batch.calls, batch.runs
        conn.execute("BEGIN IMMEDIATE")
        try:
            dimensions: set[tuple[str, str]] = set()
            rollup = _Rollup()
            runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None] = {}
            duplicates = 0
            models = _ModelRollup()
            for model in batch.models:
                if not self._insert_model(conn, model, runs_seen, models):
                    duplicates += 1
            for call in calls:
                inserted = self._insert_call(conn, call, runs_seen)
                if inserted is None:  # this span is stored already (another exporter, an ingest)
                    duplicates += 1
                    continue
                label, agent = inserted
                if call.charges_issuer or (call.in_loop and not call.decided):
                    self._link_issuer(conn, call, models)
                rollup.add(
                    call.end_ns,
                    call.service_name,
                    label,
                    call.tool_name,
                    call.tracked,
                    call.run_length,
                    call.reminder_tier,
                    call.duration_ns,
                )
                dimensions.update((("service", call.service_name), ("tool", call.tool_name)))
                dimensions.update(("loop_kind", detection.kind) for detection in call.detections)
                if agent is not None:
                    dimensions.add(("agent", agent))
            rollup.apply(conn)  # before any run below moves some of these calls to another label
            for run in runs:
                conn.execute(_INSERT_RUN, (run.trace_id, run.span_id, run.agent_key, run.agent_name))
                old, new = self._relabelled(conn, run)
                resolved = conn.execute(
                    _RESOLVE_PENDING,
                    {"key": run.agent_key, "name": run.agent_name, "trace_id": run.trace_id, "span_id": run.span_id},
                ).rowcount
                new.apply(conn)
                old.take_from(conn)
                pending_models = conn.execute(_PENDING_MODELS_UNDER, (run.trace_id, run.span_id)).fetchall()
                conn.execute(
                    _RESOLVE_PENDING_MODELS,
                    {"key": run.agent_key, "name": run.agent_name, "trace_id": run.trace_id, "span_id": run.span_id},
                )
                for row in pending_models:  # now final: into the roll-up under the run's label
                    key, name, known, tokens_in, wasted = row[3], row[4], row[5], row[9], row[12]
                    if _rolled_up(False, tokens_in):
                        label = _label(name if name is not None else run.agent_name, key if known else run.agent_key)
                        models.add(row, label, wasted)
                if resolved:
                    dimensions.add(("agent", run.agent_name or run.agent_key))
                for label in old.labels() - new.labels():  # e.g. `coder#32845f6266c53a36`, now `coder`
                    dimensions.discard(("agent", label))
                    conn.execute(_DROP_UNUSED_AGENT, (label, label))
            models.apply(conn)
            conn.executemany(_INSERT_DIMENSION, sorted(dimensions))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        total = len(calls) + len(batch.models)
        return total - duplicates, duplicates

    @staticmethod
    def _relabelled(conn: sqlite3.Connection, run: AgentRunRow) -> tuple[_Rollup, _Rollup]:
        """The calls ``run`` is about to resolve (see _RESOLVE_PENDING) whose agent label changes.

        Returns them grouped under their old labels and under their new ones; read before the
        UPDATE, applied after it (so a recount of an old group no longer sees them).
        """
        old, new = _Rollup(), _Rollup()
        for end_ns, service, key, name, known, tool, tracked, run_length, tier, duration_ns in conn.execute(
            _PENDING_UNDER, (run.trace_id, run.span_id)
        ):
            before = _label(name, key)
            after = _label(name if name is not None else run.agent_name, key if known else run.agent_key)
            if after != before:
                figures = (end_ns, service, tool, bool(tracked), run_length, tier, duration_ns)
                old.add(figures[0], service, before, *figures[2:])
                new.add(figures[0], service, after, *figures[2:])
        return old, new

    @staticmethod
    def _link_issuer(conn: sqlite3.Connection, call: ToolCallRow, models: _ModelRollup) -> None:
        """Mark the model call that issued ``call`` (a repeated call, or one in a detected cycle or no-progress
        run: :attr:`ToolCallRow.in_loop`) as wasted, under the first such call's tool."""
        issuer = None
        if call.decided:  # the guard named the model call it charged
            issuer = conn.execute(_ISSUER_BY_ID, (call.trace_id, call.issuer_span_id)).fetchone()
        elif call.parent_span_id is not None:
            issuer = conn.execute(_ISSUER_BY_PARENT, (call.trace_id, call.parent_span_id, call.end_ns)).fetchone()
        if issuer is None and call.agent_known and not call.decided:
            issuer = conn.execute(_ISSUER_BY_AGENT, (call.agent_key, call.end_ns)).fetchone()
        if issuer is None or issuer[12] is not None:  # none found, or it issued an earlier repeat already
            return
        conn.execute("UPDATE model_calls SET wasted_tool = ? WHERE id = ?", (call.tool_name, issuer[0]))
        if _rolled_up(issuer[6], issuer[9]):
            label = _label(issuer[4], issuer[3])
            models.add(issuer, label, None, sign=-1)
            models.add(issuer, label, call.tool_name)

    def _insert_model(
        self,
        conn: sqlite3.Connection,
        model: ModelCallRow,
        runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
        models: _ModelRollup,
    ) -> bool:
        """Insert one model call (its agent from an already exported run span if it has one); False when
        the store holds the span already."""
        key, name, known, pending = self._agent_of(conn, model, runs_seen)
        cursor = conn.execute(
            _INSERT_MODEL_CALL,
            (
                *_call_columns(model, key, name, known, pending),
                model.model,
                model.provider,
                model.input_tokens,
                model.output_tokens,
                model.total_tokens,
                model.conversation_id,
                model.error,
            ),
        )
        if cursor.rowcount == 0:
            return False
        if model.output_preview is not None:
            conn.execute(_INSERT_OUTPUT, (cursor.lastrowid, model.output_preview))
        if _rolled_up(pending, model.input_tokens):
            figures = (
                cursor.lastrowid,
                model.end_ns,
                model.service_name,
                key,
                name,
                known,
                pending,
                model.model,
                model.provider,
                model.input_tokens,
                model.output_tokens,
                model.total_tokens,
                None,
            )
            models.add(figures, _label(name, key), None)
        return True

    def _agent_of(
        self,
        conn: sqlite3.Connection,
        row: CallRow,
        runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
    ) -> tuple[str, str | None, bool, bool]:
        """A call's agent key, name, known and pending flags: its own, completed from its agent-run span
        when that was exported first (unusual, but possible)."""
        key, name, known, pending = row.agent_key, row.agent_name, row.agent_known, row.agent_pending
        if pending:
            found = self._run_of_parent(conn, row.trace_id, row.parent_span_id, runs_seen)
            if found is not None:
                key = key if known else str(found[0])
                name = name if name is not None else found[1]
                known, pending = True, False
        return key, name, known, pending

    @staticmethod
    def _run_of_parent(
        conn: sqlite3.Connection,
        trace_id: str,
        parent_span_id: str | None,
        runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
    ) -> tuple[str, str | None] | None:
        """The agent key and name of the run span ``parent_span_id``, if it was exported already."""
        parent = (trace_id, parent_span_id)
        if parent not in runs_seen:
            runs_seen[parent] = conn.execute(
                "SELECT agent_key, agent_name FROM agent_runs WHERE trace_id = ? AND span_id = ?", parent
            ).fetchone()
        return runs_seen[parent]

    def _insert_call(
        self,
        conn: sqlite3.Connection,
        call: ToolCallRow,
        runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
    ) -> tuple[str, str | None] | None:
        """Insert one call; returns its agent label and the label for the filter lists (None while
        provisional), or None when the store holds the span already.

        ``runs_seen`` remembers, for this batch, which parents are known agent runs: a batch's
        first calls mostly share a few parents, so each is looked up once, not once per call.
        """
        key, name, known, pending = self._agent_of(conn, call, runs_seen)
        cursor = conn.execute(
            _INSERT_CALL,
            (
                *_call_columns(call, key, name, known, pending),
                call.tool_name,
                call.tracked,
                call.arguments_digest,
                call.error,
                call.run_length,
                call.reminder_tier,
                call.reminder_threshold,
                call.unguarded_reason,
            ),
        )
        if cursor.rowcount == 0:
            return None
        if call.arguments_preview is not None:
            conn.execute(_INSERT_ARGUMENTS, (cursor.lastrowid, call.arguments_preview))
        conn.executemany(
            _INSERT_DETECTION,
            [
                (
                    cursor.lastrowid,
                    d.kind,
                    call.end_ns,
                    d.run_length,
                    d.period,
                    d.repetitions,
                    d.cycle_tools,
                    d.outcome_digest,
                    d.reminder_tier,
                    d.reminder_threshold,
                )
                for d in call.detections
            ],
        )
        if pending and not known:
            return _label(name, key), None  # labelled when its agent-run span arrives
        return _label(name, key), name or key
