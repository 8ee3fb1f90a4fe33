"""Conversations and sessions: the runs that share a ``gen_ai.conversation.id`` (or ``session.id``)."""

from __future__ import annotations

import sqlite3

import pandas as pd

from otel_repeat_guard.store.queries.filters import Filters, model_where, read, reminder, where

RECENT_MODEL_CALLS = 5_000
"""How many of the latest model calls in the range the conversation list looks at."""


def conversations(conn: sqlite3.Connection, filters: Filters, limit: int = 25) -> pd.DataFrame:
    """The most recent conversations or sessions in the range (among its latest model calls): ``conversation``,
    ``runs``, ``model_calls``, ``tokens``, ``last_ns``, then per conversation ``repeated_calls`` and ``reminders``
    of its runs' tool calls that the filters select, as the headline counts them (time, service, agent, tool;
    the tier filter for the reminders). With a tool filter, only the conversations that called such a tool."""
    clauses, params = model_where(filters)
    clauses = (clauses + " AND " if clauses else "WHERE ") + "m.conversation_id IS NOT NULL"
    calls, call_params = where(filters, "tracked", "agent_key IN (SELECT agent_key FROM runs)")
    reminded, reminded_params = reminder(filters)
    having = "HAVING SUM(COALESCE(l.calls, 0)) > 0" if filters.tools else ""
    sql = f"""
        WITH recent AS (
            SELECT m.conversation_id FROM model_calls AS m INDEXED BY model_calls_end {clauses}
            ORDER BY m.end_ns DESC LIMIT ?
        ),
        listed AS (
            SELECT conversation_id FROM recent GROUP BY conversation_id LIMIT ?
        ),
        runs AS (
            SELECT m.conversation_id, m.agent_key, COUNT(*) AS model_calls, COALESCE(SUM(m.total_tokens), 0) AS tokens,
                   MAX(m.end_ns) AS last_ns
            FROM model_calls AS m WHERE m.conversation_id IN (SELECT conversation_id FROM listed)
            GROUP BY 1, 2
        ),
        loops AS (
            SELECT agent_key, COUNT(*) AS calls, COALESCE(SUM(run_length >= 2), 0) AS repeated_calls,
                   COALESCE(SUM({reminded}), 0) AS reminders
            FROM tool_calls {calls} GROUP BY agent_key
        )
        SELECT r.conversation_id AS conversation, COUNT(*) AS runs, SUM(r.model_calls) AS model_calls,
               SUM(r.tokens) AS tokens, MAX(r.last_ns) AS last_ns,
               COALESCE(SUM(l.repeated_calls), 0) AS repeated_calls, COALESCE(SUM(l.reminders), 0) AS reminders
        FROM runs AS r LEFT JOIN loops AS l ON l.agent_key = r.agent_key
        GROUP BY 1 {having} ORDER BY last_ns DESC, conversation
    """
    frame = read(conn, sql, [*params, RECENT_MODEL_CALLS, int(limit), *reminded_params, *call_params])
    frame["last"] = pd.to_datetime(frame["last_ns"], unit="ns", utc=True)
    return frame


def conversation_runs(conn: sqlite3.Connection, conversation: str, filters: Filters | None = None) -> pd.DataFrame:
    """The agent runs of one conversation or session, first first: ``agent_key``, ``agent``, ``first_ns``,
    ``model_calls``, ``tokens``, ``repeated_calls`` (of the run's tool calls that ``filters`` select)."""
    calls, params = where(filters or Filters(), "c.agent_key = m.agent_key", "tracked", "run_length >= 2")
    sql = f"""
        SELECT m.agent_key, COALESCE(MAX(m.agent_name), m.agent_key) AS agent, MIN(m.start_ns) AS first_ns,
               COUNT(*) AS model_calls, COALESCE(SUM(m.total_tokens), 0) AS tokens,
               (SELECT COUNT(*) FROM tool_calls AS c {calls}) AS repeated_calls
        FROM model_calls AS m WHERE m.conversation_id = ?
        GROUP BY m.agent_key ORDER BY first_ns, m.agent_key
    """
    frame = read(conn, sql, [*params, conversation])
    frame["started"] = pd.to_datetime(frame["first_ns"], unit="ns", utc=True)
    return frame
