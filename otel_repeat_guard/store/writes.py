"""The store's writes in one transaction: a tool call, a model call, an agent run's label for the calls that
waited for it, the roll-ups they add to, and which model call issued a call."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from otel_repeat_guard.store.rollup import CallRollup, ModelFigures, ModelRollup, RolledCall, agent_label, rolled_up
from otel_repeat_guard.store.rows import CallRow, ToolCallRow
from otel_repeat_guard.store.sql import (
    INSERT_ARGUMENTS,
    INSERT_CALL,
    INSERT_DETECTION,
    INSERT_MODEL_CALL,
    INSERT_OUTPUT,
    INSERT_UNDELIVERED,
    ISSUER_BY_AGENT,
    ISSUER_BY_ID,
    ISSUER_BY_PARENT,
    PENDING_UNDER,
)

if TYPE_CHECKING:  # as in store.batch
    from otel_repeat_guard.store.model_rows import AgentRunRow, ModelCallRow


def call_columns(row: CallRow, key: str, name: str | None, known: bool, pending: bool) -> tuple[object, ...]:
    """The columns ``tool_calls`` and ``model_calls`` both start with, in order: when, where, and the agent
    (as :func:`agent_of` completed it)."""
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


def relabelled(conn: sqlite3.Connection, run: AgentRunRow) -> tuple[CallRollup, CallRollup]:
    """The calls ``run`` is about to resolve (see RESOLVE_PENDING) whose agent label changes.

    Returns them grouped under their old labels and under their new ones; read before the
    UPDATE, applied after it (so a recount of an old group no longer sees them).
    """
    old, new = CallRollup(), CallRollup()
    for end_ns, service, key, name, known, tool, tracked, run_length, tier, duration_ns in conn.execute(
        PENDING_UNDER, (run.trace_id, run.span_id)
    ):
        before = agent_label(name, key)
        after = agent_label(name if name is not None else run.agent_name, key if known else run.agent_key)
        if after != before:
            old.add(RolledCall(end_ns, service, before, tool, bool(tracked), run_length, tier, duration_ns))
            new.add(RolledCall(end_ns, service, after, tool, bool(tracked), run_length, tier, duration_ns))
    return old, new


def link_issuer(conn: sqlite3.Connection, call: ToolCallRow, models: ModelRollup) -> None:
    """Mark the model call that issued ``call`` (a repeated call, or one in a detected cycle or no-progress
    run: :attr:`ToolCallRow.in_loop`) as wasted, under the first such call's tool."""
    issuer = None
    if call.decided:  # the guard named the model call it charged
        issuer = conn.execute(ISSUER_BY_ID, (call.trace_id, call.issuer_span_id)).fetchone()
    elif call.parent_span_id is not None:
        issuer = conn.execute(ISSUER_BY_PARENT, (call.trace_id, call.parent_span_id, call.end_ns)).fetchone()
    if issuer is None and call.agent_known and not call.decided:
        issuer = conn.execute(ISSUER_BY_AGENT, (call.agent_key, call.end_ns)).fetchone()
    if issuer is None:
        return
    found = ModelFigures(*issuer)
    if found.wasted_tool is not None:  # it issued an earlier repeat already
        return
    conn.execute("UPDATE model_calls SET wasted_tool = ? WHERE id = ?", (call.tool_name, found.id))
    if rolled_up(found.agent_pending, found.input_tokens):
        label = agent_label(found.agent_name, found.agent_key)
        models.add(found, label, None, sign=-1)
        models.add(found, label, call.tool_name)


def insert_model(
    conn: sqlite3.Connection,
    model: ModelCallRow,
    runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
    models: ModelRollup,
) -> bool:
    """Insert one model call (its agent from an already exported run span if it has one); False when
    the store holds the span already."""
    key, name, known, pending = agent_of(conn, model, runs_seen)
    cursor = conn.execute(
        INSERT_MODEL_CALL,
        (
            *call_columns(model, key, name, known, pending),
            model.model,
            model.provider,
            model.input_tokens,
            model.output_tokens,
            model.total_tokens,
            model.conversation_id,
            model.error,
            model.cache_read_tokens,
            model.cache_write_tokens,
            model.reasoning_tokens,
        ),
    )
    if cursor.rowcount == 0:
        return False
    if model.output_preview is not None:
        conn.execute(INSERT_OUTPUT, (cursor.lastrowid, model.output_preview))
    for undelivered in model.undelivered:
        conn.execute(
            INSERT_UNDELIVERED,
            (
                cursor.lastrowid,
                undelivered.reminder_span_id,
                undelivered.tool_name,
                undelivered.tier,
                undelivered.reason,
            ),
        )
    if rolled_up(pending, model.input_tokens):
        figures = ModelFigures(
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
            model.cache_read_tokens,
            model.cache_write_tokens,
            model.reasoning_tokens,
        )
        models.add(figures, agent_label(name, key), None)
    return True


def agent_of(
    conn: sqlite3.Connection,
    row: CallRow,
    runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
) -> tuple[str, str | None, bool, bool]:
    """A call's agent key, name, known and pending flags: its own, completed from its agent-run span
    when that was exported first (unusual, but possible)."""
    key, name, known, pending = row.agent_key, row.agent_name, row.agent_known, row.agent_pending
    if pending:
        found = run_of_parent(conn, row.trace_id, row.parent_span_id, runs_seen)
        if found is not None:
            key = key if known else str(found[0])
            name = name if name is not None else found[1]
            known, pending = True, False
    return key, name, known, pending


def run_of_parent(
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


def insert_call(
    conn: sqlite3.Connection,
    call: ToolCallRow,
    runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None],
) -> tuple[str, str | None] | None:
    """Insert one call; returns its agent label and the label for the filter lists (None while
    provisional), or None when the store holds the span already.

    ``runs_seen`` remembers, for this batch, which parents are known agent runs: a batch's
    first calls mostly share a few parents, so each is looked up once, not once per call.
    """
    key, name, known, pending = agent_of(conn, call, runs_seen)
    cursor = conn.execute(
        INSERT_CALL,
        (
            *call_columns(call, key, name, known, pending),
            call.tool_name,
            call.tracked,
            call.arguments_digest,
            call.error,
            call.run_length,
            call.reminder_tier,
            call.reminder_threshold,
            call.unguarded_reason,
            call.reminder_variant,
        ),
    )
    if cursor.rowcount == 0:
        return None
    if call.arguments_preview is not None:
        conn.execute(INSERT_ARGUMENTS, (cursor.lastrowid, call.arguments_preview))
    conn.executemany(
        INSERT_DETECTION,
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
        return agent_label(name, key), None  # labelled when its agent-run span arrives
    return agent_label(name, key), name or key
