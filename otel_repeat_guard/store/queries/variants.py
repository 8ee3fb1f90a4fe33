"""Which wording breaks loops: the reminders of an experiment (``reminder_variants``) by variant and model.

A reminder's outcome is decided as in :mod:`otel_repeat_guard.store.queries.reminders`. A loop is one run of
identical calls in an agent run: its calls from the run's last call with a run length of 1 to the call before the
next one. What a loop still wasted after its first reminder (in the window) is its calls after that reminder (its
longest run length less the reminder's) and the tokens of the model calls charged as wasted that started between
the reminder's end and the start of the loop's last call (the model calls that asked for those calls).
"""

from __future__ import annotations

import sqlite3

import pandas as pd

from otel_repeat_guard.core.experiments import VariantCounts
from otel_repeat_guard.store.queries.filters import Filters, in_list, read, tiers_shown, where
from otel_repeat_guard.store.queries.reminders import REMINDER_WINDOW

VARIANT_COLUMNS = ["variant", "model", "reminders", "broken", "ignored", "loops", "wasted_calls", "wasted_tokens"]
"""One row per variant and model (the model that received the reminder; a loop's, its first reminder's)."""

TOKENS = "COALESCE(m.total_tokens, COALESCE(m.input_tokens, 0) + COALESCE(m.output_tokens, 0))"


def reminder_variants(conn: sqlite3.Connection, filters: Filters, window: int = REMINDER_WINDOW) -> pd.DataFrame:
    """Of the latest ``window`` reminders the filters select that carry a variant: per variant and model, the
    reminders, how many were broken and ignored, the loops they reminded and what those still wasted (see the
    module). :func:`otel_repeat_guard.core.experiments.variant_table` turns it into the page's table."""
    tiers = tiers_shown(filters)
    if not tiers:
        return pd.DataFrame(columns=VARIANT_COLUMNS)
    clauses, params = where(filters, "run_length >= 2", in_list("reminder_tier", tiers), "reminder_variant IS NOT NULL")
    sql = f"""
        WITH reminded AS MATERIALIZED (
            SELECT r.id, r.reminder_variant AS variant, r.tool_name AS tool, r.agent_key,
                   r.run_length, r.end_ns, r.arguments_digest,
                   (SELECT n.id FROM tool_calls AS n
                    WHERE n.agent_key = r.agent_key AND n.id > r.id AND n.tracked ORDER BY n.id LIMIT 1) AS next_id
            FROM tool_calls AS r INDEXED BY tool_calls_repeats_by_time {clauses}
            ORDER BY r.end_ns DESC LIMIT ?
        ),
        decided AS (
            SELECT x.*,
                   CASE
                       WHEN n.id IS NULL THEN 'open'
                       WHEN n.run_length = x.run_length + 1 THEN 'ignored'
                       WHEN n.run_length = 1 AND n.tool_name = x.tool AND n.arguments_digest = x.arguments_digest
                           THEN 'ended'
                       ELSE 'broken'
                   END AS outcome,
                   CASE
                       WHEN EXISTS (SELECT 1 FROM model_calls AS m WHERE m.agent_key = x.agent_key AND m.start_ns >= x.end_ns)
                       THEN (SELECT m.model FROM model_calls AS m
                             WHERE m.agent_key = x.agent_key AND m.start_ns >= x.end_ns ORDER BY m.start_ns LIMIT 1)
                       ELSE (SELECT m.model FROM model_calls AS m
                             WHERE m.agent_key = x.agent_key AND m.start_ns < x.end_ns ORDER BY m.start_ns DESC LIMIT 1)
                   END AS model
            FROM reminded AS x LEFT JOIN tool_calls AS n ON n.id = x.next_id
        ),
        calls AS MATERIALIZED (
            SELECT c.id, c.agent_key, c.start_ns, c.run_length,
                   SUM(COALESCE(c.run_length, 1) < 2) OVER (PARTITION BY c.agent_key ORDER BY c.id) AS loop_no
            FROM tool_calls AS c WHERE c.tracked AND c.agent_key IN (SELECT agent_key FROM reminded)
        ),
        extent AS (
            SELECT agent_key, loop_no, MAX(run_length) AS longest, MAX(start_ns) AS last_start
            FROM calls GROUP BY agent_key, loop_no
        ),
        placed AS (SELECT d.*, c.loop_no FROM decided AS d JOIN calls AS c ON c.id = d.id),
        firsts AS (
            SELECT p.variant, p.model, p.agent_key, p.end_ns, p.run_length, e.longest, e.last_start
            FROM placed AS p JOIN extent AS e ON e.agent_key = p.agent_key AND e.loop_no = p.loop_no
            WHERE NOT EXISTS (SELECT 1 FROM placed AS q
                              WHERE q.agent_key = p.agent_key AND q.loop_no = p.loop_no AND q.run_length < p.run_length)
        ),
        waste AS (
            SELECT variant, model, COUNT(*) AS loops, SUM(longest - run_length) AS wasted_calls,
                   SUM((SELECT COALESCE(SUM({TOKENS}), 0) FROM model_calls AS m
                        WHERE m.agent_key = f.agent_key AND m.wasted_tool IS NOT NULL
                          AND m.start_ns >= f.end_ns AND m.start_ns < f.last_start)) AS wasted_tokens
            FROM firsts AS f GROUP BY variant, model
        ),
        outcomes AS (
            SELECT variant, model, COUNT(*) AS reminders, SUM(outcome = 'broken') AS broken,
                   SUM(outcome = 'ignored') AS ignored
            FROM decided GROUP BY variant, model
        )
        SELECT o.variant, o.model, o.reminders, o.broken, o.ignored, COALESCE(w.loops, 0) AS loops,
               COALESCE(w.wasted_calls, 0) AS wasted_calls, COALESCE(w.wasted_tokens, 0) AS wasted_tokens
        FROM outcomes AS o LEFT JOIN waste AS w ON w.variant = o.variant AND w.model IS o.model
        ORDER BY o.variant, o.model IS NULL, o.model
    """
    frame = read(conn, sql, [*tiers, *params, int(window)])
    return frame.astype({c: "int64" for c in VARIANT_COLUMNS[2:]})


def variant_counts(frame: pd.DataFrame) -> list[VariantCounts]:
    """A reader's ``reminder_variants`` answer as the pure core's counts (a missing model as None)."""
    return [
        VariantCounts(
            variant=str(row["variant"]),
            model=row["model"] if isinstance(row["model"], str) else None,
            reminders=int(row["reminders"]),
            broken=int(row["broken"]),
            ignored=int(row["ignored"]),
            loops=int(row["loops"]),
            wasted_calls=int(row["wasted_calls"]),
            wasted_tokens=int(row["wasted_tokens"]),
        )
        for row in frame.to_dict("records")
    ]
