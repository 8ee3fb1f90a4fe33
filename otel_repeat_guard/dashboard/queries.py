"""Every question the dashboard asks the store, as parameterized SQL returning DataFrames.

Aggregation happens in SQLite; pandas only receives the (small) results. Values always
travel as parameters: the SQL text is built only from fixed fragments and placeholders.

The headline and hotspot tables read the exporter's ``call_rollup`` (one row per UTC day,
service, agent, tool and tracked flag) for the whole days inside the time range, and the
calls themselves only for the partial days at its edges; the sums are the same as over the
calls, at a tenth of the rows on a busy store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from otel_repeat_guard.store.schema import ROLLUP_BUCKET_NS

TIERS = ("gentle", "detailed")
AGENT = "COALESCE(agent_name, agent_key)"
_SECOND_NS = 1_000_000_000
Param = int | float | str


@dataclass(frozen=True, slots=True)
class Filters:
    """The sidebar's choices. Empty tuples mean "all"; times are epoch nanoseconds of the call's end.

    ``tiers`` narrows only the reminder figures (which reminders count), not the calls.
    """

    start_ns: int | None = None
    end_ns: int | None = None
    services: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join('?' * len(values))})"


def _where(filters: Filters, *extra: str) -> tuple[str, list[Param]]:
    clauses: list[str] = list(extra)
    params: list[Param] = []
    if filters.start_ns is not None:
        clauses.append("end_ns >= ?")
        params.append(filters.start_ns)
    if filters.end_ns is not None:
        clauses.append("end_ns <= ?")
        params.append(filters.end_ns)
    for column, values in (("service_name", filters.services), (AGENT, filters.agents), ("tool_name", filters.tools)):
        if values:
            clauses.append(_in(column, values))
            params.extend(values)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _reminder(filters: Filters, tier: str | None = None) -> tuple[str, list[Param]]:
    """A condition true for calls carrying a reminder the tier filter lets through."""
    tiers = [t for t in (filters.tiers or TIERS) if tier is None or t == tier]
    if not tiers:
        return "0", []
    return _in("reminder_tier", tiers), list(tiers)


def _read(conn: sqlite3.Connection, sql: str, params: Sequence[Param]) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, conn, params=list(params))
    except pd.errors.DatabaseError as exc:
        # pandas wraps SQLite's error (a damaged page, a vanished file); callers handle sqlite3.Error.
        if isinstance(exc.__cause__, sqlite3.Error):
            raise exc.__cause__ from None
        raise


# One row of figures per call, shaped like a call_rollup row (the edges of a time range).
_CALL_FIGURES = f"""
    SELECT service_name, {AGENT} AS agent, tool_name, tracked,
           1 AS calls,
           run_length >= 2 AS repeated_calls,
           reminder_tier = 'gentle' AS gentle_reminders,
           reminder_tier = 'detailed' AS detailed_reminders,
           COALESCE(run_length, 0) AS longest_run,
           CASE WHEN run_length >= 2 THEN duration_ns ELSE 0 END AS repeated_ns
    FROM tool_calls
"""
_ROLLUP_FIGURES = """
    SELECT service_name, agent, tool_name, tracked, calls, repeated_calls, gentle_reminders,
           detailed_reminders, longest_run, repeated_ns
    FROM call_rollup
"""


def _day_split(filters: Filters) -> tuple[tuple[int | None, int | None] | None, list[tuple[int | None, int | None]]]:
    """The whole roll-up days inside the time range ([first, end) of bucket starts, or None) and the
    stretches of calls outside them, as inclusive ``end_ns`` ranges."""
    start, end = filters.start_ns, filters.end_ns
    first = None if start is None else -(-start // ROLLUP_BUCKET_NS) * ROLLUP_BUCKET_NS
    stop = None if end is None else (end + 1) // ROLLUP_BUCKET_NS * ROLLUP_BUCKET_NS
    if first is not None and stop is not None and first >= stop:
        return None, [(start, end)]  # no whole day inside: calls only
    edges: list[tuple[int | None, int | None]] = []
    if start is not None and first is not None and start < first:
        edges.append((start, first - 1))
    if end is not None and stop is not None and stop <= end:
        edges.append((stop, end))
    return (first, stop), edges


def _figures(filters: Filters, *, tracked_only: bool) -> tuple[str, list[Param]]:
    """A CTE ``parts`` of rows shaped like call_rollup whose sums are the figures of the filtered calls."""
    days, edges = _day_split(filters)
    branches: list[str] = []
    params: list[Param] = []

    def narrowing(agent: str) -> tuple[list[str], list[Param]]:
        clauses = ["tracked"] if tracked_only else []
        values: list[Param] = []
        for column, chosen in (
            ("service_name", filters.services),
            (agent, filters.agents),
            ("tool_name", filters.tools),
        ):
            if chosen:
                clauses.append(_in(column, chosen))
                values.extend(chosen)
        return clauses, values

    if days is not None:
        clauses, values = narrowing("agent")
        first, stop = days
        if first is not None:
            clauses.append("bucket_ns >= ?")
            values.append(first)
        if stop is not None:
            clauses.append("bucket_ns < ?")
            values.append(stop)
        branches.append(_ROLLUP_FIGURES + ("WHERE " + " AND ".join(clauses) if clauses else ""))
        params.extend(values)
    for low, high in edges:
        clauses, values = narrowing(AGENT)
        for condition, bound in (("end_ns >= ?", low), ("end_ns <= ?", high)):
            if bound is not None:
                clauses.append(condition)
                values.append(bound)
        branches.append(_CALL_FIGURES + "WHERE " + " AND ".join(clauses))
        params.extend(values)
    return "WITH parts AS (" + " UNION ALL ".join(branches) + ")", params


def _tier_sum(filters: Filters, tier: str) -> str:
    """The summed reminders of ``tier`` if the tier filter lets it through, else 0 (fixed SQL text)."""
    return f"COALESCE(SUM({tier}_reminders), 0)" if tier in (filters.tiers or TIERS) else "0"


def headline(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """One row: calls, repeats, wasted share, reminders by tier, agents with loops, longest run, wasted time."""
    parts, params = _figures(filters, tracked_only=False)
    sql = f"""
        {parts}
        SELECT
            COALESCE(SUM(calls) FILTER (WHERE tracked), 0) AS tool_calls,
            COALESCE(SUM(calls) FILTER (WHERE NOT tracked), 0) AS untracked_calls,
            COALESCE(SUM(repeated_calls), 0) AS repeated_calls,
            {_tier_sum(filters, "gentle")} AS gentle_reminders,
            {_tier_sum(filters, "detailed")} AS detailed_reminders,
            COUNT(DISTINCT CASE WHEN repeated_calls > 0 THEN agent END) AS agents_with_loops,
            COALESCE(MAX(longest_run), 0) AS longest_run,
            COALESCE(SUM(repeated_ns), 0) / 1e9 AS repeated_seconds
        FROM parts
    """
    frame = _read(conn, sql, params)
    frame["reminders"] = frame["gentle_reminders"] + frame["detailed_reminders"]
    calls = frame["tool_calls"].where(frame["tool_calls"] > 0)
    frame["wasted_share"] = (frame["repeated_calls"] / calls).fillna(0.0)
    return frame


def _grouped(conn: sqlite3.Connection, filters: Filters, key: str, label: str) -> pd.DataFrame:
    parts, params = _figures(filters, tracked_only=True)
    sql = f"""
        {parts}
        SELECT
            {key} AS {label},
            SUM(repeated_calls) AS repeated_calls,
            {_tier_sum(filters, "gentle")} + {_tier_sum(filters, "detailed")} AS reminders,
            MAX(longest_run) AS longest_run,
            COALESCE(SUM(repeated_ns), 0) / 1e9 AS wasted_seconds,
            SUM(calls) AS calls
        FROM parts
        GROUP BY {key}
        HAVING repeated_calls > 0
        ORDER BY repeated_calls DESC, {label}
    """
    frame = _read(conn, sql, params)
    frame["repeated_share"] = frame["repeated_calls"] / frame["calls"]
    return frame


def hotspots_by_tool(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Tools with repeated calls: repeats, reminders, longest run, wasted seconds, calls, repeated share."""
    return _grouped(conn, filters, "tool_name", "tool")


def hotspots_by_agent(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """The same figures per readable agent name."""
    return _grouped(conn, filters, "agent", "agent")


def bucket_seconds(span_ns: int, target_buckets: int = 60) -> int:
    """A round bucket width giving about ``target_buckets`` buckets over ``span_ns``."""
    for width in (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 86400):
        if span_ns / (width * _SECOND_NS) <= target_buckets:
            return width
    return 7 * 86400


def over_time(conn: sqlite3.Connection, filters: Filters, bucket_s: int) -> pd.DataFrame:
    """Long form (``bucket``, ``series``, ``count``): repeated calls and reminders by tier per time bucket."""
    gentle, gentle_params = _reminder(filters, "gentle")
    detailed, detailed_params = _reminder(filters, "detailed")
    where, params = _where(filters, "run_length >= 2")
    bucket_ns = int(bucket_s) * _SECOND_NS
    sql = f"""
        SELECT
            (end_ns / ?) * ? AS bucket_ns,
            COUNT(*) AS repeated_calls,
            COUNT(*) FILTER (WHERE {gentle}) AS gentle_reminders,
            COUNT(*) FILTER (WHERE {detailed}) AS detailed_reminders
        FROM tool_calls INDEXED BY tool_calls_repeats_by_time {where}
        GROUP BY bucket_ns
        ORDER BY bucket_ns
    """  # the index covers every column used here; left alone, the planner may prefer the tool index
    wide = _read(conn, sql, [bucket_ns, bucket_ns, *gentle_params, *detailed_params, *params])
    wide["bucket"] = pd.to_datetime(wide["bucket_ns"], unit="ns", utc=True)
    long = wide.melt(
        id_vars=["bucket"],
        value_vars=["repeated_calls", "gentle_reminders", "detailed_reminders"],
        var_name="series",
        value_name="count",
    )
    long["series"] = long["series"].map(
        {
            "repeated_calls": "repeated calls",
            "gentle_reminders": "gentle reminders",
            "detailed_reminders": "detailed reminders",
        }
    )
    return long


def run_lengths(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Final run lengths (``run_length``, ``runs``), including runs of one call.

    Every call at position k+1 of a run follows one at position k of the same run, so the
    runs ending at exactly k are (calls at position k) - (calls at position k+1).
    """
    where, params = _where(filters, "tracked", "run_length IS NOT NULL")
    sql = f"""
        WITH positions AS (
            SELECT run_length, COUNT(*) AS calls FROM tool_calls {where} GROUP BY run_length
        )
        SELECT run_length,
               calls - CASE WHEN LEAD(run_length) OVER w = run_length + 1 THEN LEAD(calls) OVER w ELSE 0 END AS runs
        FROM positions
        WINDOW w AS (ORDER BY run_length)
        ORDER BY run_length
    """
    frame = _read(conn, sql, params)
    return frame[frame["runs"] > 0].reset_index(drop=True)


def hotspot_runs(conn: sqlite3.Connection, filters: Filters, tool: str, limit: int = 25) -> pd.DataFrame:
    """The longest runs of ``tool``: one row per run, at its last call (``end_id``).

    A call ends its run when the agent's next tracked call is not the run's next position.
    (The filter columns in the outer WHERE are unqualified and so refer to ``c``.)
    """
    where, params = _where(filters, "c.tool_name = ?", "c.run_length >= 2")
    sql = f"""
        SELECT c.id AS end_id, c.agent_key, COALESCE(c.agent_name, c.agent_key) AS agent,
               c.run_length, c.end_ns, c.trace_id, c.error
        FROM tool_calls AS c {where}
          AND (SELECT n.run_length FROM tool_calls AS n
               WHERE n.agent_key = c.agent_key AND n.id > c.id AND n.tracked
               ORDER BY n.id LIMIT 1) IS NOT c.run_length + 1
        ORDER BY c.run_length DESC, c.id DESC
        LIMIT ?
    """
    frame = _read(conn, sql, [tool, *params, int(limit)])
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame


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
    frame = _read(conn, sql, [agent_key, int(end_id), int(run_length), agent_key, int(end_id)])
    frame["time"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    frame["status"] = frame["error"].map({1: "error / denied", 0: "ok"})
    return frame


def unguarded_calls(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Tracked calls the guard recognised but could not compare, by reason and tool (most first)."""
    where, params = _where(filters, "tracked", "unguarded_reason IS NOT NULL")
    sql = f"""
        SELECT unguarded_reason AS reason, tool_name AS tool, COUNT(*) AS calls
        FROM tool_calls {where}
        GROUP BY unguarded_reason, tool_name
        ORDER BY calls DESC, reason, tool
    """
    return _read(conn, sql, params)


def filter_options(conn: sqlite3.Connection) -> pd.DataFrame:
    """Long form (``kind``, ``value``) of the services, agents and tools seen (kept by the exporter)."""
    return _read(conn, "SELECT kind, value FROM dimensions ORDER BY kind, value", [])


def time_bounds(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row: the first and last call end (``first_ns``, ``last_ns``) and whether there are any (``rows``)."""
    sql = """
        SELECT (SELECT MIN(end_ns) FROM tool_calls) AS first_ns,
               (SELECT MAX(end_ns) FROM tool_calls) AS last_ns,
               EXISTS (SELECT 1 FROM tool_calls) AS rows
    """  # separate subqueries: each MIN/MAX is then one index lookup
    return _read(conn, sql, [])
