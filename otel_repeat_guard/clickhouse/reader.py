"""The dashboard's questions answered from the Collector's ``otel_traces`` in ClickHouse (or chdb).

:class:`ClickHouseReader` answers what :class:`otel_repeat_guard.dashboard.source.Reader` asks, with the same
columns as the embedded store's queries, from the spans themselves (``calls``). It only reads: nothing is
written to the user's table. Each query scans the filters' time range and services first, so ClickHouse
prunes partitions (one per day) and ordering-key ranges before it reads a map.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from otel_repeat_guard.clickhouse import drill, variants
from otel_repeat_guard.clickhouse.base import TableReader
from otel_repeat_guard.clickhouse.calls import NOT_SEEN
from otel_repeat_guard.clickhouse.undelivered import undelivered_sql
from otel_repeat_guard.store.queries.filters import TIERS, Filters, tiers_shown
from otel_repeat_guard.store.queries.overview import fill_buckets, long_form
from otel_repeat_guard.store.queries.reminders import REMINDER_WINDOW
from otel_repeat_guard.store.records import CYCLE, NO_PROGRESS, PARALLEL_DUPLICATE, REPEAT

_KIND_COLUMNS = {
    CYCLE: ("is_cycle", "cycle_tier", "cycle_length"),
    NO_PROGRESS: ("is_np", "np_tier", "np_length"),
    PARALLEL_DUPLICATE: ("is_pd", "pd_tier", "0"),
}
_REPEATED = "ifNull(run_length >= 2, 0)"
_OTHERS = "(is_cycle OR is_np OR is_pd)"


def _tier(column: str, tier: str) -> str:
    return f"ifNull({column} = '{tier}', 0)"


def figure_columns(kind: str | None) -> str:
    """Per call, the columns of a call_rollup row for loop kind ``kind`` (None: all kinds), as the embedded
    store sums them: a call counts once in a loop, every detection's reminder counts. Fixed SQL text."""
    if kind is None:
        repeated = f"({_REPEATED} OR (NOT {_REPEATED} AND {_OTHERS}))"
        tiers = {
            t: " + ".join(_tier(c, t) for c in ("reminder_tier", "cycle_tier", "np_tier", "pd_tier")) for t in TIERS
        }
        longest = "ifNull(run_length, 0)"
    elif kind == REPEAT:
        repeated, longest = _REPEATED, "ifNull(run_length, 0)"
        tiers = {t: _tier("reminder_tier", t) for t in TIERS}
    else:
        flag, tier, length = _KIND_COLUMNS[kind]
        repeated, longest = flag, f"if({flag}, ifNull({length}, 0), 0)"
        tiers = {t: _tier(tier, t) for t in TIERS}
    return (
        f"1 AS calls, toUInt8({repeated}) AS repeated_calls, {tiers['gentle']} AS gentle_reminders, "
        f"{tiers['detailed']} AS detailed_reminders, {longest} AS longest_run, "
        "if(repeated_calls > 0, duration_ns, 0) AS repeated_ns"
    )


def _detected(kind: str | None) -> str:
    """Whether a call is in a loop of ``kind`` (None: any), for the figures over time."""
    if kind is None:
        return f"({_REPEATED} OR {_OTHERS})"
    return _REPEATED if kind == REPEAT else _KIND_COLUMNS[kind][0]


class ClickHouseReader(TableReader):
    """The dashboard's reads over one ClickHouse table (see :mod:`otel_repeat_guard.dashboard.source`)."""

    # -- what the page reads ------------------------------------------------------------------------------

    def has_data(self) -> bool:
        sql = f"WITH {self.tools(None)} SELECT count() > 0 AS held FROM (SELECT 1 FROM tool LIMIT 1)"
        return bool(self.frame(sql, self.params())["held"].iloc[0])

    def time_bounds(self) -> pd.DataFrame:
        sql = f"""WITH {self.tools(None)}
            SELECT min(end_ns) AS first_ns, max(end_ns) AS last_ns, toUInt8(count() > 0) AS rows FROM tool"""
        frame = self.frame(sql, self.params())
        if not int(frame["rows"].iloc[0]):
            frame[["first_ns", "last_ns"]] = None
        return frame

    def filter_options(self) -> pd.DataFrame:
        # One pass over the calls: each list's distinct values, and which loop kinds occur at all.
        sql = f"""WITH {self.tools(None)}
            SELECT kv.1 AS kind, kv.2 AS value FROM (
                SELECT arrayJoin(arrayConcat(
                    arrayMap(v -> ('service', v), groupUniqArray(service_name)),
                    arrayMap(v -> ('tool', v), groupUniqArray(tool_name)),
                    arrayMap(v -> ('agent', v), groupUniqArray(agent)),
                    arrayMap(v -> ('loop_kind', v), arrayFilter(k -> k != '', [
                        if(max(ifNull(run_length >= 2, 0) OR reminder_tier IS NOT NULL), 'repeat', ''),
                        if(max(is_cycle), 'cycle', ''), if(max(is_np), 'no_progress', ''),
                        if(max(is_pd), 'parallel_duplicate', '')])))) AS kv
                FROM tool
            ) ORDER BY kind, value"""
        return self.frame(sql, self.params())

    def _parts(self, filters: Filters, *, tracked_only: bool) -> str:
        where = self.where(filters, *(["tracked"] if tracked_only else []))
        return f"""WITH {self.tools(filters)},
            parts AS (SELECT service_name, agent, tool_name, tracked, {figure_columns(filters.kind)} FROM tool {where})"""

    @staticmethod
    def _tier_sum(filters: Filters, tier: str) -> str:
        return f"sum({tier}_reminders)" if tier in (filters.tiers or TIERS) else "0"

    def headline(self, filters: Filters) -> pd.DataFrame:
        sql = f"""{self._parts(filters, tracked_only=False)}
            SELECT sumIf(calls, tracked) AS tool_calls, sumIf(calls, NOT tracked) AS untracked_calls,
                   sum(repeated_calls) AS repeated_calls,
                   {self._tier_sum(filters, "gentle")} AS gentle_reminders,
                   {self._tier_sum(filters, "detailed")} AS detailed_reminders,
                   uniqExactIf(agent, repeated_calls > 0) AS agents_with_loops,
                   max(longest_run) AS longest_run, sum(repeated_ns) / 1e9 AS repeated_seconds
            FROM parts"""
        frame = self.frame(sql, self.params(filters)).astype(
            {
                "tool_calls": "int64",
                "untracked_calls": "int64",
                "repeated_calls": "int64",
                "gentle_reminders": "int64",
                "detailed_reminders": "int64",
                "agents_with_loops": "int64",
                "longest_run": "int64",
            }
        )
        frame["reminders"] = frame["gentle_reminders"] + frame["detailed_reminders"]
        calls = frame["tool_calls"].where(frame["tool_calls"] > 0)
        frame["wasted_share"] = (frame["repeated_calls"] / calls).fillna(0.0)
        return frame

    def _grouped(self, filters: Filters, key: str, label: str) -> pd.DataFrame:
        sql = f"""{self._parts(filters, tracked_only=True)}
            SELECT {key} AS {label}, sum(repeated_calls) AS repeated_calls,
                   {self._tier_sum(filters, "gentle")} + {self._tier_sum(filters, "detailed")} AS reminders,
                   max(longest_run) AS longest_run, sum(repeated_ns) / 1e9 AS wasted_seconds, sum(calls) AS calls
            FROM parts GROUP BY {key} HAVING sum(repeated_calls) > 0
            ORDER BY sum(repeated_calls) DESC, {key}"""
        frame = self.frame(sql, self.params(filters))
        frame["repeated_share"] = frame["repeated_calls"] / frame["calls"]
        return frame

    def hotspots_by_tool(self, filters: Filters) -> pd.DataFrame:
        return self._grouped(filters, "tool_name", "tool")

    def hotspots_by_agent(self, filters: Filters) -> pd.DataFrame:
        return self._grouped(filters, "agent", "agent")

    def over_time(self, filters: Filters, bucket_s: float) -> pd.DataFrame:
        bucket_ns = max(1, round(bucket_s * 1_000_000_000))
        sql = f"""WITH {self.tools(filters)},
            parts AS (SELECT end_ns, {figure_columns(filters.kind)} FROM tool {self.where(filters, _detected(filters.kind))})
            SELECT intDiv(end_ns, {{bucket:Int64}}) * {{bucket:Int64}} AS bucket_ns, sum(repeated_calls) AS repeated_calls,
                   {self._tier_sum(filters, "gentle")} AS gentle_reminders,
                   {self._tier_sum(filters, "detailed")} AS detailed_reminders
            FROM parts GROUP BY bucket_ns ORDER BY bucket_ns"""
        wide = self.frame(sql, self.params(filters, bucket=bucket_ns))
        return long_form(fill_buckets(wide.astype("int64"), bucket_ns))

    def run_lengths(self, filters: Filters) -> pd.DataFrame:
        sql = f"""WITH {self.tools(filters)}
            SELECT run_length, count() AS calls FROM tool {self.where(filters, "tracked", "run_length IS NOT NULL")}
            GROUP BY run_length ORDER BY run_length"""
        positions = self.frame(sql, self.params(filters))
        lengths = [int(v) for v in positions["run_length"]]
        calls = [int(v) for v in positions["calls"]]
        runs = [
            calls[i] - (calls[i + 1] if i + 1 < len(lengths) and lengths[i + 1] == lengths[i] + 1 else 0)
            for i in range(len(lengths))
        ]
        frame = pd.DataFrame({"run_length": lengths, "runs": runs}, dtype="int64")
        return frame[frame["runs"] > 0].reset_index(drop=True)

    def unguarded_calls(self, filters: Filters) -> pd.DataFrame:
        """As the store's, plus the tool spans no guard saw (reason ``no_guard``): never a silent zero."""
        sql = f"""WITH {self.tools(filters)}
            SELECT if(seen, unguarded_reason, '{NOT_SEEN}') AS reason, tool_name AS tool, count() AS calls FROM tool
            {self.where(filters, "tracked", "(unguarded_reason IS NOT NULL OR NOT seen)")}
            GROUP BY reason, tool ORDER BY calls DESC, reason, tool"""
        return self.frame(sql, self.params(filters))

    def undelivered_reminders(self, filters: Filters) -> pd.DataFrame:
        """As the store's: the reminders that did not reach the model, by reason, tier and tool."""
        sql = f"""WITH undelivered AS ({undelivered_sql(bool(filters.services), self.logs())})
            SELECT reason, tier, tool_name AS tool, count() AS reminders FROM undelivered
            {self.where(filters)} GROUP BY reason, tier, tool ORDER BY reminders DESC, reason, tier, tool"""
        return self.frame(sql, self.params(filters))

    def excluded_tools(self, tools: Sequence[str]) -> pd.DataFrame:
        """Of ``tools``, those the table holds whose calls the guard's configuration excludes."""
        excluded = sorted(t for t in tools if not self._tracked[t])
        if not excluded:
            return pd.DataFrame({"tool": pd.Series([], dtype=object)})
        sql = f"""WITH {self.tools(None, whole=True)}
            SELECT DISTINCT tool_name AS tool FROM tool WHERE tool_name IN {{excluded:Array(String)}} ORDER BY tool"""
        return self.frame(sql, self.params(excluded=excluded))

    def reminder_count(self, filters: Filters) -> int:
        tiers = tiers_shown(filters)
        if not tiers:
            return 0
        sql = f"""WITH {self.tools(filters)} SELECT count() AS reminders FROM tool
            {self.where(filters, "run_length >= 2", "reminder_tier IN {tiers:Array(String)}")}"""
        return int(self.frame(sql, self.params(filters, tiers=tiers))["reminders"].iloc[0])

    def reminder_outcomes(self, filters: Filters, window: int = REMINDER_WINDOW) -> pd.DataFrame:
        return drill.reminder_outcomes(self, filters, window)

    def reminder_variants(self, filters: Filters, window: int = REMINDER_WINDOW) -> pd.DataFrame:
        return variants.reminder_variants(self, filters, window)

    def model_tokens(self, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame:
        return drill.model_tokens(self, filters, bands, wasted=False)

    def wasted_tokens(self, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame:
        return drill.model_tokens(self, filters, bands, wasted=True)

    def missing_facts(self) -> str | None:
        """None: only the embedded store's exporter notes spans without the guard's facts (the table is only read)."""
        return None

    def has_model_calls(self) -> bool:
        sql = f"WITH {self.models(None)} SELECT count() > 0 AS held FROM (SELECT 1 FROM model LIMIT 1)"
        return bool(self.frame(sql, self.params())["held"].iloc[0])

    def conversations(self, filters: Filters, limit: int = 25) -> pd.DataFrame:
        return drill.conversations(self, filters, limit)

    def conversation_runs(self, conversation: str, filters: Filters | None = None) -> pd.DataFrame:
        return drill.conversation_runs(self, conversation, filters)

    def hotspot_runs(self, filters: Filters, tool: str, limit: int = 25) -> pd.DataFrame:
        return drill.hotspot_runs(self, filters, tool, limit)

    def hotspot_loops(self, filters: Filters, tool: str, kinds: Sequence[str], limit: int = 25) -> pd.DataFrame:
        return drill.hotspot_loops(self, filters, tool, kinds, limit)

    def agent_cycles(self, agent_key: str, limit: int = 25) -> pd.DataFrame:
        return drill.agent_cycles(self, agent_key, limit)

    def cycle_calls(self, agent_key: str, end_id: int, period: int, repetitions: int) -> pd.DataFrame:
        return drill.cycle_calls(self, agent_key, end_id, period, repetitions)

    def loop_start_ns(self, agent_key: str, end_id: int, run_length: int) -> int | None:
        return drill.loop_start_ns(self, agent_key, end_id, run_length)

    def run_timeline(
        self, agent_key: str, *, focus_ns: int | None = None, before: int = 8, limit: int = 300
    ) -> pd.DataFrame:
        return drill.run_timeline(self, agent_key, focus_ns=focus_ns, before=before, limit=limit)
