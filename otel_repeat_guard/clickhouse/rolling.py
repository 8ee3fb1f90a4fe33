"""Filling the guard's rollup (``rollup``) and keeping it current: ``otel-repeat-guard rollup --store URL``.

The table's rows are rolled up a window of ``Timestamp`` at a time (an hour by default). Each run:

1. creates the rollup's tables if they are missing (in the rollup database only);
2. counts the table's rows per window, up to ``until_ns`` (the windows still filling are left to the table);
3. rolls up every window whose count differs from the one recorded when it was last rolled up (a new window, a
   window that got late spans, a window the table's TTL dropped): its rollup rows are deleted, the table's
   rows of the window are inserted again, and its count recorded;
4. in time order, a batch of windows at a time, so that the watermark (the end of the last window recorded)
   always has every earlier window rolled up.

A run that stops half-way leaves the windows it did not record to the next one, which deletes what the
half-done batch inserted first: running it again, or twice in a row, changes nothing. The table is only read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from otel_repeat_guard.clickhouse.client import ClickHouseStoreError, Value, WritingClient
from otel_repeat_guard.clickhouse.guard_logs import LogsTable, needed_logs
from otel_repeat_guard.clickhouse.rollup import DDL, FILLS, ROLLED_TO, Rollup, fill_sql
from otel_repeat_guard.clickhouse.target import Target

HOUR_NS = 3600 * 1_000_000_000
BATCH_SPANS = 2_000_000
"""About how many of the table's rows one batch of windows rolls up (one ``INSERT … SELECT`` per rollup table)."""

_COUNTS = """
SELECT intDiv(toUnixTimestamp64Nano(Timestamp), {window:Int64}) * {window:Int64} AS lo_ns, count() AS spans
FROM {db:Identifier}.{tbl:Identifier} WHERE Timestamp < fromUnixTimestamp64Nano({cut:Int64})
GROUP BY lo_ns ORDER BY lo_ns"""
_RECORDED = """
SELECT lo_ns, argMax(hi_ns, rolled_at) AS hi_ns, argMax(spans, rolled_at) AS spans
FROM {rdb:Identifier}.{rwindows:Identifier} WHERE source = {source:String} GROUP BY lo_ns ORDER BY lo_ns"""
_OTHERS = """
SELECT DISTINCT source FROM {rdb:Identifier}.{rwindows:Identifier} WHERE source != {source:String} LIMIT 1"""
_HELD = """
SELECT (SELECT count() FROM {rdb:Identifier}.{rcalls:Identifier} WHERE span_ns >= {lo:Int64} AND span_ns < {hi:Int64})
     + (SELECT count() FROM {rdb:Identifier}.{rmodels:Identifier} WHERE span_ns >= {lo:Int64} AND span_ns < {hi:Int64})
     + (SELECT count() FROM {rdb:Identifier}.{rruns:Identifier} WHERE span_ns >= {lo:Int64} AND span_ns < {hi:Int64})
     AS held"""
_DELETE = (
    "DELETE FROM {{rdb:Identifier}}.{{{table}:Identifier}} WHERE span_ns >= {{lo:Int64}} AND span_ns < {{hi:Int64}}"
)
_RECORD = """
INSERT INTO {rdb:Identifier}.{rwindows:Identifier} (source, lo_ns, hi_ns, spans, rolled_at)
SELECT {source:String}, w.1, w.1 + {window:Int64}, toUInt64(w.2), now64(3)
FROM (SELECT arrayJoin(arrayZip({los:Array(Int64)}, {counts:Array(Int64)})) AS w)"""


@dataclass(frozen=True, slots=True)
class RollPlan:
    """What one run rolls up: the windows of ``window_ns`` that ended by ``until_ns`` (epoch ns)."""

    until_ns: int
    window_ns: int = HOUR_NS
    batch_spans: int = BATCH_SPANS

    def __post_init__(self) -> None:
        if self.window_ns < 1:
            raise ValueError(f"window_ns must be at least 1 (ns), got {self.window_ns}")
        if self.batch_spans < 1:
            raise ValueError(f"batch_spans must be at least 1, got {self.batch_spans}")
        if self.until_ns < 0:
            raise ValueError(f"until_ns must be an epoch time in ns (>= 0), got {self.until_ns}")


@dataclass(frozen=True, slots=True)
class Window:
    """One window of the table's ``Timestamp``: its start, and its rows in the table now and when rolled up."""

    lo_ns: int
    spans: int
    recorded: int | None

    @property
    def current(self) -> bool:
        return self.recorded == self.spans


@dataclass(frozen=True, slots=True)
class RollReport:
    """What a run did: the windows it rolled up (again), their rows in the table, and the watermark after it."""

    source: str
    rollup: str
    windows: int
    spans: int
    rolled_to: int
    seconds: float


def ensure_tables(client: WritingClient, rollup: Rollup) -> None:
    """The rollup's database and tables, created if missing; refused if another table's rollup holds the names."""
    params = rollup.params()
    for statement in DDL:
        client.execute(statement, params)
    other = client.frame(_OTHERS, params)
    if len(other):
        raise ClickHouseStoreError(
            f"the rollup database {rollup.database} already holds the rollup of {other['source'].iloc[0]} under "
            f"the names {rollup.table}_*: name another rollup database for {rollup.source}"
        )


def windows(client: WritingClient, target: Target, rollup: Rollup, plan: RollPlan) -> list[Window]:
    """Every window that ended by ``plan.until_ns`` that the table holds rows of, or the rollup recorded."""
    cut = plan.until_ns // plan.window_ns * plan.window_ns
    params: dict[str, Value] = {"db": target.database, "tbl": target.table, "window": plan.window_ns, "cut": cut}
    counts = client.frame(_COUNTS, params)
    raw = {int(lo): int(n) for lo, n in zip(counts["lo_ns"], counts["spans"], strict=True)}
    recorded_frame = client.frame(_RECORDED, rollup.params())
    recorded: dict[int, int] = {}
    for lo, hi, n in zip(recorded_frame["lo_ns"], recorded_frame["hi_ns"], recorded_frame["spans"], strict=True):
        if int(hi) - int(lo) != plan.window_ns:
            raise ClickHouseStoreError(
                f"the rollup of {rollup.source} in {rollup.database} was built with windows of "
                f"{(int(hi) - int(lo)) / 1e9:g} s, not {plan.window_ns / 1e9:g} s: keep its windows"
            )
        if int(lo) < cut:
            recorded[int(lo)] = int(n)
    return [Window(lo, raw.get(lo, 0), recorded.get(lo)) for lo in sorted(raw.keys() | recorded.keys())]


def batches(found: list[Window], batch_spans: int) -> list[list[Window]]:
    """The windows to roll up, in time order, in runs of consecutive ones (a current window ends a run)."""
    runs: list[list[Window]] = []
    run: list[Window] = []
    held = 0
    for window in found:
        if window.current or held >= batch_spans:
            if run:
                runs.append(run)
            run, held = [], 0
        if not window.current:
            run.append(window)
            held += window.spans
    if run:
        runs.append(run)
    return runs


def _roll_batch(
    client: WritingClient, target: Target, rollup: Rollup, plan: RollPlan, batch: list[Window], logs: LogsTable | None
) -> None:
    lo, hi = batch[0].lo_ns, batch[-1].lo_ns + plan.window_ns
    names = rollup.params()
    bounds: dict[str, Value] = {**names, "lo": lo, "hi": hi}
    if int(client.frame(_HELD, bounds)["held"].iloc[0]):
        for table in FILLS:
            client.execute(_DELETE.format(table=table), bounds)
    fill: dict[str, Value] = {
        **names,
        "db": target.database,
        "tbl": target.table,
        "scan_lo": lo,
        "scan_hi": hi - 1,
        **(logs.params() if logs is not None else {}),
    }
    if any(window.spans for window in batch):
        for table in FILLS:
            client.execute(fill_sql(table, logs), fill)
    record: dict[str, Value] = {
        **names,
        "window": plan.window_ns,
        "los": [window.lo_ns for window in batch],
        "counts": [window.spans for window in batch],
    }
    client.execute(_RECORD, record)


def roll_up(client: WritingClient, target: Target, plan: RollPlan) -> RollReport:
    """Roll ``target``'s table up into its rollup database (``target.rollup``), as the module says."""
    if target.rollup is None:
        raise ValueError(f"target.rollup must name the rollup database, got {target.rollup!r}")
    began = time.perf_counter()
    rollup = Rollup(target.rollup, target.table, f"{target.database}.{target.table}")
    ensure_tables(client, rollup)
    found = windows(client, target, rollup, plan)
    todo = batches(found, plan.batch_spans)
    logs = needed_logs(client, target) if todo else None  # the guard's events of spans that carry none
    for batch in todo:
        _roll_batch(client, target, rollup, plan, batch, logs)
    rolled = client.frame(ROLLED_TO, rollup.params())
    return RollReport(
        source=rollup.source,
        rollup=rollup.database,
        windows=sum(len(batch) for batch in todo),
        spans=sum(window.spans for batch in todo for window in batch),
        rolled_to=int(rolled["rolled_to"].iloc[0]) if len(rolled) else 0,
        seconds=round(time.perf_counter() - began, 3),
    )
