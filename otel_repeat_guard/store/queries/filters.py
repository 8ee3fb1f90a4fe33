"""The sidebar's filters as SQL conditions, and the helpers every query module shares.

Values always travel as parameters: the SQL text is built only from fixed fragments and placeholders.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from otel_repeat_guard.store.schema import ROLLUP_BUCKET_NS

TIERS = ("gentle", "detailed")
AGENT = "COALESCE(agent_name, agent_key)"
MODEL_AGENT = "COALESCE(m.agent_name, m.agent_key)"
SECOND_NS = 1_000_000_000
Param = int | float | str
Bound = tuple[int | None, int | None]


@dataclass(frozen=True, slots=True)
class Filters:
    """The sidebar's choices. Empty tuples mean "all"; times are epoch nanoseconds of the call's end.

    ``tiers`` narrows only the reminder figures (which reminders count), not the calls. ``kind`` (one of
    ``LOOP_KINDS``, None for all) narrows the loop figures to the calls with a detection of that kind.
    """

    start_ns: int | None = None
    end_ns: int | None = None
    services: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    kind: str | None = None


def in_list(column: str, values: Sequence[str]) -> str:
    """``column IN (?, ...)``, one placeholder per value."""
    return f"{column} IN ({', '.join('?' * len(values))})"


def bounded(clauses: list[str], values: list[Param], low: int | None, high: int | None, column: str) -> None:
    """Adds ``column >= low`` and ``column <= high`` (each only when given) to ``clauses`` and ``values``."""
    for condition, bound in ((f"{column} >= ?", low), (f"{column} <= ?", high)):
        if bound is not None:
            clauses.append(condition)
            values.append(bound)


def chosen(
    filters: Filters, clauses: list[str], values: list[Param], service: str, agent: str, tool: str | None
) -> None:
    """Adds the filters' service, agent and (unless ``tool`` is None) tool choices, on those columns."""
    for column, picked in ((service, filters.services), (agent, filters.agents), (tool, filters.tools)):
        if column is not None and picked:
            clauses.append(in_list(column, picked))
            values.extend(picked)


def clause(clauses: Sequence[str]) -> str:
    """``WHERE`` and the conditions, or nothing when there are none."""
    return ("WHERE " + " AND ".join(clauses)) if clauses else ""


def where(filters: Filters, *extra: str, ended: str = "end_ns") -> tuple[str, list[Param]]:
    """The filters as a WHERE clause (with ``extra`` conditions first); ``ended`` is the column of the calls'
    end time (qualified where another joined table has one too)."""
    clauses: list[str] = list(extra)
    params: list[Param] = []
    bounded(clauses, params, filters.start_ns, filters.end_ns, ended)
    chosen(filters, clauses, params, "service_name", AGENT, "tool_name")
    return clause(clauses), params


def model_where(filters: Filters) -> tuple[str, list[Param]]:
    """Time, service and agent narrow model calls; a tool filter does not (a model call is of no tool)."""
    clauses: list[str] = []
    params: list[Param] = []
    bounded(clauses, params, filters.start_ns, filters.end_ns, "m.end_ns")
    chosen(filters, clauses, params, "m.service_name", MODEL_AGENT, None)
    return clause(clauses), params


def narrowing(filters: Filters, agent: str, *, tracked_only: bool) -> tuple[list[str], list[Param]]:
    """The service, agent and tool conditions of the filters (and ``tracked`` if asked), on unqualified columns."""
    clauses = ["tracked"] if tracked_only else []
    values: list[Param] = []
    chosen(filters, clauses, values, "service_name", agent, "tool_name")
    return clauses, values


def reminder(filters: Filters, tier: str | None = None, column: str = "reminder_tier") -> tuple[str, list[Param]]:
    """A condition true for calls carrying a reminder the tier filter lets through."""
    tiers = [t for t in (filters.tiers or TIERS) if tier is None or t == tier]
    if not tiers:
        return "0", []
    return in_list(column, tiers), list(tiers)


def tiers_shown(filters: Filters) -> list[str]:
    """The reminder tiers the tier filter lets through."""
    return [t for t in (filters.tiers or TIERS) if t in TIERS]


def day_split(filters: Filters) -> tuple[Bound | None, list[Bound]]:
    """The whole roll-up days inside the time range ([first, end) of bucket starts, or None) and the
    stretches of calls outside them, as inclusive ``end_ns`` ranges."""
    start, end = filters.start_ns, filters.end_ns
    first = None if start is None else -(-start // ROLLUP_BUCKET_NS) * ROLLUP_BUCKET_NS
    stop = None if end is None else (end + 1) // ROLLUP_BUCKET_NS * ROLLUP_BUCKET_NS
    if first is not None and stop is not None and first >= stop:
        return None, [(start, end)]  # no whole day inside: calls only
    edges: list[Bound] = []
    if start is not None and first is not None and start < first:
        edges.append((start, first - 1))
    if end is not None and stop is not None and stop <= end:
        edges.append((stop, end))
    return (first, stop), edges


def in_days(clauses: list[str], values: list[Param], days: Bound) -> None:
    """Adds the roll-up buckets of ``days`` ([first, stop) of bucket starts) to ``clauses`` and ``values``."""
    first, stop = days
    for condition, bound in (("bucket_ns >= ?", first), ("bucket_ns < ?", stop)):
        if bound is not None:
            clauses.append(condition)
            values.append(bound)


def read(conn: sqlite3.Connection, sql: str, params: Sequence[Param] | Mapping[str, Param]) -> pd.DataFrame:
    """The rows of ``sql`` as a DataFrame; SQLite's own error when the store fails."""
    try:
        return pd.read_sql_query(sql, conn, params=params if isinstance(params, Mapping) else list(params))
    except pd.errors.DatabaseError as exc:
        # pandas wraps SQLite's error (a damaged page, a vanished file); callers handle sqlite3.Error.
        if isinstance(exc.__cause__, sqlite3.Error):
            raise exc.__cause__ from None
        raise


def one(conn: sqlite3.Connection, sql: str, params: Sequence[Param] | Mapping[str, Param]) -> sqlite3.Row:
    """The single row of ``sql`` (an aggregate), read by column name."""
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    row: sqlite3.Row = cursor.execute(sql, params).fetchone()
    return row


def filter_options(conn: sqlite3.Connection) -> pd.DataFrame:
    """Long form (``kind``, ``value``) of the services, agents and tools seen (kept by the exporter)."""
    return read(conn, "SELECT kind, value FROM dimensions ORDER BY kind, value", [])


def time_bounds(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row: the first and last call end (``first_ns``, ``last_ns``) and whether there are any (``rows``)."""
    sql = """
        SELECT (SELECT MIN(end_ns) FROM tool_calls) AS first_ns,
               (SELECT MAX(end_ns) FROM tool_calls) AS last_ns,
               EXISTS (SELECT 1 FROM tool_calls) AS rows
    """  # separate subqueries: each MIN/MAX is then one index lookup
    return read(conn, sql, [])
