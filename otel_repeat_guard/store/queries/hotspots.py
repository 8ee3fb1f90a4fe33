"""Loop hotspots by tool and by agent, and the model calls' tokens behind them (by agent, model and tool)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.store.queries.filters import (
    MODEL_AGENT,
    Filters,
    Param,
    bounded,
    chosen,
    clause,
    day_split,
    in_days,
    one,
    read,
)
from otel_repeat_guard.store.queries.overview import figures, tier_sum
from otel_repeat_guard.store.schema import ROLLED_UP_MODEL_CALL, SMALL_INPUT_TOKENS


def _grouped(conn: sqlite3.Connection, filters: Filters, key: str, label: str) -> pd.DataFrame:
    parts, params = figures(filters, tracked_only=True)
    sql = f"""
        {parts}
        SELECT
            {key} AS {label},
            SUM(repeated_calls) AS repeated_calls,
            {tier_sum(filters, "gentle")} + {tier_sum(filters, "detailed")} AS reminders,
            MAX(longest_run) AS longest_run,
            TOTAL(repeated_ns) / 1e9 AS wasted_seconds,
            SUM(calls) AS calls
        FROM parts
        GROUP BY {key}
        HAVING SUM(repeated_calls) > 0  -- the sum: a bare column would be one arbitrary row of the group
        ORDER BY repeated_calls DESC, {label}
    """
    frame = read(conn, sql, params)
    frame["repeated_share"] = frame["repeated_calls"] / frame["calls"]
    return frame


def hotspots_by_tool(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """Tools with repeated calls: repeats, reminders, longest run, wasted seconds, calls, repeated share."""
    return _grouped(conn, filters, "tool_name", "tool")


def hotspots_by_agent(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    """The same figures per readable agent name."""
    return _grouped(conn, filters, "agent", "agent")


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


_MODEL_ROW = f"""
    SELECT {MODEL_AGENT} AS agent, m.model, m.provider, m.wasted_tool, {{band}} AS band,
           1 AS calls, COALESCE(m.input_tokens, 0) AS input_tokens, COALESCE(m.output_tokens, 0) AS output_tokens,
           COALESCE(m.total_tokens, COALESCE(m.input_tokens, 0) + COALESCE(m.output_tokens, 0)) AS total_tokens,
           m.input_tokens IS NULL OR m.output_tokens IS NULL AS unsplit_calls,
           COALESCE(m.cache_read_tokens, 0) AS cache_read_tokens, COALESCE(m.cache_write_tokens, 0) AS cache_write_tokens
    FROM model_calls AS m {{indexed}}
"""
_MODEL_ROLLUP_ROW = """
    SELECT agent, NULLIF(model, '') AS model, NULLIF(provider, '') AS provider, NULLIF(wasted_tool, '') AS wasted_tool,
           0 AS band, calls, input_tokens, output_tokens, total_tokens, unsplit_calls, cache_read_tokens,
           cache_write_tokens
    FROM model_rollup
"""
# The model calls the roll-up leaves out (agent not final yet, or more input tokens), on ``m``.
_NOT_ROLLED_UP = f"NOT ({ROLLED_UP_MODEL_CALL.replace('agent_pending', 'm.agent_pending').replace('input_tokens', 'm.input_tokens')})"


def _model_parts(filters: Filters, bands: Sequence[int], *, wasted: bool) -> tuple[str, list[Param]]:
    """A CTE ``parts`` of model-call figures (one row per rolled-up group or per call) whose sums are the
    figures of the model calls in the filters' range: ``model_rollup`` for whole days, where it is exact
    (every band starts above SMALL_INPUT_TOKENS), and ``model_calls`` for the partial days at the range's
    edges and for the calls the roll-up leaves out (agent not final yet, or more input tokens)."""
    band, band_params = _band(bands)
    use_rollup = all(int(b) >= SMALL_INPUT_TOKENS for b in bands)
    days, edges = day_split(filters) if use_rollup else (None, [(filters.start_ns, filters.end_ns)])

    def narrowing(agent: str, tool: str) -> tuple[list[str], list[Param]]:
        clauses: list[str] = [f"{tool} IS NOT NULL AND {tool} != ''"] if wasted else []
        values: list[Param] = []
        chosen(filters, clauses, values, "service_name", agent, tool if wasted else None)
        return clauses, values

    branches: list[str] = []
    params: list[Param] = []
    if days is not None:
        clauses, values = narrowing("agent", "wasted_tool")
        in_days(clauses, values, days)
        branches.append(_MODEL_ROLLUP_ROW + clause(clauses))
        params.extend(values)
        # the calls of those days the roll-up leaves out
        clauses, values = narrowing(MODEL_AGENT, "m.wasted_tool")
        clauses.insert(0, _NOT_ROLLED_UP)
        first, stop = days
        for condition, bound in (("m.end_ns >= ?", first), ("m.end_ns < ?", stop)):
            if bound is not None:
                clauses.append(condition)
                values.append(bound)
        branches.append(_MODEL_ROW.format(band=band, indexed="INDEXED BY model_calls_unrolled") + clause(clauses))
        params.extend([*band_params, *values])
    for low, high in edges:
        clauses, values = narrowing(MODEL_AGENT, "m.wasted_tool")
        bounded(clauses, values, low, high, "m.end_ns")
        branches.append(_MODEL_ROW.format(band=band, indexed="INDEXED BY model_calls_end") + clause(clauses))
        params.extend([*band_params, *values])
    return "WITH parts AS (" + " UNION ALL ".join(branches) + ")", params


_PART_SUMS = """
    SUM(calls) AS calls, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
    SUM(total_tokens) AS total_tokens, SUM(unsplit_calls) AS unsplit_calls,
    SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS cache_write_tokens
"""


def model_tokens(conn: sqlite3.Connection, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame:
    """Every model call's tokens, per agent, model, provider and price band: ``agent``, ``model``,
    ``provider``, ``band``, ``calls``, ``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``unsplit_calls`` (calls without separate input and output counts), ``cache_read_tokens`` and
    ``cache_write_tokens`` (parts of the input tokens). Time, service and agent narrow the model calls; a
    tool filter does not (a model call is of no tool)."""
    parts, params = _model_parts(filters, bands, wasted=False)
    sql = (
        f"{parts} SELECT agent, model, provider, band, {_PART_SUMS} FROM parts GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    return read(conn, sql, params)


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
    return read(conn, sql, params)


def has_model_calls(conn: sqlite3.Connection) -> bool:
    """Whether the store holds any model call (so the token figures mean something)."""
    return bool(one(conn, "SELECT EXISTS (SELECT 1 FROM model_calls) AS held", [])["held"])
