"""Did the reminders work: each reminder's outcome, as the guard decides it, read from the stored calls."""

from __future__ import annotations

import sqlite3

import pandas as pd

from otel_repeat_guard.store.queries.filters import AGENT, Filters, in_list, one, read, tiers_shown, where

OUTCOMES = ("broken", "ignored", "ended", "open")
"""A reminder's outcome: the run's next tracked call was different (broken) or the same call again
(ignored); the run ended first (ended: its run span was exported, or a new prompt reset the chain);
or nothing has decided it yet (open)."""

OUTCOME_TEXT = {
    "broken": "broken: the next call was different",
    "ignored": "ignored: the same call again",
    "ended": "ended: the run ended first",
    "open": "open: no next call yet",
}

REMINDER_WINDOW = 10_000
"""How many of the range's latest reminders ``reminder_outcomes`` reads: each costs three index lookups."""


def outcome(run: int, same_call: bool, reminded_run: int) -> str:
    """A reminder's outcome, decided by the run's next tracked call (its run length, and whether it is the
    reminded call itself)."""
    if run == reminded_run + 1:
        return "ignored"
    return "ended" if run == 1 and same_call else "broken"


def reminder_count(conn: sqlite3.Connection, filters: Filters) -> int:
    """How many reminders the filters select (of the tiers the tier filter lets through)."""
    tiers = tiers_shown(filters)
    if not tiers:
        return 0
    clauses, params = where(filters, "run_length >= 2", in_list("reminder_tier", tiers))
    sql = f"SELECT COUNT(*) AS reminders FROM tool_calls INDEXED BY tool_calls_repeats_by_time {clauses}"
    return int(one(conn, sql, [*tiers, *params])["reminders"])


def reminder_outcomes(conn: sqlite3.Connection, filters: Filters, window: int = REMINDER_WINDOW) -> pd.DataFrame:
    """Reminders by ``tier``, ``tool``, ``agent``, ``model`` and ``outcome`` (``reminders``: how many), of the
    latest ``window`` reminders the filters select (:func:`reminder_count` says whether there are more).

    The outcome is read from the stored calls as the guard decides it: the next tracked call of the
    same agent run (by store order) continues the run (ignored), is a different call (broken), or is
    the same call starting a new chain after a reset (ended); with no next call, the run ended when
    its run span is in the store, else the reminder is still open. ``model`` is the model that
    received the reminder: the run's first model call after the reminded call (else its last before).
    """
    tiers = tiers_shown(filters)
    if not tiers:
        return pd.DataFrame(columns=["tier", "tool", "agent", "model", "outcome", "reminders"])
    clauses, params = where(filters, "run_length >= 2", in_list("reminder_tier", tiers))
    sql = f"""
        WITH reminded AS MATERIALIZED (
            SELECT r.id, r.reminder_tier AS tier, r.tool_name AS tool, {AGENT} AS agent, r.agent_key,
                   r.run_length, r.end_ns, r.arguments_digest,
                   (SELECT n.id FROM tool_calls AS n
                    WHERE n.agent_key = r.agent_key AND n.id > r.id AND n.tracked ORDER BY n.id LIMIT 1) AS next_id
            FROM tool_calls AS r INDEXED BY tool_calls_repeats_by_time {clauses}
            ORDER BY r.end_ns DESC LIMIT ?
        ),
        decided AS (
            SELECT x.tier, x.tool, x.agent,
                   CASE
                       WHEN n.id IS NULL THEN
                           CASE WHEN EXISTS (SELECT 1 FROM agent_runs AS a WHERE a.agent_key = x.agent_key)
                                THEN 'ended' ELSE 'open' END
                       WHEN n.run_length = x.run_length + 1 THEN 'ignored'
                       WHEN n.run_length = 1 AND n.tool_name = x.tool AND n.arguments_digest = x.arguments_digest
                           THEN 'ended'
                       ELSE 'broken'
                   END AS outcome,
                   CASE  -- the model call that received it, its model recorded or not; else the last one before
                       WHEN EXISTS (SELECT 1 FROM model_calls AS m WHERE m.agent_key = x.agent_key AND m.start_ns >= x.end_ns)
                       THEN (SELECT m.model FROM model_calls AS m
                             WHERE m.agent_key = x.agent_key AND m.start_ns >= x.end_ns ORDER BY m.start_ns LIMIT 1)
                       ELSE (SELECT m.model FROM model_calls AS m
                             WHERE m.agent_key = x.agent_key AND m.start_ns < x.end_ns ORDER BY m.start_ns DESC LIMIT 1)
                   END AS model
            FROM reminded AS x LEFT JOIN tool_calls AS n ON n.id = x.next_id
        )
        SELECT tier, tool, agent, model, outcome, COUNT(*) AS reminders
        FROM decided GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    """  # AGENT is unqualified: inside `reminded` it refers to r, the only table in its FROM
    return read(conn, sql, [*tiers, *params, int(window)])  # the tier clause comes first in the WHERE
