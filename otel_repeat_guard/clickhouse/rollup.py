"""The guard's rollup of the Collector's table: the reader's call rows and model rows, kept in a database of its own.

The reader builds every question on three row sets read out of ``otel_traces`` (``calls``): the calls
(``TOOL_CALLS``), the model calls (``MODEL_CALLS``) and the ended agent runs (``AGENT_RUNS``). Each row of
those depends on one span alone, so they can be computed once and kept: the rollup's tables hold exactly those
rows, typed and narrow (no map is read again), in a database the user names in the store URL
(``?rollup=guard``); nothing is written to the user's table or database.

- ``<table>_calls``, ``<table>_models``: ordered by service and the span's ``Timestamp`` (``span_ns``), the
  page's access path; a bloom filter on the agent run's key (and on the conversation) finds a run's or a
  conversation's history without reading the rest.
- ``<table>_runs``: the ended runs' keys, ordered by key.
- ``<table>_windows``: the watermark, one row per window of ``Timestamp`` rolled up (its bounds and how many
  of the table's rows it held then). ``rolled_to`` is the end of the last one: everything before it was
  rolled up (``rolling``).

The reader reads the rollup's rows before ``rolled_to`` and the table's own rows from ``rolled_to`` on, through
the same fragments, so a range not yet rolled up is read from the table, never left out. The columns that follow
the guard's configuration (``tracked``, ``run_length``, ``unguarded_reason``) are not stored: they are computed
from the stored ones on every read (``calls.CONFIGURED``), as the table's reader computes them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from otel_repeat_guard.clickhouse.calls import AGENT_RUNS, ALL_TRACKED, CONFIGURED, MODEL_CALLS, TOOL_CALLS
from otel_repeat_guard.clickhouse.guard_logs import LogsTable, tool_calls

_SCAN_LO = "fromUnixTimestamp64Nano({scan_lo:Int64})"

CALL_COLUMNS = {
    "span_ns": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "duration_ns": "Int64",
    "service_name": "LowCardinality(String)",
    "trace_id": "String",
    "span_id": "String",
    "parent_span_id": "String",
    "tool_name": "LowCardinality(String)",
    "agent_key": "String",
    "agent_name": "LowCardinality(Nullable(String))",
    "agent": "String",
    "guard_run_length": "Nullable(Int64)",
    "guard_unguarded": "LowCardinality(Nullable(String))",
    "orphan": "UInt8",
    "reminder_tier": "LowCardinality(Nullable(String))",
    "reminder_variant": "LowCardinality(Nullable(String))",
    "seen": "UInt8",
    "error": "UInt8",
    "arguments_digest": "Nullable(String)",
    "arguments": "String",
    "issuer": "String",
    "wasted": "UInt8",
    "cycle_tier": "LowCardinality(Nullable(String))",
    "np_tier": "LowCardinality(Nullable(String))",
    "pd_tier": "LowCardinality(Nullable(String))",
    "is_cycle": "UInt8",
    "period": "Nullable(Int64)",
    "repetitions": "Nullable(Int64)",
    "cycle_length": "Nullable(Int64)",
    "is_np": "UInt8",
    "np_length": "Nullable(Int64)",
    "is_pd": "UInt8",
}
"""A call's stored columns (``calls.TOOL_CALLS``' less the maps and those ``calls.CONFIGURED`` computes)."""

MODEL_COLUMNS = {
    "span_ns": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "duration_ns": "Int64",
    "service_name": "LowCardinality(String)",
    "trace_id": "String",
    "span_id": "String",
    "agent_key": "String",
    "agent_name": "LowCardinality(Nullable(String))",
    "agent": "String",
    "model": "LowCardinality(Nullable(String))",
    "provider": "LowCardinality(Nullable(String))",
    "input_tokens": "Nullable(Int64)",
    "output_tokens": "Nullable(Int64)",
    "cache_read_tokens": "Nullable(Int64)",
    "cache_write_tokens": "Nullable(Int64)",
    "reasoning_tokens": "Nullable(Int64)",
    "total_tokens": "Nullable(Int64)",
    "conversation_id": "Nullable(String)",
    "error": "UInt8",
    "output": "Nullable(String)",
}
"""A model call's columns (all of ``calls.MODEL_CALLS``')."""

RUN_COLUMNS = {"span_ns": "Int64", "agent_key": "String"}

_MONTH = "toYYYYMM(toDateTime(intDiv(span_ns, 1000000000), 'UTC'))"


def _columns(columns: dict[str, str]) -> str:
    return ",\n    ".join(f"{name} {kind}" for name, kind in columns.items())


DDL = (
    "CREATE DATABASE IF NOT EXISTS {rdb:Identifier}",
    f"""CREATE TABLE IF NOT EXISTS {{rdb:Identifier}}.{{rcalls:Identifier}} (
    {_columns(CALL_COLUMNS)},
    INDEX idx_agent_key agent_key TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree PARTITION BY {_MONTH} ORDER BY (service_name, span_ns)""",
    f"""CREATE TABLE IF NOT EXISTS {{rdb:Identifier}}.{{rmodels:Identifier}} (
    {_columns(MODEL_COLUMNS)},
    INDEX idx_agent_key agent_key TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_conversation conversation_id TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree PARTITION BY {_MONTH} ORDER BY (service_name, span_ns)""",
    # A rollup made before the model calls' reasoning tokens were read gains the column (NULL in its old rows).
    "ALTER TABLE {rdb:Identifier}.{rmodels:Identifier} ADD COLUMN IF NOT EXISTS reasoning_tokens Nullable(Int64)",
    f"""CREATE TABLE IF NOT EXISTS {{rdb:Identifier}}.{{rruns:Identifier}} (
    {_columns(RUN_COLUMNS)}
) ENGINE = MergeTree ORDER BY (agent_key, span_ns)""",
    # Added after the rollup's first release: a rollup made before gains it (NULL for the rows rolled up then).
    "ALTER TABLE {rdb:Identifier}.{rcalls:Identifier} ADD COLUMN IF NOT EXISTS reminder_variant"
    " LowCardinality(Nullable(String)) AFTER reminder_tier",
    """CREATE TABLE IF NOT EXISTS {rdb:Identifier}.{rwindows:Identifier} (
    source String, lo_ns Int64, hi_ns Int64, spans UInt64, rolled_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree(rolled_at) ORDER BY (source, lo_ns)""",
)
"""The rollup's tables, created if missing (the statements take the names as ``Identifier`` parameters)."""

ROLLED_TO = "SELECT max(hi_ns) AS rolled_to FROM {rdb:Identifier}.{rwindows:Identifier} WHERE source = {source:String}"
"""The watermark: every row of the table before it was rolled up (0: nothing yet)."""


@dataclass(frozen=True, slots=True)
class Rollup:
    """Where one table's rollup lives: ``database`` (the user's choice), its tables named after the table."""

    database: str
    table: str
    source: str
    """The table rolled up, ``database.table``: a rollup database may hold the rollups of several tables."""

    def params(self) -> dict[str, str]:
        """The rollup's names, as the ``Identifier`` parameters its SQL takes."""
        return {
            "rdb": self.database,
            "rcalls": f"{self.table}_calls",
            "rmodels": f"{self.table}_models",
            "rruns": f"{self.table}_runs",
            "rwindows": f"{self.table}_windows",
            "source": self.source,
        }


def tail(fragment: str) -> str:
    """``fragment`` (a read of the table) for the rows from the watermark on only."""
    assert _SCAN_LO in fragment
    return fragment.replace(_SCAN_LO, "fromUnixTimestamp64Nano(greatest({scan_lo:Int64}, {rolled_to:Int64}))")


def _rolled(columns: dict[str, str], table: str, fragment: str, *, services: bool = True, fresh: bool) -> str:
    """The rollup's rows of ``table`` before the watermark, then (if ``fresh``: the table holds rows from the
    watermark on) the table's own rows (``fragment``) after it."""
    names = ", ".join(columns)
    service = "{rollup_services}" if services else ""
    rolled = f"""
        SELECT {names} FROM {{rdb:Identifier}}.{{{table}:Identifier}}
        WHERE span_ns >= {{scan_lo:Int64}} AND span_ns <= {{scan_hi:Int64}} AND span_ns < {{rolled_to:Int64}} {service}"""
    if not fresh:
        return rolled
    return f"""{rolled}
        UNION ALL
        SELECT {names} FROM ({tail(fragment)})"""


@dataclass(frozen=True, slots=True)
class Fragments:
    """The three row sets the reader's questions are built on, as SQL fragments."""

    calls: str
    models: str
    runs: str


def rolled_fragments(*, fresh: bool, logs: LogsTable | None = None) -> Fragments:
    """``calls.TOOL_CALLS``, ``MODEL_CALLS`` and ``AGENT_RUNS`` read through the rollup (the calls' configured
    columns computed on top); with the table's rows after the watermark if ``fresh`` (their guard events from
    ``logs`` too, if given: ``guard_logs``). Without them the plan is smaller (a table with nothing new: a query
    then answers as of the moment the reader looked)."""
    calls = _rolled(CALL_COLUMNS, "rcalls", tool_calls(logs), fresh=fresh)
    return Fragments(
        calls=f"\n    SELECT *,{CONFIGURED}\n    FROM ({calls})\n",
        models=_rolled(MODEL_COLUMNS, "rmodels", MODEL_CALLS, fresh=fresh),
        runs=_rolled(RUN_COLUMNS, "rruns", AGENT_RUNS, services=False, fresh=fresh),
    )


TABLE_FRAGMENTS = Fragments(TOOL_CALLS, MODEL_CALLS, AGENT_RUNS)
"""The row sets read from the table itself (no rollup)."""
ROLLED = {fresh: rolled_fragments(fresh=fresh) for fresh in (False, True)}


@functools.cache
def fragments(*, rolled: bool, fresh: bool, logs: LogsTable | None) -> Fragments:
    """The row sets for a reader: of the table (``rolled`` False) or through the rollup, the guard's events read
    from ``logs`` too when the table has a logs table beside it (made once per shape)."""
    if logs is None:
        return ROLLED[fresh] if rolled else TABLE_FRAGMENTS
    if rolled:
        return rolled_fragments(fresh=fresh, logs=logs)
    return Fragments(tool_calls(logs), MODEL_CALLS, AGENT_RUNS)


FRESH = """
SELECT count() AS fresh FROM (SELECT 1 FROM {db:Identifier}.{tbl:Identifier}
    WHERE Timestamp >= fromUnixTimestamp64Nano({rolled_to:Int64}) LIMIT 1)"""
"""Whether the table holds rows from the watermark on (rows the rollup does not hold yet)."""

ROLLUP_SERVICE_CONDITION = "AND service_name IN {services:Array(String)}"
"""The services filter on the rollup's rows (whose service is already ``unknown_service`` where none was set)."""

FILLS = {
    "rcalls": (CALL_COLUMNS, TOOL_CALLS),
    "rmodels": (MODEL_COLUMNS, MODEL_CALLS),
    "rruns": (RUN_COLUMNS, AGENT_RUNS),
}
"""Each rollup table's columns and the fragment of the table its rows come from."""


def fill_sql(table: str, logs: LogsTable | None = None) -> str:
    """The ``INSERT … SELECT`` that rolls the table's rows with a ``Timestamp`` in ``[scan_lo, scan_hi]`` up (the
    guard's events read from ``logs`` too, if given)."""
    columns, fragment = FILLS[table]
    if table == "rcalls":
        fragment = tool_calls(logs)
    names = ", ".join(columns)
    source = fragment.replace("{services}", "").replace("{tracked}", ALL_TRACKED)  # not stored: any will do
    return f"INSERT INTO {{rdb:Identifier}}.{{{table}:Identifier}} ({names}) SELECT {names} FROM ({source})"
