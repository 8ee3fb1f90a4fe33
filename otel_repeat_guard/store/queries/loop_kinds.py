"""The loops of other kinds than repeats (cycles, no-progress runs, parallel duplicates), read from ``detections``."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.store.queries.filters import (
    AGENT,
    Filters,
    Param,
    bounded,
    in_list,
    narrowing,
    read,
    where,
)
from otel_repeat_guard.store.records import CYCLE, LOOP_KINDS, PARALLEL_DUPLICATE, REPEAT

# Under "all kinds", a call counts once: as a repeat if it is one (the roll-up counts it), else at its first
# other kind.
_FIRST_OTHER_KIND = """(c.run_length IS NULL OR c.run_length < 2) AND NOT EXISTS (
    SELECT 1 FROM detections AS e WHERE e.call_id = d.call_id AND e.kind != 'repeat' AND e.kind < d.kind)"""


def detection_kinds(filters: Filters) -> tuple[str, ...]:
    """The kinds read from ``detections`` (beside the repeats the roll-up and tool_calls already hold)."""
    if filters.kind is None:
        return tuple(k for k in LOOP_KINDS if k != REPEAT)
    return () if filters.kind == REPEAT else (filters.kind,)


def detection_rows(filters: Filters, template: str, *, tracked_only: bool) -> tuple[str, list[Param]]:
    """``template`` (with ``{counted}`` and ``{longest}``) over the detections of the kinds the filter adds,
    narrowed by the filters; "all kinds" counts each call once and keeps the longest run of identical calls."""
    kinds = detection_kinds(filters)
    counted, longest = (_FIRST_OTHER_KIND, "0") if filters.kind is None else ("1", "COALESCE(d.run_length, 0)")
    clauses, values = narrowing(filters, AGENT, tracked_only=tracked_only)
    bounded(clauses, values, filters.start_ns, filters.end_ns, "d.end_ns")
    clauses.insert(0, in_list("d.kind", kinds))
    sql = template.format(counted=counted, longest=longest) + "WHERE " + " AND ".join(clauses)
    return sql, [*kinds, *values]


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
    clauses, params = where(filters, in_list("d.kind", kinds) if kinds else "0", "c.tool_name = ?", ended="c.end_ns")
    frame = read(conn, _LOOPS.format(where=clauses), [*kinds, tool, *params, int(limit)])
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame


def agent_cycles(conn: sqlite3.Connection, agent_key: str, limit: int = 25) -> pd.DataFrame:
    """The cycles of one agent run, each at the call completing its last copy (columns as :func:`hotspot_loops`)."""
    frame = read(conn, _LOOPS.format(where="WHERE c.agent_key = ? AND d.kind = ?"), [agent_key, CYCLE, int(limit)])
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
    frame = read(conn, _CYCLE_CALLS, [agent_key, int(end_id), PARALLEL_DUPLICATE, calls])
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
