"""An experiment's reminders by wording variant and model, from the Collector's table: the embedded store's
:func:`otel_repeat_guard.store.queries.variants.reminder_variants`, the same figures.

A call's order in its run is its end (then its span id), as everywhere in the ClickHouse reader; a loop is numbered
by how many of its run's calls with a run length of 1 came up to it, as the store numbers it by id. A reminder's
outcome is the drill-down's rule (``drill.outcome_sql``); with no next call it is ``open`` whether the run ended or
not, as in the store's table (only ``broken`` and ``ignored`` are counted: no scan of the ended runs is needed).
"""

from __future__ import annotations

import pandas as pd

from otel_repeat_guard.clickhouse.base import TableReader
from otel_repeat_guard.clickhouse.drill import outcome_sql
from otel_repeat_guard.store.queries.filters import Filters, tiers_shown
from otel_repeat_guard.store.queries.variants import VARIANT_COLUMNS

_FAR = 2**62
_TOKENS = "ifNull(total_tokens, ifNull(input_tokens, 0) + ifNull(output_tokens, 0))"


def reminder_variants(reader: TableReader, filters: Filters, window: int) -> pd.DataFrame:
    tiers = tiers_shown(filters)
    if not tiers:
        return pd.DataFrame(columns=VARIANT_COLUMNS)
    where = reader.where(
        filters, "run_length >= 2", "reminder_tier IN {tiers:Array(String)}", "reminder_variant IS NOT NULL"
    )
    sql = f"""WITH {reader.tools(filters)}, {reader.models(None)},
        reminded AS (
            SELECT reminder_variant AS variant, tool_name AS tool, agent_key, run_length, end_ns, span_id, arguments
            FROM tool {where} ORDER BY end_ns DESC, span_id DESC LIMIT {{window:Int64}}
        ),
        calls AS (
            SELECT agent_key, end_ns, span_id, start_ns, run_length, tool_name, arguments,
                   sum(toUInt64(ifNull(run_length, 1) < 2)) OVER (PARTITION BY agent_key ORDER BY end_ns, span_id
                                                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS loop_no
            FROM tool WHERE tracked AND agent_key IN (SELECT agent_key FROM reminded)
        ),
        following AS (
            SELECT agent_key, end_ns AS next_end, run_length AS next_run, tool_name AS next_tool,
                   arguments AS next_arguments
            FROM calls
        ),
        later AS (SELECT agent_key, start_ns, model FROM model WHERE agent_key IN (SELECT agent_key FROM reminded)),
        decided AS (
            SELECT x.variant AS variant, x.agent_key AS agent_key, x.end_ns AS end_ns, x.span_id AS span_id,
                   x.run_length AS run_length,
                   {outcome_sql("'open'")} AS outcome
            FROM reminded AS x ASOF LEFT JOIN following AS n ON n.agent_key = x.agent_key AND n.next_end > x.end_ns
        ),
        after AS (
            SELECT d.*, m.model AS model_after, m.start_ns AS after_ns
            FROM decided AS d ASOF LEFT JOIN later AS m ON m.agent_key = d.agent_key AND m.start_ns >= d.end_ns
        ),
        named AS (
            SELECT a.*, if(a.after_ns IS NULL, m.model, a.model_after) AS model
            FROM after AS a ASOF LEFT JOIN later AS m ON m.agent_key = a.agent_key AND m.start_ns < a.end_ns
        ),
        placed AS (
            SELECT p.*, c.loop_no AS loop_no FROM named AS p
            INNER JOIN calls AS c ON c.agent_key = p.agent_key AND c.end_ns = p.end_ns AND c.span_id = p.span_id
        ),
        extent AS (
            SELECT agent_key, loop_no, max(run_length) AS longest, max(start_ns) AS last_start
            FROM calls GROUP BY agent_key, loop_no
        ),
        firsts AS (
            SELECT f.variant AS variant, f.model AS model, f.agent_key AS agent_key, f.end_ns AS end_ns,
                   e.longest - f.run_length AS wasted_calls, e.last_start AS last_start
            FROM (SELECT * FROM placed ORDER BY run_length LIMIT 1 BY agent_key, loop_no) AS f
            INNER JOIN extent AS e ON e.agent_key = f.agent_key AND e.loop_no = f.loop_no
        ),
        charged AS (
            SELECT model.agent_key AS agent_key, model.start_ns AS start_ns, {_TOKENS} AS tokens FROM model
            WHERE (model.trace_id, model.span_id) IN (SELECT trace_id, issuer FROM tool WHERE wasted AND issuer != '')
              AND model.agent_key IN (SELECT agent_key FROM reminded)
        ),
        spent AS (
            SELECT f.variant AS variant, f.model AS model, f.agent_key AS agent_key, f.end_ns AS end_ns,
                   any(f.wasted_calls) AS wasted_calls,
                   sumIf(c.tokens, c.start_ns >= f.end_ns AND c.start_ns < f.last_start) AS tokens
            FROM firsts AS f LEFT JOIN charged AS c ON c.agent_key = f.agent_key
            GROUP BY variant, model, agent_key, end_ns
        ),
        waste AS (
            SELECT variant, ifNull(model, '') AS model_key, count() AS loops, sum(wasted_calls) AS wasted_calls, sum(tokens) AS wasted_tokens
            FROM spent GROUP BY variant, model_key
        ),
        outcomes AS (
            SELECT variant, model, count() AS reminders, countIf(outcome = 'broken') AS broken,
                   countIf(outcome = 'ignored') AS ignored
            FROM named GROUP BY variant, model
        )
        SELECT o.variant AS variant, o.model AS model, o.reminders AS reminders, o.broken AS broken,
               o.ignored AS ignored, ifNull(w.loops, 0) AS loops, ifNull(w.wasted_calls, 0) AS wasted_calls,
               ifNull(w.wasted_tokens, 0) AS wasted_tokens
        FROM outcomes AS o LEFT JOIN waste AS w ON w.variant = o.variant AND w.model_key = ifNull(o.model, '')
        ORDER BY variant, model NULLS LAST
        SETTINGS join_use_nulls = 1"""
    params = dict(reader.params(filters, tiers=tiers, window=int(window)))
    params["scan_hi"] = _FAR  # what came after a reminder: past the range's end
    frame = reader.frame(sql, params)
    return frame.astype({c: "int64" for c in VARIANT_COLUMNS[2:]})[VARIANT_COLUMNS]
