"""Runs of identical calls and the agent runs behind them: run lengths, the drill-down's runs, a run's timeline."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

import pandas as pd

from otel_repeat_guard.store.queries.filters import Filters, one, read, where
from otel_repeat_guard.store.queries.model_text import model_text
from otel_repeat_guard.store.queries.reminders import OUTCOME_TEXT, outcome


def run_lengths(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Final run lengths (``run_length``, ``runs``), including runs of one call.

    Every call at position k+1 of a run follows one at position k of the same run, so the
    runs ending at exactly k are (calls at position k) - (calls at position k+1).
    """
    clauses, params = where(filters, "tracked", "run_length IS NOT NULL")
    sql = f"""
        WITH positions AS (
            SELECT run_length, COUNT(*) AS calls FROM tool_calls {clauses} GROUP BY run_length
        )
        SELECT run_length,
               calls - CASE WHEN LEAD(run_length) OVER w = run_length + 1 THEN LEAD(calls) OVER w ELSE 0 END AS runs
        FROM positions
        WINDOW w AS (ORDER BY run_length)
        ORDER BY run_length
    """
    frame = read(conn, sql, params)
    return frame[frame["runs"] > 0].reset_index(drop=True)


def hotspot_runs(conn: sqlite3.Connection, filters: Filters, tool: str, limit: int = 25) -> pd.DataFrame:
    """The longest runs of ``tool``: one row per run, at its last call (``end_id``).

    A call ends its run when the agent's next tracked call is not the run's next position.
    (The filter columns in the outer WHERE are unqualified and so refer to ``c``.)
    """
    clauses, params = where(filters, "c.tool_name = ?", "c.run_length >= 2")
    sql = f"""
        SELECT c.id AS end_id, c.agent_key, COALESCE(c.agent_name, c.agent_key) AS agent,
               c.run_length, c.end_ns, c.trace_id, c.error
        FROM tool_calls AS c {clauses}
          AND (SELECT n.run_length FROM tool_calls AS n
               WHERE n.agent_key = c.agent_key AND n.id > c.id AND n.tracked
               ORDER BY n.id LIMIT 1) IS NOT c.run_length + 1
        ORDER BY c.run_length DESC, c.id DESC
        LIMIT ?
    """
    frame = read(conn, sql, [tool, *params, int(limit)])
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame


def loop_start_ns(conn: sqlite3.Connection, agent_key: str, end_id: int, run_length: int) -> int | None:
    """When the first call of a run (ending at call ``end_id``, ``run_length`` tracked calls long) started."""
    sql = """
        SELECT MIN(start_ns) AS start_ns FROM (
            SELECT start_ns FROM tool_calls WHERE agent_key = ? AND id <= ? AND tracked ORDER BY id DESC LIMIT ?
        )
    """
    value = one(conn, sql, (agent_key, int(end_id), int(run_length)))["start_ns"]
    return None if value is None else int(value)


def chain(conn: sqlite3.Connection, agent_key: str, end_id: int, run_length: int) -> pd.DataFrame:
    """The ordered calls of one run, with any untracked calls made in between."""
    sql = """
        WITH run AS (
            SELECT id FROM tool_calls WHERE agent_key = ? AND id <= ? AND tracked ORDER BY id DESC LIMIT ?
        )
        SELECT c.id, c.end_ns, c.duration_ns / 1e6 AS duration_ms, c.tool_name AS tool, c.tracked,
               c.run_length, c.error, c.reminder_tier, c.trace_id, c.span_id, a.preview AS arguments
        FROM tool_calls AS c LEFT JOIN tool_call_arguments AS a ON a.call_id = c.id
        WHERE c.agent_key = ? AND c.id BETWEEN (SELECT MIN(id) FROM run) AND ?
        ORDER BY c.id
    """
    frame = read(conn, sql, [agent_key, int(end_id), int(run_length), agent_key, int(end_id)])
    frame["time"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    frame["status"] = frame["error"].map({1: "error / denied", 0: "ok"})
    return frame


_TIMELINE = """
    SELECT 'tool' AS kind, c.id, c.start_ns, c.end_ns, c.duration_ns / 1e6 AS duration_ms, c.tool_name AS name,
           c.tracked, c.run_length, c.error, c.reminder_tier, c.arguments_digest,
           NULL AS input_tokens, NULL AS output_tokens, NULL AS reasoning_tokens, a.preview AS text, c.trace_id,
           c.span_id
    FROM tool_calls AS c LEFT JOIN tool_call_arguments AS a ON a.call_id = c.id
    WHERE c.agent_key = :key AND c.start_ns >= :from_ns
    UNION ALL
    SELECT 'model', m.id, m.start_ns, m.end_ns, m.duration_ns / 1e6, m.model,
           NULL, NULL, m.error, NULL, NULL,
           m.input_tokens, m.output_tokens, m.reasoning_tokens, o.preview, m.trace_id, m.span_id
    FROM model_calls AS m LEFT JOIN model_call_outputs AS o ON o.call_id = m.id
    WHERE m.agent_key = :key AND m.start_ns >= :from_ns
    ORDER BY start_ns, kind, id
    LIMIT :limit
"""
# The start of the ``before``-th call (model or tool) of the run before ``at_ns``: where a timeline around it begins.
_TIMELINE_FROM = """
    SELECT MIN(start_ns) AS start_ns FROM (
        SELECT start_ns FROM (
            SELECT start_ns FROM tool_calls WHERE agent_key = :key AND start_ns < :at_ns
            UNION ALL
            SELECT start_ns FROM model_calls WHERE agent_key = :key AND start_ns < :at_ns
        ) ORDER BY start_ns DESC LIMIT :before
    )
"""
TIMELINE_ROWS = 300


def run_timeline(
    conn: sqlite3.Connection,
    agent_key: str,
    *,
    focus_ns: int | None = None,
    before: int = 8,
    limit: int = TIMELINE_ROWS,
) -> pd.DataFrame:
    """A run's model calls and tool calls in start order, with what happened at each: the run position,
    the reminder delivered after a call and the model call that received it, each reminder's outcome
    and the call that broke a loop (``note``), tokens and duration, and the argument or output preview
    (``text``: a model's output as its text, :func:`~otel_repeat_guard.store.queries.model_text.model_text`;
    ``stored``: as the store keeps it).

    With ``focus_ns`` (a loop's first call) the timeline starts ``before`` calls earlier; at most
    ``limit`` rows. Previews are plain text from the store: the page shows them as text, never HTML.
    """
    start = None
    if focus_ns is not None:
        start = one(conn, _TIMELINE_FROM, {"key": agent_key, "at_ns": int(focus_ns), "before": int(before)})["start_ns"]
        if start is None:
            start = int(focus_ns)
    frame = read(conn, _TIMELINE, {"key": agent_key, "from_ns": start or -(2**63), "limit": int(limit)})
    sql = "SELECT EXISTS (SELECT 1 FROM agent_runs WHERE agent_key = ?) AS ended"
    run_ended = one(conn, sql, (agent_key,))["ended"]
    more = bool(len(frame) >= limit)
    return annotate_timeline(frame, ended=bool(run_ended) and not more)


class _Tracked(NamedTuple):
    """A tracked tool call of a timeline, as the next one is compared with it."""

    run: int  # its position in its run of identical calls
    tool: str
    digest: str | None  # of its canonical arguments


def annotate_timeline(frame: pd.DataFrame, *, ended: bool) -> pd.DataFrame:
    """Position, tokens and the notes of a timeline, from its rows in order (pure pandas, no SQL)."""
    notes = [""] * len(frame)
    outcomes: list[str] = [""] * len(frame)
    pending: list[str] = []  # tiers of the reminders delivered since the last model call
    waiting: list[tuple[int, int]] = []  # reminders the next tracked tool call decides: (row, run length)
    previous: _Tracked | None = None  # the last tracked tool call
    for index, row in enumerate(frame.to_dict("records")):
        if row["kind"] == "model":
            if pending:
                notes[index] = f"received the {', '.join(pending)} reminder"
                pending = []
            continue
        if not row["tracked"]:
            notes[index] = "excluded tool: neither extends nor breaks a run"
            continue
        run = 1 if _missing(row["run_length"]) else int(row["run_length"])
        same = previous is not None and (previous.tool, previous.digest) == (row["name"], row["arguments_digest"])
        for reminded, reminded_run in waiting:
            outcomes[reminded] = outcome(run, same, reminded_run)
        waiting = []
        if previous is not None and previous.run >= 2 and run == 1 and not same:
            notes[index] = f"loop broken after {previous.run} identical calls"
        if isinstance(row["reminder_tier"], str) and row["reminder_tier"]:
            notes[index] = f"{row['reminder_tier']} reminder sent (call {run} in a row)"
            pending.append(row["reminder_tier"])
            waiting.append((index, run))
        previous = _Tracked(run, str(row["name"]), row["arguments_digest"])
    for reminded, _ in waiting:
        outcomes[reminded] = "ended" if ended else "open"
    notes = [f"{note} → {OUTCOME_TEXT[kind]}" if kind else note for note, kind in zip(notes, outcomes, strict=True)]
    reasoning = frame["reasoning_tokens"] if "reasoning_tokens" in frame else [None] * len(frame)
    return frame.assign(
        note=notes,
        outcome=outcomes,
        position=[
            "" if kind == "model" else "excluded" if not tracked else str(1 if _missing(run) else int(run))
            for kind, tracked, run in zip(frame["kind"], frame["tracked"], frame["run_length"], strict=True)
        ],
        tokens=[
            "" if kind != "model" else _tokens_text(i, o, r)
            for kind, i, o, r in zip(
                frame["kind"], frame["input_tokens"], frame["output_tokens"], reasoning, strict=True
            )
        ],
        time=pd.to_datetime(frame["start_ns"], unit="ns", utc=True),
        stored=frame["text"],
        text=[
            model_text(text) if kind == "model" and isinstance(text, str) else text
            for kind, text in zip(frame["kind"], frame["text"], strict=True)
        ],
        status=frame["error"].map({1: "error", 0: "ok"}),
        name=frame["name"].fillna("(model not recorded)"),
    )


def _count_text(value: object) -> str:
    return "?" if _missing(value) else f"{int(value):,}"  # type: ignore[call-overload]


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))  # type: ignore[call-overload]


def _tokens_text(input_tokens: object, output_tokens: object, reasoning_tokens: object = None) -> str:
    """``1,200 in / 300 out``, and the reasoning part of the output where the span reports one above 0."""
    if _missing(input_tokens) and _missing(output_tokens):
        return "not recorded"
    text = f"{_count_text(input_tokens)} in / {_count_text(output_tokens)} out"
    if _missing(reasoning_tokens) or not int(reasoning_tokens):  # type: ignore[call-overload]
        return text
    return f"{text} ({_count_text(reasoning_tokens)} reasoning)"
