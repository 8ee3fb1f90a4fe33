"""The store's tables, indexes and roll-ups, and the upgrades that bring an older file to them.

Version history:

1. ``tool_calls`` and its side tables.
2. Adds ``call_rollup`` (per UTC day x service x agent x tool x tracked: counts, sums and
   the longest run), kept by the exporter in the same transaction as the calls, so the
   dashboard's headline and hotspot tables read about one row per group and day instead
   of every call; and widens the repeats index so the over-time chart never reads the
   table. A version 1 file is upgraded in place the first time an exporter opens it.
3. ``tool_calls.unguarded_reason``, and one row per span (a unique index on trace and span id).
4. ``model_calls`` (one row per model-call span: model, provider, tokens, conversation, agent run)
   and ``model_call_outputs`` (a preview of what the model answered, when arguments may be kept);
   ``store_info`` (who made the store: the demo marks its own, so a new demo may replace it);
   and agent filter entries of run keys that were later named are removed.
5. ``detections``: one row per tool call and kind of detection (repeat, cycle, no_progress,
   parallel_duplicate) with its numbers and the reminder of that kind; repeats are backfilled from
   ``tool_calls``, and the kinds seen are listed in ``dimensions`` (kind ``loop_kind``).
6. ``model_calls.cache_read_tokens`` and ``cache_write_tokens`` (and their roll-up sums).
7. ``undelivered_reminders``: one row per reminder the guard handed on that no adapter took before the run's next
   model call ended (its ``repeat_tool_guard.undelivered`` event on that model call's span), by model call.
8. ``tool_calls.reminder_variant``: the wording variant of the call's repeat reminder while
   ``reminder_variants`` runs an experiment (NULL otherwise, and for every call stored before).
9. ``model_calls.reasoning_tokens`` (and its roll-up sum): the part of a model call's output spent reasoning.
"""

from __future__ import annotations

import sqlite3

TABLES = (
    """CREATE TABLE IF NOT EXISTS repeat_guard_schema (
        application TEXT NOT NULL,
        version INTEGER NOT NULL
    )""",
    # One row per tool call. Kept narrow (no free text) so the dashboard's scans stay fast.
    """CREATE TABLE IF NOT EXISTS tool_calls (
        id INTEGER PRIMARY KEY,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        duration_ns INTEGER NOT NULL,
        service_name TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        parent_span_id TEXT,
        agent_key TEXT NOT NULL,
        agent_name TEXT,
        agent_known INTEGER NOT NULL,
        agent_pending INTEGER NOT NULL,
        tool_name TEXT NOT NULL,
        tracked INTEGER NOT NULL,
        arguments_digest TEXT,
        error INTEGER NOT NULL,
        run_length INTEGER,
        reminder_tier TEXT,
        reminder_threshold INTEGER,
        unguarded_reason TEXT,
        reminder_variant TEXT
    )""",
    # Argument text, only when the exporter was allowed to keep it (store_arguments=True).
    """CREATE TABLE IF NOT EXISTS tool_call_arguments (
        call_id INTEGER PRIMARY KEY REFERENCES tool_calls(id),
        preview TEXT NOT NULL
    )""",
    # The services, agents and tools seen, for the dashboard's filter lists (kind, value).
    """CREATE TABLE IF NOT EXISTS dimensions (
        kind TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, value)
    ) WITHOUT ROWID""",
    # Per UTC day (bucket_ns = start of the day) x service x agent label x tool x tracked:
    # what the dashboard's headline and hotspot tables sum. ``agent`` is the label the
    # dashboard shows, COALESCE(agent_name, agent_key); ``longest_run`` is 0 when no call
    # of the group has a run length. Kept equal to ROLLUP_FROM_CALLS by the exporter.
    """CREATE TABLE IF NOT EXISTS call_rollup (
        bucket_ns INTEGER NOT NULL,
        service_name TEXT NOT NULL,
        agent TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tracked INTEGER NOT NULL,
        calls INTEGER NOT NULL,
        repeated_calls INTEGER NOT NULL,
        gentle_reminders INTEGER NOT NULL,
        detailed_reminders INTEGER NOT NULL,
        longest_run INTEGER NOT NULL,
        repeated_ns INTEGER NOT NULL,
        PRIMARY KEY (bucket_ns, service_name, agent, tool_name, tracked)
    ) WITHOUT ROWID""",
    # Agent-run spans, used to give first calls (which carry no guard event) their agent.
    """CREATE TABLE IF NOT EXISTS agent_runs (
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        agent_key TEXT NOT NULL,
        agent_name TEXT,
        PRIMARY KEY (trace_id, span_id)
    ) WITHOUT ROWID""",
    *(
        # One row per model-call span. The agent columns work as in tool_calls (the guard's run; without
        # its facts, a provisional key until the agent-run span arrives), so a run's model calls and tool
        # calls share its key.
        """CREATE TABLE IF NOT EXISTS model_calls (
        id INTEGER PRIMARY KEY,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        duration_ns INTEGER NOT NULL,
        service_name TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        parent_span_id TEXT,
        agent_key TEXT NOT NULL,
        agent_name TEXT,
        agent_known INTEGER NOT NULL,
        agent_pending INTEGER NOT NULL,
        model TEXT,
        provider TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        total_tokens INTEGER,
        conversation_id TEXT,
        error INTEGER NOT NULL,
        wasted_tool TEXT,
        cache_read_tokens INTEGER,
        cache_write_tokens INTEGER,
        reasoning_tokens INTEGER
    )""",
        # Per UTC day x service x agent label x model x provider x wasted tool ('' for none): the token sums
        # of the model calls whose agent is final and whose input is at most SMALL_INPUT_TOKENS (below every
        # price tier, so one price band). The rest (pending or larger calls) are read from model_calls.
        """CREATE TABLE IF NOT EXISTS model_rollup (
        bucket_ns INTEGER NOT NULL,
        service_name TEXT NOT NULL,
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        provider TEXT NOT NULL,
        wasted_tool TEXT NOT NULL,
        calls INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        unsplit_calls INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (bucket_ns, service_name, agent, model, provider, wasted_tool)
    ) WITHOUT ROWID""",
        # What the model answered, as a bounded preview; only when the exporter may keep text.
        """CREATE TABLE IF NOT EXISTS model_call_outputs (
        call_id INTEGER PRIMARY KEY REFERENCES model_calls(id),
        preview TEXT NOT NULL
    )""",
        # Facts about the store itself: ('origin', 'demo') marks a store the demo made and may replace.
        """CREATE TABLE IF NOT EXISTS store_info (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    ),
    # Schema 5. One row per tool call and kind of detection: the guard's repeat, cycle, no_progress or
    # parallel_duplicate event, and the reminder of that kind if the call fired one. ``end_ns`` is the call's
    # (it never changes), so one kind's detections are read by time without the calls. ``run_length`` is
    # the calls spanned so far (the run, period x repetitions, the same-outcome run; NULL for a duplicate).
    """CREATE TABLE IF NOT EXISTS detections (
        call_id INTEGER NOT NULL REFERENCES tool_calls(id),
        kind TEXT NOT NULL,
        end_ns INTEGER NOT NULL,
        run_length INTEGER,
        period INTEGER,
        repetitions INTEGER,
        cycle_tools TEXT,
        outcome_digest TEXT,
        reminder_tier TEXT,
        reminder_threshold INTEGER,
        PRIMARY KEY (call_id, kind)
    ) WITHOUT ROWID""",
    # Schema 7. One row per reminder that did not reach the model: the model call that went out without it, the
    # reminder's own call (its tool span id), tool, tier, and why (decide/delivery.py's reasons).
    """CREATE TABLE IF NOT EXISTS undelivered_reminders (
        model_call_id INTEGER NOT NULL REFERENCES model_calls(id),
        reminder_span_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tier TEXT NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (model_call_id, reminder_span_id, tier)
    ) WITHOUT ROWID""",
)

SMALL_INPUT_TOKENS = 32_000
"""Model calls with at most this many input tokens are summed in ``model_rollup``: every price tier in
genai-prices starts above it, so they are all priced at their model's base rate (the dashboard reads
every call from ``model_calls`` instead if a lower tier ever appears)."""
ROLLED_UP_MODEL_CALL = f"agent_pending = 0 AND COALESCE(input_tokens, 0) <= {SMALL_INPUT_TOKENS}"
"""Which model calls ``model_rollup`` holds (fixed SQL text)."""

# Schema 4: model calls by span (one row each), by run in time order (the call that issued a tool
# call, the model a reminder reached, a run's timeline), by time, by pending parent, and by conversation.
MODEL_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS model_calls_span_unique ON model_calls(trace_id, span_id)",
    "CREATE INDEX IF NOT EXISTS model_calls_agent ON model_calls(agent_key, start_ns)",
    # Covers the token sums and the recent conversations, filters included, in one index scan by time.
    "CREATE INDEX IF NOT EXISTS model_calls_end ON model_calls(end_ns, service_name, model, provider,"
    " input_tokens, output_tokens, total_tokens, agent_name, agent_key, conversation_id, wasted_tool)",
    # The model calls of one parent span in time order: a tool call's issuer, and the calls a run span resolves.
    "CREATE INDEX IF NOT EXISTS model_calls_parent ON model_calls(trace_id, parent_span_id, start_ns)",
    # The model calls model_rollup leaves out, by time (see ROLLED_UP_MODEL_CALL).
    f"CREATE INDEX IF NOT EXISTS model_calls_unrolled ON model_calls(end_ns) WHERE NOT ({ROLLED_UP_MODEL_CALL})",
    "CREATE INDEX IF NOT EXISTS model_calls_conversation ON model_calls(conversation_id, start_ns)"
    " WHERE conversation_id IS NOT NULL",
    # Whether a run's span has been exported (a reminder with no next call then ended with its run).
    "CREATE INDEX IF NOT EXISTS agent_runs_key ON agent_runs(agent_key)",
    # Whether an agent label is still in use, when a run span renames its calls (the filter list).
    "CREATE INDEX IF NOT EXISTS call_rollup_agent ON call_rollup(agent)",
)

# Schema 5: one kind's detections by time (the dashboard's loop-kind filter and its over-time chart).
DETECTION_INDEXES = ("CREATE INDEX IF NOT EXISTS detections_kind ON detections(kind, end_ns)",)

INDEXES = (
    # One row per span, whatever the number of concurrent exporters and ingests: inserts are OR IGNORE.
    "CREATE UNIQUE INDEX IF NOT EXISTS tool_calls_span_unique ON tool_calls(trace_id, span_id)",
    "CREATE INDEX IF NOT EXISTS tool_calls_end ON tool_calls(end_ns)",
    "CREATE INDEX IF NOT EXISTS tool_calls_tool_repeats ON tool_calls(tool_name, run_length) WHERE run_length >= 2",
    "CREATE INDEX IF NOT EXISTS tool_calls_agent ON tool_calls(agent_key, id)",
    "CREATE INDEX IF NOT EXISTS tool_calls_parent ON tool_calls(trace_id, parent_span_id) WHERE agent_pending = 1",
    # Covers the over-time chart, filters included: repeated calls and their reminder tier, by time.
    "CREATE INDEX IF NOT EXISTS tool_calls_repeats_by_time ON tool_calls"
    "(end_ns, reminder_tier, service_name, tool_name, agent_name, agent_key) WHERE run_length >= 2",
)

ROLLUP_BUCKET_NS = 86400 * 1_000_000_000
"""The roll-up's time bucket: one UTC day. Coarse enough to be ~10x smaller than the calls
on a busy store; the dashboard reads the partial days at a range's edges from the calls."""

# The roll-up computed from the calls themselves: how a version 1 file is upgraded, how a
# bulk load fills it, and what the exporter's incremental upkeep must always equal.
ROLLUP_FROM_CALLS = f"""
SELECT end_ns - end_ns % {ROLLUP_BUCKET_NS} AS bucket_ns, service_name,
       COALESCE(agent_name, agent_key) AS agent, tool_name, tracked,
       COUNT(*) AS calls,
       COUNT(*) FILTER (WHERE run_length >= 2) AS repeated_calls,
       COUNT(*) FILTER (WHERE reminder_tier = 'gentle') AS gentle_reminders,
       COUNT(*) FILTER (WHERE reminder_tier = 'detailed') AS detailed_reminders,
       COALESCE(MAX(run_length), 0) AS longest_run,
       COALESCE(SUM(duration_ns) FILTER (WHERE run_length >= 2), 0) AS repeated_ns
FROM tool_calls
GROUP BY 1, 2, 3, 4, 5
"""


# The model roll-up computed from the model calls (what the exporter's upkeep must always equal).
MODEL_ROLLUP_FROM_CALLS = f"""
SELECT end_ns - end_ns % {ROLLUP_BUCKET_NS} AS bucket_ns, service_name, COALESCE(agent_name, agent_key) AS agent,
       COALESCE(model, '') AS model, COALESCE(provider, '') AS provider, COALESCE(wasted_tool, '') AS wasted_tool,
       COUNT(*) AS calls, COALESCE(SUM(input_tokens), 0) AS input_tokens,
       COALESCE(SUM(output_tokens), 0) AS output_tokens,
       COALESCE(SUM(COALESCE(total_tokens, COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0))), 0)
           AS total_tokens,
       COUNT(*) FILTER (WHERE input_tokens IS NULL OR output_tokens IS NULL) AS unsplit_calls,
       COALESCE(SUM(cache_read_tokens), 0) AS cache_read_tokens,
       COALESCE(SUM(cache_write_tokens), 0) AS cache_write_tokens,
       COALESCE(SUM(reasoning_tokens), 0) AS reasoning_tokens
FROM model_calls
WHERE {ROLLED_UP_MODEL_CALL}
GROUP BY 1, 2, 3, 4, 5, 6
"""


def rebuild_rollup(conn: sqlite3.Connection) -> None:
    """Recompute ``call_rollup`` and ``model_rollup`` from the calls (call inside a write transaction)."""
    conn.execute("DELETE FROM call_rollup")
    conn.execute(f"INSERT INTO call_rollup {ROLLUP_FROM_CALLS}")
    if "model_rollup" in user_tables(conn):
        conn.execute("DELETE FROM model_rollup")
        conn.execute(f"INSERT INTO model_rollup {MODEL_ROLLUP_FROM_CALLS}")


def _upgrade_from_1(conn: sqlite3.Connection) -> None:
    for statement in (*TABLES, *INDEXES):
        conn.execute(statement)
    conn.execute("DROP INDEX IF EXISTS tool_calls_repeats")  # replaced by tool_calls_repeats_by_time
    rebuild_rollup(conn)


def _upgrade_from_2(conn: sqlite3.Connection) -> None:
    """Schema 3: why the guard could not compare a call (``no_arguments``, ``no_agent``, ``no_result``), else NULL;
    and one row per span, enforced by a unique index (rows two ingests duplicated are removed first)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(tool_calls)")}
    if "unguarded_reason" not in columns:
        conn.execute("ALTER TABLE tool_calls ADD COLUMN unguarded_reason TEXT")
    duplicates = "SELECT MIN(id) FROM tool_calls GROUP BY trace_id, span_id"
    conn.execute(f"DELETE FROM tool_call_arguments WHERE call_id NOT IN ({duplicates})")
    removed = conn.execute(f"DELETE FROM tool_calls WHERE id NOT IN ({duplicates})").rowcount
    conn.execute("DROP INDEX IF EXISTS tool_calls_span")  # ingest's lookup index: the unique one serves it
    for statement in INDEXES:
        conn.execute(statement)
    if removed:
        rebuild_rollup(conn)


def _upgrade_from_3(conn: sqlite3.Connection) -> None:
    """Schema 4: the model-call tables and their indexes; agent filter entries no call is labelled with
    any more (run keys shown before their run span named them) are removed."""
    for statement in (*TABLES, *MODEL_INDEXES):
        conn.execute(statement)
    conn.execute("DELETE FROM dimensions WHERE kind = 'agent' AND value NOT IN (SELECT agent FROM call_rollup)")


def _upgrade_from_4(conn: sqlite3.Connection) -> None:
    """Schema 5: the ``detections`` table, with a repeat row for every repeated call already stored (the other
    kinds were never stored before), and the repeat kind in the filter lists if there is one."""
    for statement in (*TABLES, *DETECTION_INDEXES):
        conn.execute(statement)
    conn.execute(
        "INSERT OR IGNORE INTO detections (call_id, kind, end_ns, run_length, reminder_tier, reminder_threshold)"
        " SELECT id, 'repeat', end_ns, run_length, reminder_tier, reminder_threshold FROM tool_calls"
        " WHERE run_length >= 2"
    )
    conn.execute(
        "INSERT OR IGNORE INTO dimensions (kind, value) SELECT 'loop_kind', 'repeat'"
        " WHERE EXISTS (SELECT 1 FROM detections WHERE kind = 'repeat')"
    )


def _upgrade_from_5(conn: sqlite3.Connection) -> None:
    """Schema 6: the cache-read and cache-write input tokens of model calls, priced at their own rates (None
    for the calls stored before, which had none recorded; 0 in their roll-up)."""
    for table, kind in (("model_calls", "INTEGER"), ("model_rollup", "INTEGER NOT NULL DEFAULT 0")):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for column in ("cache_read_tokens", "cache_write_tokens"):
            if column not in columns:  # a file upgraded from before schema 4 has them already
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _upgrade_from_6(conn: sqlite3.Connection) -> None:
    """Schema 7: the ``undelivered_reminders`` table (empty: no reminder was said undelivered before)."""
    for statement in TABLES:
        conn.execute(statement)


def _upgrade_from_7(conn: sqlite3.Connection) -> None:
    """Schema 8: the wording variant of a call's repeat reminder (NULL for the calls stored before: no experiment
    ran, or its variants were not kept)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(tool_calls)")}
    if "reminder_variant" not in columns:  # a file upgraded from before schema 3 has it already
        conn.execute("ALTER TABLE tool_calls ADD COLUMN reminder_variant TEXT")


def _upgrade_from_8(conn: sqlite3.Connection) -> None:
    """Schema 9: the reasoning tokens of model calls (part of their output tokens; None for the calls stored
    before, 0 in their roll-up)."""
    for table, kind in (("model_calls", "INTEGER"), ("model_rollup", "INTEGER NOT NULL DEFAULT 0")):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "reasoning_tokens" not in columns:  # a file upgraded from before schema 4 has it already
            conn.execute(f"ALTER TABLE {table} ADD COLUMN reasoning_tokens {kind}")


UPGRADES = {
    1: _upgrade_from_1,
    2: _upgrade_from_2,
    3: _upgrade_from_3,
    4: _upgrade_from_4,
    5: _upgrade_from_5,
    6: _upgrade_from_6,
    7: _upgrade_from_7,
    8: _upgrade_from_8,
}


def user_tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    return {str(name) for (name,) in rows}
