"""The page's headline figures and the loops over time.

The headline and hotspot tables read the exporter's ``call_rollup`` (one row per UTC day,
service, agent, tool and tracked flag) for the whole days inside the time range, and the
calls themselves only for the partial days at its edges; the sums are the same as over the
calls, at a tenth of the rows on a busy store.
"""

from __future__ import annotations

import sqlite3

import pandas as pd

from otel_repeat_guard.store.queries.filters import (
    AGENT,
    SECOND_NS,
    TIERS,
    Filters,
    Param,
    bounded,
    clause,
    day_split,
    in_days,
    narrowing,
    read,
    reminder,
    where,
)
from otel_repeat_guard.store.queries.loop_kinds import detection_kinds, detection_rows
from otel_repeat_guard.store.records import REPEAT

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


def figures(filters: Filters, *, tracked_only: bool) -> tuple[str, list[Param]]:
    """A CTE ``parts`` of rows shaped like call_rollup whose sums are the figures of the filtered calls.

    With a loop kind other than repeat, the roll-up gives only the calls and ``detections`` the loop figures;
    with all kinds, ``detections`` adds the calls in loops of other kinds to the roll-up's repeats.
    """
    days, edges = day_split(filters)
    branches: list[str] = []
    params: list[Param] = []
    if days is not None:
        clauses, values = narrowing(filters, "agent", tracked_only=tracked_only)
        in_days(clauses, values, days)
        branches.append(_ROLLUP_FIGURES + clause(clauses))
        params.extend(values)
    for low, high in edges:
        clauses, values = narrowing(filters, AGENT, tracked_only=tracked_only)
        bounded(clauses, values, low, high, "end_ns")
        branches.append(_CALL_FIGURES + "WHERE " + " AND ".join(clauses))
        params.extend(values)
    calls = " UNION ALL ".join(branches)
    if not detection_kinds(filters):
        return f"WITH parts AS ({calls})", params
    detected, detected_params = detection_rows(filters, _DETECTION_FIGURES, tracked_only=tracked_only)
    if filters.kind is not None:  # the calls only: the loop figures are the detections'
        calls = (
            "SELECT service_name, agent, tool_name, tracked, calls, 0 AS repeated_calls, 0 AS gentle_reminders,"
            f" 0 AS detailed_reminders, 0 AS longest_run, 0 AS repeated_ns FROM ({calls})"
        )
    return f"WITH parts AS ({calls} UNION ALL {detected})", [*params, *detected_params]


def tier_sum(filters: Filters, tier: str) -> str:
    """The summed reminders of ``tier`` if the tier filter lets it through, else 0 (fixed SQL text)."""
    return f"COALESCE(SUM({tier}_reminders), 0)" if tier in (filters.tiers or TIERS) else "0"


def headline(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """One row: calls, repeats, wasted share, reminders by tier, agents with loops, longest run, wasted time."""
    parts, params = figures(filters, tracked_only=False)
    sql = f"""
        {parts}
        SELECT
            COALESCE(SUM(calls) FILTER (WHERE tracked), 0) AS tool_calls,
            COALESCE(SUM(calls) FILTER (WHERE NOT tracked), 0) AS untracked_calls,
            COALESCE(SUM(repeated_calls), 0) AS repeated_calls,
            {tier_sum(filters, "gentle")} AS gentle_reminders,
            {tier_sum(filters, "detailed")} AS detailed_reminders,
            COUNT(DISTINCT CASE WHEN repeated_calls > 0 THEN agent END) AS agents_with_loops,
            COALESCE(MAX(longest_run), 0) AS longest_run,
            TOTAL(repeated_ns) / 1e9 AS repeated_seconds
        FROM parts
    """
    frame = read(conn, sql, params)
    frame["reminders"] = frame["gentle_reminders"] + frame["detailed_reminders"]
    calls = frame["tool_calls"].where(frame["tool_calls"] > 0)
    frame["wasted_share"] = (frame["repeated_calls"] / calls).fillna(0.0)
    return frame


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
        if span_ns / (width * SECOND_NS) <= target_buckets:
            return width
    return BUCKET_WIDTHS_S[-1]


def over_time(conn: sqlite3.Connection, filters: Filters, bucket_s: float) -> pd.DataFrame:
    """Long form (``bucket``, ``series``, ``count``): repeated calls and reminders by tier per time bucket."""
    bucket_ns = max(1, round(bucket_s * SECOND_NS))
    frames = []
    if filters.kind in (None, REPEAT):
        gentle, gentle_params = reminder(filters, "gentle")
        detailed, detailed_params = reminder(filters, "detailed")
        clauses, params = where(filters, "run_length >= 2")
        sql = f"""
            SELECT
                (end_ns / ?) * ? AS bucket_ns,
                COUNT(*) AS repeated_calls,
                COUNT(*) FILTER (WHERE {gentle}) AS gentle_reminders,
                COUNT(*) FILTER (WHERE {detailed}) AS detailed_reminders
            FROM tool_calls INDEXED BY tool_calls_repeats_by_time {clauses}
            GROUP BY bucket_ns
        """  # the index covers every column used here; left alone, the planner may prefer the tool index
        frames.append(read(conn, sql, [bucket_ns, bucket_ns, *gentle_params, *detailed_params, *params]))
    if detection_kinds(filters):
        gentle, gentle_params = reminder(filters, "gentle", "d.reminder_tier")
        detailed, detailed_params = reminder(filters, "detailed", "d.reminder_tier")
        template = f"""
            SELECT (d.end_ns / ?) * ? AS bucket_ns, {{counted}} AS counted,
                   COALESCE({gentle}, 0) AS gentle, COALESCE({detailed}, 0) AS detailed
            FROM detections AS d INDEXED BY detections_kind JOIN tool_calls AS c ON c.id = d.call_id
        """
        rows, params = detection_rows(filters, template, tracked_only=False)
        sql = f"""
            SELECT bucket_ns, SUM(counted) AS repeated_calls, SUM(gentle) AS gentle_reminders,
                   SUM(detailed) AS detailed_reminders
            FROM ({rows}) GROUP BY bucket_ns
        """
        frames.append(read(conn, sql, [bucket_ns, bucket_ns, *gentle_params, *detailed_params, *params]))
    return long_form(fill_buckets(_summed_by_bucket(frames), bucket_ns))


MAX_FILLED_BUCKETS = 10_000
"""At most this many buckets are filled in (the bucket width gives 36 to 60 over the range that holds calls)."""


def fill_buckets(wide: pd.DataFrame, bucket_ns: int) -> pd.DataFrame:
    """``wide`` (``bucket_ns`` and counts) with a row of zeros for every bucket between its first and last
    that holds none: a bucket without repeats counts 0, and the line goes down to it instead of joining its
    neighbours across the gap."""
    if wide.empty:
        return wide
    first, last = int(wide["bucket_ns"].min()), int(wide["bucket_ns"].max())
    if (last - first) // bucket_ns + 1 > MAX_FILLED_BUCKETS:
        return wide
    every = pd.DataFrame({"bucket_ns": range(first, last + 1, bucket_ns)})
    filled = every.merge(wide, on="bucket_ns", how="left").fillna(0)
    return filled.astype({c: "int64" for c in filled.columns})


def long_form(wide: pd.DataFrame) -> pd.DataFrame:
    """Per-bucket counts (``bucket_ns``, ``repeated_calls``, ``gentle_reminders``, ``detailed_reminders``) in long
    form: ``bucket``, ``series``, ``count``."""
    wide = wide.copy()
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
