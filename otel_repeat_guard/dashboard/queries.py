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

from otel_repeat_guard.store.records import CYCLE, LOOP_KINDS, PARALLEL_DUPLICATE, REPEAT
from otel_repeat_guard.store.schema import ROLLED_UP_MODEL_CALL, ROLLUP_BUCKET_NS, SMALL_INPUT_TOKENS

TIERS = ("gentle", "detailed")
AGENT = "COALESCE(agent_name, agent_key)"
_SECOND_NS = 1_000_000_000
Param = int | float | str


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


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join('?' * len(values))})"


def _where(filters: Filters, *extra: str, ended: str = "end_ns") -> tuple[str, list[Param]]:
    """The filters as a WHERE clause (with ``extra`` conditions first); ``ended`` is the column of the calls'
    end time (qualified where another joined table has one too)."""
    clauses: list[str] = list(extra)
    params: list[Param] = []
    if filters.start_ns is not None:
        clauses.append(f"{ended} >= ?")
        params.append(filters.start_ns)
    if filters.end_ns is not None:
        clauses.append(f"{ended} <= ?")
        params.append(filters.end_ns)
    for column, values in (("service_name", filters.services), (AGENT, filters.agents), ("tool_name", filters.tools)):
        if values:
            clauses.append(_in(column, values))
            params.extend(values)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _reminder(filters: Filters, tier: str | None = None, column: str = "reminder_tier") -> tuple[str, list[Param]]:
    """A condition true for calls carrying a reminder the tier filter lets through."""
    tiers = [t for t in (filters.tiers or TIERS) if tier is None or t == tier]
    if not tiers:
        return "0", []
    return _in(column, tiers), list(tiers)


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


def _narrowing(filters: Filters, agent: str, *, tracked_only: bool) -> tuple[list[str], list[Param]]:
    """The service, agent and tool conditions of the filters (and ``tracked`` if asked), on unqualified columns."""
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


def _bounded(clauses: list[str], values: list[Param], low: int | None, high: int | None, column: str) -> None:
    for condition, bound in ((f"{column} >= ?", low), (f"{column} <= ?", high)):
        if bound is not None:
            clauses.append(condition)
            values.append(bound)


# One row per detection of the chosen kinds, shaped like a call_rollup row. ``counted``: whether the row counts
# its call as a call in a loop (fixed SQL text). Every column a filter names is the call's (c); time is d's.
_DETECTION_FIGURES = f"""
    SELECT service_name, {AGENT} AS agent, tool_name, tracked,
           0 AS calls,
           {{counted}} AS repeated_calls,
           d.reminder_tier IS 'gentle' AS gentle_reminders,
           d.reminder_tier IS 'detailed' AS detailed_reminders,
           {{longest}} AS longest_run,
           CASE WHEN {{counted}} THEN duration_ns ELSE 0 END AS repeated_ns
    FROM detections AS d INDEXED BY detections_kind JOIN tool_calls AS c ON c.id = d.call_id
"""
# Under "all kinds", a call counts once: as a repeat if it is one (the roll-up counts it), else at its first
# other kind.
_FIRST_OTHER_KIND = """(c.run_length IS NULL OR c.run_length < 2) AND NOT EXISTS (
    SELECT 1 FROM detections AS e WHERE e.call_id = d.call_id AND e.kind != 'repeat' AND e.kind < d.kind)"""


def _detection_kinds(filters: Filters) -> tuple[str, ...]:
    """The kinds read from ``detections`` (beside the repeats the roll-up and tool_calls already hold)."""
    if filters.kind is None:
        return tuple(k for k in LOOP_KINDS if k != REPEAT)
    return () if filters.kind == REPEAT else (filters.kind,)


def _detection_rows(filters: Filters, template: str, *, tracked_only: bool) -> tuple[str, list[Param]]:
    """``template`` (with ``{counted}`` and ``{longest}``) over the detections of the kinds the filter adds,
    narrowed by the filters; "all kinds" counts each call once and keeps the longest run of identical calls."""
    kinds = _detection_kinds(filters)
    counted, longest = (_FIRST_OTHER_KIND, "0") if filters.kind is None else ("1", "COALESCE(d.run_length, 0)")
    clauses, values = _narrowing(filters, AGENT, tracked_only=tracked_only)
    _bounded(clauses, values, filters.start_ns, filters.end_ns, "d.end_ns")
    clauses.insert(0, _in("d.kind", kinds))
    sql = template.format(counted=counted, longest=longest) + "WHERE " + " AND ".join(clauses)
    return sql, [*kinds, *values]


def _figures(filters: Filters, *, tracked_only: bool) -> tuple[str, list[Param]]:
    """A CTE ``parts`` of rows shaped like call_rollup whose sums are the figures of the filtered calls.

    With a loop kind other than repeat, the roll-up gives only the calls and ``detections`` the loop figures;
    with all kinds, ``detections`` adds the calls in loops of other kinds to the roll-up's repeats.
    """
    days, edges = _day_split(filters)
    branches: list[str] = []
    params: list[Param] = []

    def narrowing(agent: str) -> tuple[list[str], list[Param]]:
        return _narrowing(filters, agent, tracked_only=tracked_only)

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
    calls = " UNION ALL ".join(branches)
    if not _detection_kinds(filters):
        return f"WITH parts AS ({calls})", params
    detected, detected_params = _detection_rows(filters, _DETECTION_FIGURES, tracked_only=tracked_only)
    if filters.kind is not None:  # the calls only: the loop figures are the detections'
        calls = (
            "SELECT service_name, agent, tool_name, tracked, calls, 0 AS repeated_calls, 0 AS gentle_reminders,"
            f" 0 AS detailed_reminders, 0 AS longest_run, 0 AS repeated_ns FROM ({calls})"
        )
    return f"WITH parts AS ({calls} UNION ALL {detected})", [*params, *detected_params]


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
            TOTAL(repeated_ns) / 1e9 AS repeated_seconds
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
            TOTAL(repeated_ns) / 1e9 AS wasted_seconds,
            SUM(calls) AS calls
        FROM parts
        GROUP BY {key}
        HAVING SUM(repeated_calls) > 0  -- the sum: a bare column would be one arbitrary row of the group
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


# Round widths, none more than 5/3 of the one before: the smallest that fits gives 36 to 60 buckets.
BUCKET_WIDTHS_S: tuple[float, ...] = (
    *(0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 15, 20, 30),
    *(60, 120, 180, 300, 600, 900, 1200, 1800),
    *(3600, 2 * 3600, 3 * 3600, 4 * 3600, 6 * 3600, 12 * 3600),
    *(86400, 2 * 86400, 3 * 86400, 5 * 86400, 7 * 86400, 14 * 86400, 30 * 86400),
)


def bucket_seconds(span_ns: int, target_buckets: int = 60) -> float:
    """The smallest round bucket width giving at most ``target_buckets`` buckets over ``span_ns``
    (36 to 60 of them when the span is longer than a few seconds)."""
    for width in BUCKET_WIDTHS_S:
        if span_ns / (width * _SECOND_NS) <= target_buckets:
            return width
    return BUCKET_WIDTHS_S[-1]


def over_time(conn: sqlite3.Connection, filters: Filters, bucket_s: float) -> pd.DataFrame:
    """Long form (``bucket``, ``series``, ``count``): repeated calls and reminders by tier per time bucket."""
    bucket_ns = max(1, round(bucket_s * _SECOND_NS))
    frames = []
    if filters.kind in (None, REPEAT):
        gentle, gentle_params = _reminder(filters, "gentle")
        detailed, detailed_params = _reminder(filters, "detailed")
        where, params = _where(filters, "run_length >= 2")
        sql = f"""
            SELECT
                (end_ns / ?) * ? AS bucket_ns,
                COUNT(*) AS repeated_calls,
                COUNT(*) FILTER (WHERE {gentle}) AS gentle_reminders,
                COUNT(*) FILTER (WHERE {detailed}) AS detailed_reminders
            FROM tool_calls INDEXED BY tool_calls_repeats_by_time {where}
            GROUP BY bucket_ns
        """  # the index covers every column used here; left alone, the planner may prefer the tool index
        frames.append(_read(conn, sql, [bucket_ns, bucket_ns, *gentle_params, *detailed_params, *params]))
    if _detection_kinds(filters):
        gentle, gentle_params = _reminder(filters, "gentle", "d.reminder_tier")
        detailed, detailed_params = _reminder(filters, "detailed", "d.reminder_tier")
        template = f"""
            SELECT (d.end_ns / ?) * ? AS bucket_ns, {{counted}} AS counted,
                   COALESCE({gentle}, 0) AS gentle, COALESCE({detailed}, 0) AS detailed
            FROM detections AS d INDEXED BY detections_kind JOIN tool_calls AS c ON c.id = d.call_id
        """
        rows, params = _detection_rows(filters, template, tracked_only=False)
        sql = f"""
            SELECT bucket_ns, SUM(counted) AS repeated_calls, SUM(gentle) AS gentle_reminders,
                   SUM(detailed) AS detailed_reminders
            FROM ({rows}) GROUP BY bucket_ns
        """
        frames.append(_read(conn, sql, [bucket_ns, bucket_ns, *gentle_params, *detailed_params, *params]))
    wide = _summed_by_bucket(frames)
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


def _summed_by_bucket(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The per-bucket counts of the repeats and of the other kinds' detections, added up, by time."""
    if len(frames) == 1:
        return frames[0].sort_values("bucket_ns", ignore_index=True)
    nonempty = [frame for frame in frames if not frame.empty]
    if not nonempty:
        return frames[0]
    summed = pd.concat(nonempty).groupby("bucket_ns", as_index=False).sum()
    return summed.astype("int64").sort_values("bucket_ns", ignore_index=True)


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


# The detections of one kind that end their loop: the agent run's next detection of that kind (by store order)
# does not continue it (the next copy of a cycle, the next call of a no-progress run). A parallel duplicate
# (no length) always ends its own. ``{where}`` narrows ``d`` and ``c``, the detection's call.
_LOOPS = f"""
    SELECT d.call_id AS end_id, d.kind, c.agent_key, {AGENT} AS agent, c.tool_name AS tool, d.run_length, d.period,
           d.repetitions, d.cycle_tools, c.end_ns, c.trace_id, c.error
    FROM detections AS d JOIN tool_calls AS c ON c.id = d.call_id
    {{where}}
      AND NOT EXISTS (
          SELECT 1 FROM (
              SELECT e.run_length, e.period FROM tool_calls AS n JOIN detections AS e ON e.call_id = n.id
              WHERE n.agent_key = c.agent_key AND n.id > c.id AND e.kind = d.kind ORDER BY n.id LIMIT 1
          ) AS later
          WHERE later.run_length = d.run_length + COALESCE(d.period, 1) AND later.period IS d.period
      )
    ORDER BY d.run_length DESC, d.call_id DESC
    LIMIT ?
"""


def hotspot_loops(
    conn: sqlite3.Connection, filters: Filters, tool: str, kinds: Sequence[str], limit: int = 25
) -> pd.DataFrame:
    """The longest loops of ``kinds`` (not repeats: see :func:`hotspot_runs`) ending at a call of ``tool``: one
    row per loop at its last detection (``end_id``), with its ``kind``, ``run_length`` (calls so far), and for a
    cycle its ``period``, ``repetitions`` and ``cycle_tools`` (JSON)."""
    where, params = _where(filters, _in("d.kind", kinds) if kinds else "0", "c.tool_name = ?", ended="c.end_ns")
    frame = _read(conn, _LOOPS.format(where=where), [*kinds, tool, *params, int(limit)])
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame


def agent_cycles(conn: sqlite3.Connection, agent_key: str, limit: int = 25) -> pd.DataFrame:
    """The cycles of one agent run, each at the call completing its last copy (columns as :func:`hotspot_loops`)."""
    where = "WHERE c.agent_key = ? AND d.kind = ?"
    frame = _read(conn, _LOOPS.format(where=where), [agent_key, CYCLE, int(limit)])
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame.sort_values("end_id", ignore_index=True)


_CYCLE_CALLS = """
    WITH cycle AS (
        SELECT c.id FROM tool_calls AS c
        WHERE c.agent_key = ? AND c.id <= ? AND c.tracked
          AND NOT EXISTS (SELECT 1 FROM detections AS p WHERE p.call_id = c.id AND p.kind = ?)
        ORDER BY c.id DESC LIMIT ?
    )
    SELECT c.id, c.start_ns, c.tool_name AS tool, c.error, c.trace_id, c.span_id, a.preview AS arguments
    FROM cycle JOIN tool_calls AS c ON c.id = cycle.id LEFT JOIN tool_call_arguments AS a ON a.call_id = c.id
    ORDER BY c.id
"""


def cycle_calls(conn: sqlite3.Connection, agent_key: str, end_id: int, period: int, repetitions: int) -> pd.DataFrame:
    """The calls that make up a cycle: the agent run's last ``period`` x ``repetitions`` tracked calls ending at
    ``end_id`` (the call completing the last copy), in order, each with its ``copy`` (1 to ``repetitions``)
    and its ``step`` in the copy (1 to ``period``). Tools the guard excludes and parallel duplicates are not
    part of a cycle, as for the guard. ``arguments`` is the stored preview: text, never HTML."""
    calls = max(1, int(period)) * max(1, int(repetitions))
    frame = _read(conn, _CYCLE_CALLS, [agent_key, int(end_id), PARALLEL_DUPLICATE, calls])
    return numbered_copies(frame, int(period), int(repetitions))


def numbered_copies(frame: pd.DataFrame, period: int, repetitions: int) -> pd.DataFrame:
    """``frame`` (a cycle's calls in order, ending at the last copy's last call) with each call's ``copy`` and
    ``step``, counted back from the end, so a cycle whose first calls the store lacks is still numbered right."""
    from_end = range(len(frame) - 1, -1, -1)
    return frame.assign(
        copy=[repetitions - back // period for back in from_end],
        step=[period - back % period for back in from_end],
        time=pd.to_datetime(frame["start_ns"], unit="ns", utc=True),
        status=frame["error"].map({1: "error", 0: "ok"}),
    )


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


# -- model calls: tokens, the calls that issued repeats, reminders' outcomes, timelines, conversations ------------

MODEL_AGENT = "COALESCE(m.agent_name, m.agent_key)"


def _band(bands: Sequence[int]) -> tuple[str, list[Param]]:
    """SQL for a model call's price band: the largest of ``bands`` its input tokens exceed, else 0.

    Price tiers apply to a whole request once its input passes a threshold, so calls are summed per
    band and each band is priced at its own rate (see ``costs``). Fixed text; thresholds are parameters.
    """
    thresholds = sorted({int(b) for b in bands if int(b) > 0}, reverse=True)
    if not thresholds:
        return "0", []
    cases = " ".join("WHEN m.input_tokens > ? THEN ?" for _ in thresholds)
    params: list[Param] = []
    for threshold in thresholds:
        params.extend((threshold, threshold))
    return f"CASE {cases} ELSE 0 END", params


def _model_where(filters: Filters) -> tuple[str, list[Param]]:
    """Time, service and agent narrow model calls; a tool filter does not (a model call is of no tool)."""
    clauses: list[str] = []
    params: list[Param] = []
    if filters.start_ns is not None:
        clauses.append("m.end_ns >= ?")
        params.append(filters.start_ns)
    if filters.end_ns is not None:
        clauses.append("m.end_ns <= ?")
        params.append(filters.end_ns)
    for column, values in (("m.service_name", filters.services), (MODEL_AGENT, filters.agents)):
        if values:
            clauses.append(_in(column, values))
            params.extend(values)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


_MODEL_ROW = f"""
    SELECT {MODEL_AGENT} AS agent, m.model, m.provider, m.wasted_tool, {{band}} AS band,
           1 AS calls, COALESCE(m.input_tokens, 0) AS input_tokens, COALESCE(m.output_tokens, 0) AS output_tokens,
           COALESCE(m.total_tokens, COALESCE(m.input_tokens, 0) + COALESCE(m.output_tokens, 0)) AS total_tokens,
           m.input_tokens IS NULL OR m.output_tokens IS NULL AS unsplit_calls
    FROM model_calls AS m {{indexed}}
"""
_MODEL_ROLLUP_ROW = """
    SELECT agent, NULLIF(model, '') AS model, NULLIF(provider, '') AS provider, NULLIF(wasted_tool, '') AS wasted_tool,
           0 AS band, calls, input_tokens, output_tokens, total_tokens, unsplit_calls
    FROM model_rollup
"""


def _model_parts(filters: Filters, bands: Sequence[int], *, wasted: bool) -> tuple[str, list[Param]]:
    """A CTE ``parts`` of model-call figures (one row per rolled-up group or per call) whose sums are the
    figures of the model calls in the filters' range: ``model_rollup`` for whole days, where it is exact
    (every band starts above SMALL_INPUT_TOKENS), and ``model_calls`` for the partial days at the range's
    edges and for the calls the roll-up leaves out (agent not final yet, or more input tokens)."""
    band, band_params = _band(bands)
    use_rollup = all(int(b) >= SMALL_INPUT_TOKENS for b in bands)
    days, edges = _day_split(filters) if use_rollup else (None, [(filters.start_ns, filters.end_ns)])

    def narrowing(agent: str, tool: str) -> tuple[list[str], list[Param]]:
        clauses: list[str] = [f"{tool} IS NOT NULL AND {tool} != ''"] if wasted else []
        values: list[Param] = []
        for column, chosen in (("service_name", filters.services), (agent, filters.agents)):
            if chosen:
                clauses.append(_in(column, chosen))
                values.extend(chosen)
        if wasted and filters.tools:
            clauses.append(_in(tool, filters.tools))
            values.extend(filters.tools)
        return clauses, values

    branches: list[str] = []
    params: list[Param] = []
    if days is not None:
        clauses, values = narrowing("agent", "wasted_tool")
        first, stop = days
        for condition, bound in (("bucket_ns >= ?", first), ("bucket_ns < ?", stop)):
            if bound is not None:
                clauses.append(condition)
                values.append(bound)
        branches.append(_MODEL_ROLLUP_ROW + ("WHERE " + " AND ".join(clauses) if clauses else ""))
        params.extend(values)
        # the calls of those days the roll-up leaves out
        clauses, values = narrowing(MODEL_AGENT, "m.wasted_tool")
        clauses = [
            f"NOT ({ROLLED_UP_MODEL_CALL.replace('agent_pending', 'm.agent_pending').replace('input_tokens', 'm.input_tokens')})",
            *clauses,
        ]
        for condition, bound in (("m.end_ns >= ?", first), ("m.end_ns < ?", None if stop is None else stop)):
            if bound is not None:
                clauses.append(condition)
                values.append(bound)
        branches.append(
            _MODEL_ROW.format(band=band, indexed="INDEXED BY model_calls_unrolled") + "WHERE " + " AND ".join(clauses)
        )
        params.extend([*band_params, *values])
    for low, high in edges:
        clauses, values = narrowing(MODEL_AGENT, "m.wasted_tool")
        for condition, bound in (("m.end_ns >= ?", low), ("m.end_ns <= ?", high)):
            if bound is not None:
                clauses.append(condition)
                values.append(bound)
        branches.append(
            _MODEL_ROW.format(band=band, indexed="INDEXED BY model_calls_end")
            + ("WHERE " + " AND ".join(clauses) if clauses else "")
        )
        params.extend([*band_params, *values])
    return "WITH parts AS (" + " UNION ALL ".join(branches) + ")", params


_PART_SUMS = """
    SUM(calls) AS calls, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
    SUM(total_tokens) AS total_tokens, SUM(unsplit_calls) AS unsplit_calls
"""


def model_tokens(conn: sqlite3.Connection, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame:
    """Every model call's tokens, per agent, model, provider and price band: ``agent``, ``model``,
    ``provider``, ``band``, ``calls``, ``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``unsplit_calls`` (calls without separate input and output counts). Time, service and agent narrow
    the model calls; a tool filter does not (a model call is of no tool)."""
    parts, params = _model_parts(filters, bands, wasted=False)
    sql = (
        f"{parts} SELECT agent, model, provider, band, {_PART_SUMS} FROM parts GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    return _read(conn, sql, params)


def wasted_tokens(conn: sqlite3.Connection, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame:
    """The tokens of the model calls that issued a repeated call (or a call in a detected cycle or no-progress
    run), per tool, agent, model, provider and band.

    The exporter marks such a call's issuer when it stores the call: the latest model call under the
    same parent span (else of the same agent run) that started before the tool call ended. A model call
    that issued several repeated calls counts once, under the first one's tool. Time, service and agent
    narrow the model calls; a tool filter narrows them to those that issued repeats of that tool.
    """
    parts, params = _model_parts(filters, bands, wasted=True)
    sql = (
        f"{parts} SELECT wasted_tool AS tool, agent, model, provider, band, {_PART_SUMS} FROM parts"
        " GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
    )
    return _read(conn, sql, params)


OUTCOMES = ("broken", "ignored", "ended", "open")
"""A reminder's outcome: the run's next tracked call was different (broken) or the same call again
(ignored); the run ended first (ended: its run span was exported, or a new prompt reset the chain);
or nothing has decided it yet (open)."""


REMINDER_WINDOW = 10_000
"""How many of the range's latest reminders ``reminder_outcomes`` reads: each costs three index lookups."""


def reminder_count(conn: sqlite3.Connection, filters: Filters) -> int:
    """How many reminders the filters select (of the tiers the tier filter lets through)."""
    tiers = [t for t in (filters.tiers or TIERS) if t in TIERS]
    if not tiers:
        return 0
    where, params = _where(filters, "run_length >= 2", _in("reminder_tier", tiers))
    sql = f"SELECT COUNT(*) FROM tool_calls INDEXED BY tool_calls_repeats_by_time {where}"
    return int(conn.execute(sql, [*tiers, *params]).fetchone()[0])


def reminder_outcomes(conn: sqlite3.Connection, filters: Filters, window: int = REMINDER_WINDOW) -> pd.DataFrame:
    """Reminders by ``tier``, ``tool``, ``agent``, ``model`` and ``outcome`` (``reminders``: how many), of the
    latest ``window`` reminders the filters select (:func:`reminder_count` says whether there are more).

    The outcome is read from the stored calls as the guard decides it: the next tracked call of the
    same agent run (by store order) continues the run (ignored), is a different call (broken), or is
    the same call starting a new chain after a reset (ended); with no next call, the run ended when
    its run span is in the store, else the reminder is still open. ``model`` is the model that
    received the reminder: the run's first model call after the reminded call (else its last before).
    """
    tiers = [t for t in (filters.tiers or TIERS) if t in TIERS]
    if not tiers:
        return pd.DataFrame(columns=["tier", "tool", "agent", "model", "outcome", "reminders"])
    where, params = _where(filters, "run_length >= 2", _in("reminder_tier", tiers))
    sql = f"""
        WITH reminded AS MATERIALIZED (
            SELECT r.id, r.reminder_tier AS tier, r.tool_name AS tool, {AGENT} AS agent, r.agent_key,
                   r.run_length, r.end_ns, r.arguments_digest,
                   (SELECT n.id FROM tool_calls AS n
                    WHERE n.agent_key = r.agent_key AND n.id > r.id AND n.tracked ORDER BY n.id LIMIT 1) AS next_id
            FROM tool_calls AS r INDEXED BY tool_calls_repeats_by_time {where}
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
                   COALESCE(
                       (SELECT m.model FROM model_calls AS m
                        WHERE m.agent_key = x.agent_key AND m.start_ns >= x.end_ns ORDER BY m.start_ns LIMIT 1),
                       (SELECT m.model FROM model_calls AS m
                        WHERE m.agent_key = x.agent_key AND m.start_ns < x.end_ns ORDER BY m.start_ns DESC LIMIT 1)
                   ) AS model
            FROM reminded AS x LEFT JOIN tool_calls AS n ON n.id = x.next_id
        )
        SELECT tier, tool, agent, model, outcome, COUNT(*) AS reminders
        FROM decided GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    """  # AGENT is unqualified: inside `reminded` it refers to r, the only table in its FROM
    return _read(conn, sql, [*tiers, *params, int(window)])  # the tier clause comes first in the WHERE


def loop_start_ns(conn: sqlite3.Connection, agent_key: str, end_id: int, run_length: int) -> int | None:
    """When the first call of a run (ending at call ``end_id``, ``run_length`` tracked calls long) started."""
    sql = """
        SELECT MIN(start_ns) FROM (
            SELECT start_ns FROM tool_calls WHERE agent_key = ? AND id <= ? AND tracked ORDER BY id DESC LIMIT ?
        )
    """
    value = conn.execute(sql, (agent_key, int(end_id), int(run_length))).fetchone()[0]
    return None if value is None else int(value)


_TIMELINE = """
    SELECT 'tool' AS kind, c.id, c.start_ns, c.end_ns, c.duration_ns / 1e6 AS duration_ms, c.tool_name AS name,
           c.tracked, c.run_length, c.error, c.reminder_tier, c.arguments_digest,
           NULL AS input_tokens, NULL AS output_tokens, a.preview AS text, c.trace_id, c.span_id
    FROM tool_calls AS c LEFT JOIN tool_call_arguments AS a ON a.call_id = c.id
    WHERE c.agent_key = :key AND c.start_ns >= :from_ns
    UNION ALL
    SELECT 'model', m.id, m.start_ns, m.end_ns, m.duration_ns / 1e6, m.model,
           NULL, NULL, m.error, NULL, NULL,
           m.input_tokens, m.output_tokens, o.preview, m.trace_id, m.span_id
    FROM model_calls AS m LEFT JOIN model_call_outputs AS o ON o.call_id = m.id
    WHERE m.agent_key = :key AND m.start_ns >= :from_ns
    ORDER BY start_ns, kind, id
    LIMIT :limit
"""
# The start of the ``before``-th call (model or tool) of the run before ``at_ns``: where a timeline around it begins.
_TIMELINE_FROM = """
    SELECT MIN(start_ns) FROM (
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
    and the call that broke a loop (``note``), tokens and duration, and the argument or output preview.

    With ``focus_ns`` (a loop's first call) the timeline starts ``before`` calls earlier; at most
    ``limit`` rows. Previews are plain text from the store: the page shows them as text, never HTML.
    """
    start = None
    if focus_ns is not None:
        start = conn.execute(
            _TIMELINE_FROM, {"key": agent_key, "at_ns": int(focus_ns), "before": int(before)}
        ).fetchone()[0]
        if start is None:
            start = int(focus_ns)
    frame = _read_named(conn, _TIMELINE, {"key": agent_key, "from_ns": start or -(2**63), "limit": int(limit)})
    run_ended = conn.execute("SELECT EXISTS (SELECT 1 FROM agent_runs WHERE agent_key = ?)", (agent_key,)).fetchone()[0]
    more = bool(len(frame) >= limit)
    return _annotate_timeline(frame, ended=bool(run_ended) and not more)


def _read_named(conn: sqlite3.Connection, sql: str, params: dict[str, Param]) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, conn, params=params)
    except pd.errors.DatabaseError as exc:
        if isinstance(exc.__cause__, sqlite3.Error):
            raise exc.__cause__ from None
        raise


def _outcome(run: int, same_call: bool, reminded_run: int) -> str:
    """A reminder's outcome, decided by the run's next tracked call (its run length, and whether it is the
    reminded call itself)."""
    if run == reminded_run + 1:
        return "ignored"
    return "ended" if run == 1 and same_call else "broken"


def _annotate_timeline(frame: pd.DataFrame, *, ended: bool) -> pd.DataFrame:
    """Position, tokens and the notes of a timeline, from its rows in order (pure pandas, no SQL)."""
    notes = [""] * len(frame)
    outcomes: list[str] = [""] * len(frame)
    pending: list[str] = []  # tiers of the reminders delivered since the last model call
    waiting: list[tuple[int, int]] = []  # reminders the next tracked tool call decides: (row, run length)
    previous: tuple[int, str, str | None] | None = None  # the last tracked tool call: run length, tool, digest
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
        same = previous is not None and previous[1:] == (row["name"], row["arguments_digest"])
        for reminded, reminded_run in waiting:
            outcomes[reminded] = _outcome(run, same, reminded_run)
        waiting = []
        if previous is not None and previous[0] >= 2 and run == 1 and not same:
            notes[index] = f"loop broken after {previous[0]} identical calls"
        if isinstance(row["reminder_tier"], str) and row["reminder_tier"]:
            notes[index] = f"{row['reminder_tier']} reminder sent (call {run} in a row)"
            pending.append(row["reminder_tier"])
            waiting.append((index, run))
        previous = (run, str(row["name"]), row["arguments_digest"])
    for reminded, _ in waiting:
        outcomes[reminded] = "ended" if ended else "open"
    notes = [
        f"{note} → {OUTCOME_TEXT[outcome]}" if outcome else note for note, outcome in zip(notes, outcomes, strict=True)
    ]
    return frame.assign(
        note=notes,
        outcome=outcomes,
        position=[
            "" if kind == "model" else "excluded" if not tracked else str(1 if _missing(run) else int(run))
            for kind, tracked, run in zip(frame["kind"], frame["tracked"], frame["run_length"], strict=True)
        ],
        tokens=[
            "" if kind != "model" else _tokens_text(i, o)
            for kind, i, o in zip(frame["kind"], frame["input_tokens"], frame["output_tokens"], strict=True)
        ],
        time=pd.to_datetime(frame["start_ns"], unit="ns", utc=True),
        status=frame["error"].map({1: "error", 0: "ok"}),
        name=frame["name"].fillna("(model not recorded)"),
    )


OUTCOME_TEXT = {
    "broken": "broken: the next call was different",
    "ignored": "ignored: the same call again",
    "ended": "ended: the run ended first",
    "open": "open: no next call yet",
}


def _count_text(value: object) -> str:
    return "?" if _missing(value) else f"{int(value):,}"  # type: ignore[call-overload]


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))  # type: ignore[call-overload]


def _tokens_text(input_tokens: object, output_tokens: object) -> str:
    if _missing(input_tokens) and _missing(output_tokens):
        return "not recorded"
    return f"{_count_text(input_tokens)} in / {_count_text(output_tokens)} out"


RECENT_MODEL_CALLS = 5_000
"""How many of the latest model calls in the range the conversation list looks at."""


def conversations(conn: sqlite3.Connection, filters: Filters, limit: int = 25) -> pd.DataFrame:
    """The most recent conversations or sessions in the range (among its latest model calls): ``conversation``,
    ``runs``, ``model_calls``, ``tokens``, ``last_ns``, then per conversation ``repeated_calls`` and ``reminders``
    of its runs."""
    where, params = _model_where(filters)
    where = (where + " AND " if where else "WHERE ") + "m.conversation_id IS NOT NULL"
    sql = f"""
        WITH recent AS (
            SELECT m.conversation_id FROM model_calls AS m INDEXED BY model_calls_end {where}
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
        )
        SELECT r.conversation_id AS conversation, COUNT(*) AS runs, SUM(r.model_calls) AS model_calls,
               SUM(r.tokens) AS tokens, MAX(r.last_ns) AS last_ns,
               SUM((SELECT COUNT(*) FROM tool_calls AS c WHERE c.agent_key = r.agent_key AND c.run_length >= 2))
                   AS repeated_calls,
               SUM((SELECT COUNT(*) FROM tool_calls AS c
                    WHERE c.agent_key = r.agent_key AND c.reminder_tier IS NOT NULL)) AS reminders
        FROM runs AS r GROUP BY 1 ORDER BY last_ns DESC, conversation
    """
    frame = _read(conn, sql, [*params, RECENT_MODEL_CALLS, int(limit)])
    frame["last"] = pd.to_datetime(frame["last_ns"], unit="ns", utc=True)
    return frame


def conversation_runs(conn: sqlite3.Connection, conversation: str) -> pd.DataFrame:
    """The agent runs of one conversation or session, first first: ``agent_key``, ``agent``, ``first_ns``,
    ``model_calls``, ``tokens``, ``repeated_calls``."""
    sql = """
        SELECT m.agent_key, COALESCE(MAX(m.agent_name), m.agent_key) AS agent, MIN(m.start_ns) AS first_ns,
               COUNT(*) AS model_calls, COALESCE(SUM(m.total_tokens), 0) AS tokens,
               (SELECT COUNT(*) FROM tool_calls AS c WHERE c.agent_key = m.agent_key AND c.run_length >= 2)
                   AS repeated_calls
        FROM model_calls AS m WHERE m.conversation_id = ?
        GROUP BY m.agent_key ORDER BY first_ns, m.agent_key
    """
    frame = _read(conn, sql, [conversation])
    frame["started"] = pd.to_datetime(frame["first_ns"], unit="ns", utc=True)
    return frame


def excluded_tools(conn: sqlite3.Connection, tools: Sequence[str]) -> pd.DataFrame:
    """Of ``tools``, those the store holds only as untracked calls (excluded by the guard's config): ``tool``."""
    if not tools:
        return pd.DataFrame(columns=["tool"])
    sql = f"""
        SELECT tool_name AS tool FROM call_rollup WHERE {_in("tool_name", tools)}
        GROUP BY tool_name HAVING MAX(tracked) = 0 ORDER BY tool_name
    """
    return _read(conn, sql, list(tools))


def has_model_calls(conn: sqlite3.Connection) -> bool:
    """Whether the store holds any model call (so the token figures mean something)."""
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM model_calls)").fetchone()[0])
