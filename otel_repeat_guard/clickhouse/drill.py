"""The ClickHouse reader's per-row questions: reminder outcomes, model tokens, conversations, a run's calls.

A call's ``id`` here is its end (epoch ns): the table has no store order, and within one agent run the
calls end in the order the guard saw them. The next call of a run is read up to a day past the range's end.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.clickhouse.base import TableReader
from otel_repeat_guard.clickhouse.calls import SLACK_NS
from otel_repeat_guard.core.canonical import arguments_digest, canonical_or_none
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.reminders import arguments_preview
from otel_repeat_guard.store.queries.conversations import RECENT_MODEL_CALLS
from otel_repeat_guard.store.queries.filters import Filters, tiers_shown
from otel_repeat_guard.store.queries.runs import annotate_timeline

_FAR = 2**62
_OUTCOME_COLUMNS = ["tier", "tool", "agent", "model", "outcome", "reminders"]


def outcome_sql(no_next: str) -> str:
    """A reminder's outcome (``store.queries.reminders.outcome``, the one rule) from its reminded call ``x`` and
    the run's next tracked call ``n`` (``next_end``, ``next_run``, ``next_tool``, ``next_arguments``); ``no_next``
    (fixed SQL text) when the run has no next call."""
    return f"""multiIf(n.next_end IS NULL, {no_next},
                           n.next_run = x.run_length + 1, 'ignored',
                           n.next_run = 1 AND n.next_tool = x.tool AND n.next_arguments = x.arguments, 'ended',
                           'broken')"""


def _later(reader: TableReader, filters: Filters | None, **extra: object) -> dict[str, object]:
    """The filters' parameters, scanning on past the range's end (for what comes after a call)."""
    params: dict[str, object] = dict(reader.params(filters, **extra))  # type: ignore[arg-type]
    params["scan_hi"] = _FAR
    return params


def reminder_outcomes(reader: TableReader, filters: Filters, window: int) -> pd.DataFrame:
    tiers = tiers_shown(filters)
    if not tiers:
        return pd.DataFrame(columns=_OUTCOME_COLUMNS)
    where = reader.where(filters, "run_length >= 2", "reminder_tier IN {tiers:Array(String)}")
    sql = f"""WITH {reader.tools(filters)}, {reader.models(None)},
        reminded AS (
            SELECT reminder_tier AS tier, tool_name AS tool, agent, agent_key, run_length, end_ns, arguments_digest, arguments
            FROM tool {where} ORDER BY end_ns DESC, span_id DESC LIMIT {{window:Int64}}
        ),
        following AS (
            SELECT agent_key, end_ns AS next_end, run_length AS next_run, tool_name AS next_tool, arguments AS next_arguments
            FROM tool WHERE tracked AND agent_key IN (SELECT agent_key FROM reminded)
        ),
        runs AS ({reader.agent_run_keys()}),
        later AS (SELECT agent_key, start_ns, model FROM model WHERE agent_key IN (SELECT agent_key FROM reminded)),
        decided AS (
            SELECT x.tier AS tier, x.tool AS tool, x.agent AS agent, x.agent_key AS agent_key, x.end_ns AS end_ns,
                   {outcome_sql("if(x.agent_key IN (SELECT agent_key FROM runs), 'ended', 'open')")} AS outcome
            FROM reminded AS x ASOF LEFT JOIN following AS n ON n.agent_key = x.agent_key AND n.next_end > x.end_ns
        ),
        after AS (
            SELECT d.*, m.model AS model_after, m.start_ns AS after_ns
            FROM decided AS d ASOF LEFT JOIN later AS m ON m.agent_key = d.agent_key AND m.start_ns >= d.end_ns
        ),
        named AS (
            SELECT a.*, m.model AS model_before
            FROM after AS a ASOF LEFT JOIN later AS m ON m.agent_key = a.agent_key AND m.start_ns < a.end_ns
        )
        SELECT tier, tool, agent, if(after_ns IS NULL, model_before, model_after) AS model, outcome, count() AS reminders
        FROM named GROUP BY tier, tool, agent, model, outcome
        ORDER BY tier, tool, agent, model NULLS FIRST, outcome
        SETTINGS join_use_nulls = 1"""
    return reader.frame(sql, _later(reader, filters, tiers=tiers, window=int(window)))  # type: ignore[arg-type]


def _band(bands: Sequence[int]) -> tuple[str, dict[str, int]]:
    thresholds = sorted({int(b) for b in bands if int(b) > 0}, reverse=True)
    if not thresholds:
        return "0", {}
    cases = ", ".join(f"ifNull(input_tokens > {{band{i}:Int64}}, 0), {{band{i}:Int64}}" for i in range(len(thresholds)))
    return f"multiIf({cases}, 0)", {f"band{i}": t for i, t in enumerate(thresholds)}


def model_tokens(reader: TableReader, filters: Filters, bands: Sequence[int], *, wasted: bool) -> pd.DataFrame:
    band, band_params = _band(bands)
    where = reader.where(filters, tool=False)
    sums = """count() AS calls, sum(ifNull(input_tokens, 0)) AS input_tokens, sum(ifNull(output_tokens, 0)) AS output_tokens,
        sum(ifNull(total_tokens, ifNull(input_tokens, 0) + ifNull(output_tokens, 0))) AS total_tokens,
        sum(input_tokens IS NULL OR output_tokens IS NULL) AS unsplit_calls,
        sum(ifNull(cache_read_tokens, 0)) AS cache_read_tokens, sum(ifNull(cache_write_tokens, 0)) AS cache_write_tokens"""
    if not wasted:
        sql = f"""WITH {reader.models(filters)}
            SELECT agent, model, provider, {band} AS band, {sums} FROM model {where}
            GROUP BY agent, model, provider, band
            ORDER BY agent, model NULLS FIRST, provider NULLS FIRST, band"""
        return reader.frame(sql, reader.params(filters, **band_params))
    tools = " AND wasted_tool IN {tools:Array(String)}" if filters.tools else ""
    sql = f"""WITH {reader.models(filters)}, {reader.tools(None)},
        charged AS (SELECT trace_id, issuer AS span_id, any(tool_name) AS wasted_tool FROM tool
                    WHERE wasted AND issuer != '' GROUP BY trace_id, issuer),
        m AS (SELECT model.*, charged.wasted_tool AS wasted_tool FROM model
              INNER JOIN charged ON charged.trace_id = model.trace_id AND charged.span_id = model.span_id)
        SELECT wasted_tool AS tool, agent, model, provider, {band} AS band, {sums} FROM m {where}{tools}
        GROUP BY tool, agent, model, provider, band
        ORDER BY tool, agent, model NULLS FIRST, provider NULLS FIRST, band"""
    params = _later(reader, filters, **band_params)
    params["scan_lo"] = 0 if filters.start_ns is None else max(0, filters.start_ns - SLACK_NS)
    return reader.frame(sql, params)  # type: ignore[arg-type]


def conversations(reader: TableReader, filters: Filters, limit: int) -> pd.DataFrame:
    where = reader.where(filters, "conversation_id IS NOT NULL", tool=False)
    every = reader.models(None, "every", whole=True)
    calls = reader.where(filters, "tracked", "agent_key IN (SELECT agent_key FROM runs)")
    tiers = ", ".join(f"'{t}'" for t in tiers_shown(filters))  # fixed text: the known tiers only
    reminded = f"countIf(reminder_tier IN ({tiers}))" if tiers else "toUInt64(0)"
    having = "HAVING sum(ifNull(l.calls, 0)) > 0" if filters.tools else ""
    sql = f"""WITH {reader.models(filters)}, {every}, {reader.tools(filters)},
        recent AS (SELECT conversation_id FROM model {where} ORDER BY end_ns DESC LIMIT {{recent:Int64}}),
        listed AS (SELECT DISTINCT conversation_id FROM recent ORDER BY conversation_id LIMIT {{limit:Int64}}),
        runs AS (SELECT conversation_id, agent_key, count() AS model_calls, sum(ifNull(total_tokens, 0)) AS tokens,
                        max(end_ns) AS last_ns
                 FROM every WHERE conversation_id IN (SELECT conversation_id FROM listed) GROUP BY conversation_id, agent_key),
        loops AS (SELECT agent_key, count() AS calls, countIf(run_length >= 2) AS repeated_calls, {reminded} AS reminders
                  FROM tool {calls} GROUP BY agent_key)
        SELECT r.conversation_id AS conversation, count() AS runs, sum(r.model_calls) AS model_calls, sum(r.tokens) AS tokens,
               max(r.last_ns) AS last_ns, sum(ifNull(l.repeated_calls, 0)) AS repeated_calls,
               sum(ifNull(l.reminders, 0)) AS reminders
        FROM runs AS r LEFT JOIN loops AS l ON l.agent_key = r.agent_key
        GROUP BY r.conversation_id {having} ORDER BY max(r.last_ns) DESC, r.conversation_id
        SETTINGS join_use_nulls = 1"""
    params = reader.params(filters, recent=RECENT_MODEL_CALLS, limit=int(limit))
    frame = reader.frame(sql, params)
    frame["last"] = pd.to_datetime(frame["last_ns"], unit="ns", utc=True)
    return frame


def conversation_runs(reader: TableReader, conversation: str, filters: Filters | None = None) -> pd.DataFrame:
    chosen = filters or Filters()
    calls = reader.where(chosen, "tracked", "run_length >= 2", "agent_key IN (SELECT agent_key FROM runs)")
    sql = f"""WITH {reader.models(None, whole=True)}, {reader.tools(chosen)},
        runs AS (SELECT agent_key, ifNull(max(agent_name), agent_key) AS agent, min(start_ns) AS first_ns,
                        count() AS model_calls, sum(ifNull(total_tokens, 0)) AS tokens
                 FROM model WHERE conversation_id = {{conversation:String}} GROUP BY agent_key),
        loops AS (SELECT agent_key, count() AS repeated_calls FROM tool {calls} GROUP BY agent_key)
        SELECT r.agent_key AS agent_key, r.agent AS agent, r.first_ns AS first_ns, r.model_calls AS model_calls,
               r.tokens AS tokens, ifNull(l.repeated_calls, 0) AS repeated_calls
        FROM runs AS r LEFT JOIN loops AS l ON l.agent_key = r.agent_key ORDER BY first_ns, agent_key
        SETTINGS join_use_nulls = 1"""
    frame = reader.frame(sql, reader.params(chosen, conversation=conversation))
    frame["started"] = pd.to_datetime(frame["first_ns"], unit="ns", utc=True)
    return frame


def hotspot_runs(reader: TableReader, filters: Filters, tool: str, limit: int) -> pd.DataFrame:
    where = reader.where(filters, "tool_name = {tool:String}", "run_length >= 2")
    sql = f"""WITH {reader.tools(filters)},
        ordered AS (SELECT *, leadInFrame(run_length) OVER (PARTITION BY agent_key ORDER BY end_ns, span_id
                                                          ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS next_run
                    FROM tool WHERE tracked)
        SELECT end_ns AS end_id, agent_key, agent, run_length, end_ns, trace_id, toUInt8(error) AS error FROM ordered
        {where} AND NOT ifNull(next_run = run_length + 1, 0)
        ORDER BY run_length DESC, end_ns DESC LIMIT {{limit:Int64}}"""
    frame = reader.frame(sql, _later(reader, filters, tool=tool, limit=int(limit)))  # type: ignore[arg-type]
    frame["ended"] = pd.to_datetime(frame["end_ns"], unit="ns", utc=True)
    return frame


_LOOP_COLUMNS = ["end_id", "kind", "agent_key", "agent", "tool", "run_length", "period", "repetitions", "cycle_tools",
                 "end_ns", "trace_id", "error", "ended"]  # fmt: skip


def hotspot_loops(reader: TableReader, filters: Filters, tool: str, kinds: Sequence[str], limit: int) -> pd.DataFrame:
    """Not read from ClickHouse yet: the drill-down lists the repeats only (see docs/operations.md)."""
    return pd.DataFrame(columns=_LOOP_COLUMNS)


def agent_cycles(reader: TableReader, agent_key: str, limit: int) -> pd.DataFrame:
    return pd.DataFrame(columns=_LOOP_COLUMNS)


def cycle_calls(reader: TableReader, agent_key: str, end_id: int, period: int, repetitions: int) -> pd.DataFrame:
    return pd.DataFrame(columns=["id", "start_ns", "tool", "error", "trace_id", "span_id", "arguments", "copy", "step",
                                 "time", "status"])  # fmt: skip


def loop_start_ns(reader: TableReader, agent_key: str, end_id: int, run_length: int) -> int | None:
    sql = f"""WITH {reader.tools(None)}
        SELECT min(start_ns) AS start_ns, count() AS calls FROM (
            SELECT start_ns FROM tool WHERE agent_key = {{key:String}} AND end_ns <= {{end_id:Int64}} AND tracked
            ORDER BY end_ns DESC, span_id DESC LIMIT {{n:Int64}})"""
    params = reader.params(key=agent_key, end_id=int(end_id), n=int(run_length))
    params["scan_hi"] = int(end_id)
    frame = reader.frame(sql, params)
    return None if int(frame["calls"].iloc[0]) == 0 else int(frame["start_ns"].iloc[0])


def _preview(text: object, chars: int, *, canonical: bool) -> tuple[str | None, str | None]:
    """The stored preview (and, for arguments, the digest) of a span's text, as the embedded store makes them."""
    if not isinstance(text, str) or not text:
        return None, None
    if not canonical:
        return arguments_preview(text, chars), None
    value = canonical_or_none(text)
    if value is None:
        return None, None
    return arguments_preview(value.decode("utf-8", "surrogatepass"), chars), arguments_digest(value)


def run_timeline(reader: TableReader, agent_key: str, *, focus_ns: int | None, before: int, limit: int) -> pd.DataFrame:
    params = reader.params(key=agent_key, before=int(before), limit=int(limit))
    start = None
    if focus_ns is not None:
        sql = f"""WITH {reader.tools(None)}, {reader.models(None)}
            SELECT min(start_ns) AS start_ns, count() AS calls FROM (
                SELECT start_ns FROM (
                    SELECT start_ns FROM tool WHERE agent_key = {{key:String}} AND start_ns < {{at:Int64}}
                    UNION ALL SELECT start_ns FROM model WHERE agent_key = {{key:String}} AND start_ns < {{at:Int64}})
                ORDER BY start_ns DESC LIMIT {{before:Int64}})"""
        found = reader.frame(sql, {**params, "at": int(focus_ns)})
        start = int(found["start_ns"].iloc[0]) if int(found["calls"].iloc[0]) else int(focus_ns)
    sql = f"""WITH {reader.tools(None)}, {reader.models(None)}, runs AS ({reader.agent_run_keys()})
        SELECT * FROM (
            SELECT 'tool' AS kind, end_ns AS id, start_ns, end_ns, duration_ns / 1e6 AS duration_ms, tool_name AS name,
                   toNullable(toUInt8(tracked)) AS tracked, run_length, toUInt8(error) AS error, reminder_tier,
                   arguments_digest, CAST(NULL, 'Nullable(Int64)') AS input_tokens,
                   CAST(NULL, 'Nullable(Int64)') AS output_tokens, CAST(NULL, 'Nullable(Int64)') AS reasoning_tokens,
                   arguments AS text, trace_id, span_id
            FROM tool WHERE agent_key = {{key:String}} AND start_ns >= {{from_ns:Int64}}
            UNION ALL
            SELECT 'model', end_ns, start_ns, end_ns, duration_ns / 1e6, model, NULL, NULL, toUInt8(error), NULL, NULL,
                   input_tokens, output_tokens, reasoning_tokens, output, trace_id, span_id
            FROM model WHERE agent_key = {{key:String}} AND start_ns >= {{from_ns:Int64}}
        ) ORDER BY start_ns, kind, id LIMIT {{limit:Int64}}"""
    frame = reader.frame(sql, {**params, "from_ns": start or -(2**62)})
    chars = GuardConfig.from_env().arguments_preview_chars
    texts, digests = [], []
    for kind, text, digest in zip(frame["kind"], frame["text"], frame["arguments_digest"], strict=True):
        preview, computed = _preview(text, chars, canonical=kind == "tool")
        texts.append(preview)
        digests.append(digest if isinstance(digest, str) else computed)
    frame = frame.assign(text=pd.Series(texts, dtype=object), arguments_digest=pd.Series(digests, dtype=object))
    ended_sql = (
        f"WITH runs AS ({reader.agent_run_keys()}) SELECT count() AS ended FROM runs WHERE agent_key = {{key:String}}"
    )
    ended = int(reader.frame(ended_sql, params)["ended"].iloc[0]) > 0
    return annotate_timeline(frame, ended=ended and not len(frame) >= limit)
