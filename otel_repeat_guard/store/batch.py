"""One write of the store: tool calls, model calls and agent-run spans in one transaction, with the roll-ups and
dimensions they add to. No OpenTelemetry import: the span exporter (:mod:`otel_repeat_guard.store.exporter`)
and the Claude Code command hook, which writes its rows without spans, share it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from otel_repeat_guard.store import missing_facts
from otel_repeat_guard.store.rollup import CallRollup, ModelFigures, ModelRollup, RolledCall, agent_label, rolled_up
from otel_repeat_guard.store.rows import ToolCallRow
from otel_repeat_guard.store.sql import (
    DROP_UNUSED_AGENT,
    INSERT_DIMENSION,
    INSERT_RUN,
    PENDING_MODELS_UNDER,
    RESOLVE_PENDING,
    RESOLVE_PENDING_MODELS,
)
from otel_repeat_guard.store.writes import insert_call, insert_model, link_issuer, relabelled

if TYPE_CHECKING:  # a Claude Code hook's write has tool calls only: the model rows are not defined there
    from otel_repeat_guard.store.model_rows import AgentRunRow, ModelCallRow


class Batch:
    """The rows of one export: tool calls, model calls and agent-run spans. A plain class: a dataclass's definition
    cost each Claude Code hook call, which writes one batch, about a hundredth of it."""

    __slots__ = ("calls", "facts_missing", "models", "runs")

    def __init__(
        self,
        calls: list[ToolCallRow] | None = None,
        models: list[ModelCallRow] | None = None,
        runs: list[AgentRunRow] | None = None,
        facts_missing: bool = False,
    ) -> None:
        self.calls: list[ToolCallRow] = [] if calls is None else calls
        self.models: list[ModelCallRow] = [] if models is None else models
        self.runs: list[AgentRunRow] = [] if runs is None else runs
        self.facts_missing = facts_missing
        """A call with the guard's loop events and none of its facts (missing_facts.py)."""

    def __bool__(self) -> bool:
        return bool(self.calls or self.models or self.runs)


def write_batch(conn: sqlite3.Connection, batch: Batch, claim: Callable[[sqlite3.Connection], None]) -> tuple[int, int]:
    """Write ``batch`` in one transaction on ``conn`` (``claim`` first, in it: who writes the store); returns the
    calls stored and those already in the store."""
    calls, runs = batch.calls, batch.runs
    conn.execute("BEGIN IMMEDIATE")
    try:
        claim(conn)
        dimensions: set[tuple[str, str]] = set()
        rollup = CallRollup()
        runs_seen: dict[tuple[str, str | None], tuple[str, str | None] | None] = {}
        duplicates = 0
        models = ModelRollup()
        for model in batch.models:
            if not insert_model(conn, model, runs_seen, models):
                duplicates += 1
        for call in calls:
            inserted = insert_call(conn, call, runs_seen)
            if inserted is None:  # this span is stored already (another exporter, an ingest)
                duplicates += 1
                continue
            label, agent = inserted
            if call.charges_issuer or (call.in_loop and not call.decided):
                link_issuer(conn, call, models)
            rollup.add(
                RolledCall(
                    call.end_ns,
                    call.service_name,
                    label,
                    call.tool_name,
                    call.tracked,
                    call.run_length,
                    call.reminder_tier,
                    call.duration_ns,
                )
            )
            dimensions.update((("service", call.service_name), ("tool", call.tool_name)))
            dimensions.update(("loop_kind", detection.kind) for detection in call.detections)
            if agent is not None:
                dimensions.add(("agent", agent))
        rollup.apply(conn)  # before any run below moves some of these calls to another label
        for run in runs:
            conn.execute(INSERT_RUN, (run.trace_id, run.span_id, run.agent_key, run.agent_name))
            old, new = relabelled(conn, run)
            resolved = conn.execute(
                RESOLVE_PENDING,
                {"key": run.agent_key, "name": run.agent_name, "trace_id": run.trace_id, "span_id": run.span_id},
            ).rowcount
            new.apply(conn)
            old.take_from(conn)
            pending_models = conn.execute(PENDING_MODELS_UNDER, (run.trace_id, run.span_id)).fetchall()
            conn.execute(
                RESOLVE_PENDING_MODELS,
                {"key": run.agent_key, "name": run.agent_name, "trace_id": run.trace_id, "span_id": run.span_id},
            )
            for row in (ModelFigures(*found) for found in pending_models):  # final now: rolled up under its label
                if rolled_up(False, row.input_tokens):
                    name = row.agent_name if row.agent_name is not None else run.agent_name
                    models.add(
                        row, agent_label(name, row.agent_key if row.agent_known else run.agent_key), row.wasted_tool
                    )
            if resolved:
                dimensions.add(("agent", run.agent_name or run.agent_key))
            for label in old.labels() - new.labels():  # e.g. `coder#32845f6266c53a36`, now `coder`
                dimensions.discard(("agent", label))
                conn.execute(DROP_UNUSED_AGENT, (label, label))
        models.apply(conn)
        conn.executemany(INSERT_DIMENSION, sorted(dimensions))
        missing_facts.note(conn, batch.facts_missing)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    total = len(calls) + len(batch.models)
    return total - duplicates, duplicates
