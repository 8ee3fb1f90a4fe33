"""What the guard could not see: calls it could not compare, tools its configuration excludes, and reminders that
did not reach the model."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.store.queries.filters import Filters, in_list, model_where, read, where


def unguarded_calls(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Tracked calls the guard recognised but could not compare, by reason and tool (most first)."""
    clauses, params = where(filters, "tracked", "unguarded_reason IS NOT NULL")
    sql = f"""
        SELECT unguarded_reason AS reason, tool_name AS tool, COUNT(*) AS calls
        FROM tool_calls {clauses}
        GROUP BY unguarded_reason, tool_name
        ORDER BY calls DESC, reason, tool
    """
    return read(conn, sql, params)


def undelivered_reminders(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Reminders the guard handed on that no adapter took before the run's next model call ended, by reason, tier
    and tool (most first): ``reason``, ``tier``, ``tool``, ``reminders``. Time, service and agent are the model
    call's; the tool filter is the reminder's tool."""
    clauses, params = model_where(filters)
    if filters.tools:
        tool = in_list("u.tool_name", filters.tools)
        clauses = f"{clauses} AND {tool}" if clauses else f"WHERE {tool}"
        params = [*params, *filters.tools]
    sql = f"""
        SELECT u.reason AS reason, u.tier AS tier, u.tool_name AS tool, COUNT(*) AS reminders
        FROM undelivered_reminders u JOIN model_calls m ON m.id = u.model_call_id {clauses}
        GROUP BY u.reason, u.tier, u.tool_name
        ORDER BY reminders DESC, reason, tier, tool
    """
    return read(conn, sql, params)


def excluded_tools(conn: sqlite3.Connection, tools: Sequence[str]) -> pd.DataFrame:
    """Of ``tools``, those the store holds only as untracked calls (excluded by the guard's config): ``tool``."""
    if not tools:
        return pd.DataFrame(columns=["tool"])
    sql = f"""
        SELECT tool_name AS tool FROM call_rollup WHERE {in_list("tool_name", tools)}
        GROUP BY tool_name HAVING MAX(tracked) = 0 ORDER BY tool_name
    """
    return read(conn, sql, list(tools))
