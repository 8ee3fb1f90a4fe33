"""What the guard could not see: calls it could not compare, and tools its configuration excludes."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.store.queries.filters import Filters, in_list, read, where


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


def excluded_tools(conn: sqlite3.Connection, tools: Sequence[str]) -> pd.DataFrame:
    """Of ``tools``, those the store holds only as untracked calls (excluded by the guard's config): ``tool``."""
    if not tools:
        return pd.DataFrame(columns=["tool"])
    sql = f"""
        SELECT tool_name AS tool FROM call_rollup WHERE {in_list("tool_name", tools)}
        GROUP BY tool_name HAVING MAX(tracked) = 0 ORDER BY tool_name
    """
    return read(conn, sql, list(tools))
