"""What every ClickHouse question is built from: the table, the guard's configuration, the bounded scans."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from otel_repeat_guard.clickhouse.calls import (
    AGENT_RUNS,
    ALL_TRACKED,
    MODEL_CALLS,
    SERVICE_CONDITION,
    SLACK_NS,
    TOOL_CALLS,
    TRACKED,
    like,
)
from otel_repeat_guard.clickhouse.client import Client, Value, connect
from otel_repeat_guard.clickhouse.rollup import (
    ROLLED_CALLS,
    ROLLED_MODELS,
    ROLLED_RUNS,
    ROLLED_TO,
    ROLLUP_SERVICE_CONDITION,
    Rollup,
)
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.dashboard.queries.filters import Filters
from otel_repeat_guard.patterns import ToolFilter

_FAR = 2**62


class TableReader:
    """One ClickHouse table and the building blocks of the SQL that reads it: from the table itself, or, when
    the target names a rollup database (``?rollup=``), from the rollup's rows up to its watermark and the
    table's own rows after it (``rollup``): the same rows either way, so the same figures."""

    def __init__(self, target: Target, config: GuardConfig | None = None, client: Client | None = None) -> None:
        self.target = target
        self.client = connect(target) if client is None else client
        config = GuardConfig.from_env() if config is None else config
        self._tracked = ToolFilter(config.include, config.exclude)
        self._include = [like(p) for p in config.include]
        self._exclude = [like(p) for p in config.exclude]
        self._tracked_sql = TRACKED if self._include or self._exclude else ALL_TRACKED
        self.rollup = (
            None if target.rollup is None else Rollup(target.rollup, target.table, f"{target.database}.{target.table}")
        )
        self._calls, self._models, self._runs = (
            (TOOL_CALLS, MODEL_CALLS, AGENT_RUNS) if self.rollup is None else (ROLLED_CALLS, ROLLED_MODELS, ROLLED_RUNS)
        )

    def close(self) -> None:
        self.client.close()

    # -- building blocks ----------------------------------------------------------------------------------

    def params(self, filters: Filters | None = None, **extra: Value) -> dict[str, Value]:
        start = None if filters is None else filters.start_ns
        end = None if filters is None else filters.end_ns
        params: dict[str, Value] = {
            "db": self.target.database,
            "tbl": self.target.table,
            "scan_lo": 0 if start is None else max(0, start - SLACK_NS),
            "scan_hi": _FAR if end is None else end,
            "all_lo": 0,
            "all_hi": _FAR,
            "include": self._include,
            "exclude": self._exclude,
            "lo": -_FAR if start is None else start,
            "hi": _FAR if end is None else end,
        }
        if filters is not None and filters.services:
            services = list(filters.services)
            params["services"] = [*services, ""] if "unknown_service" in services else services
        if filters is not None:
            params["agents"], params["tools"] = list(filters.agents), list(filters.tools)
        if self.rollup is not None:
            params.update(self.rollup.params())
            params["rolled_to"] = self.rolled_to()
        params.update(extra)
        return params

    def rolled_to(self) -> int:
        """The rollup's watermark (epoch ns of ``Timestamp``): the rows before it are read from the rollup."""
        if self.rollup is None:
            return 0
        frame = self.client.frame(ROLLED_TO, self.rollup.params())
        return int(frame["rolled_to"].iloc[0]) if len(frame) else 0

    @staticmethod
    def scan(fragment: str, filters: Filters | None) -> str:
        services = filters is not None and bool(filters.services)
        fragment = fragment.replace("{rollup_services}", ROLLUP_SERVICE_CONDITION if services else "")
        return fragment.replace("{services}", SERVICE_CONDITION if services else "")

    @staticmethod
    def whole(fragment: str) -> str:
        """``fragment`` scanning the whole table, whatever the range (what a run or conversation holds)."""
        return fragment.replace("{scan_lo:Int64}", "{all_lo:Int64}").replace("{scan_hi:Int64}", "{all_hi:Int64}")

    def tools(self, filters: Filters | None, name: str = "tool", *, whole: bool = False) -> str:
        fragment = self.scan(self._calls, filters).replace("{tracked}", self._tracked_sql)
        return f"{name} AS ({self.whole(fragment) if whole else fragment})"

    def models(self, filters: Filters | None, name: str = "model", *, whole: bool = False) -> str:
        fragment = self.scan(self._models, filters)
        return f"{name} AS ({self.whole(fragment) if whole else fragment})"

    @staticmethod
    def where(filters: Filters, *extra: str, tool: bool = True) -> str:
        clauses = [*extra, "end_ns >= {lo:Int64}", "end_ns <= {hi:Int64}"]
        if filters.agents:
            clauses.append("agent IN {agents:Array(String)}")
        if tool and filters.tools:
            clauses.append("tool_name IN {tools:Array(String)}")
        return "WHERE " + " AND ".join(clauses)

    def frame(self, sql: str, params: Mapping[str, Value]) -> pd.DataFrame:
        return self.client.frame(sql, params)

    def agent_run_keys(self) -> str:
        return self.whole(self.scan(self._runs, None))
