"""What every ClickHouse question is built from: the table, the guard's configuration, the bounded scans."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from otel_repeat_guard.clickhouse.calls import AGENT_RUNS, MODEL_CALLS, SERVICE_CONDITION, SLACK_NS, TOOL_CALLS, like
from otel_repeat_guard.clickhouse.client import Client, Value, connect
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.dashboard.queries.filters import Filters
from otel_repeat_guard.patterns import ToolFilter

_FAR = 2**62


class TableReader:
    """One ClickHouse table and the building blocks of the SQL that reads it."""

    def __init__(self, target: Target, config: GuardConfig | None = None, client: Client | None = None) -> None:
        self.target = target
        self.client = connect(target) if client is None else client
        config = GuardConfig.from_env() if config is None else config
        self._tracked = ToolFilter(config.include, config.exclude)
        self._include = [like(p) for p in config.include]
        self._exclude = [like(p) for p in config.exclude]

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
        params.update(extra)
        return params

    @staticmethod
    def scan(fragment: str, filters: Filters | None) -> str:
        return fragment.replace("{services}", SERVICE_CONDITION if filters is not None and filters.services else "")

    @staticmethod
    def whole(fragment: str) -> str:
        """``fragment`` scanning the whole table, whatever the range (what a run or conversation holds)."""
        return fragment.replace("{scan_lo:Int64}", "{all_lo:Int64}").replace("{scan_hi:Int64}", "{all_hi:Int64}")

    def tools(self, filters: Filters | None, name: str = "tool", *, whole: bool = False) -> str:
        fragment = self.scan(TOOL_CALLS, filters)
        return f"{name} AS ({self.whole(fragment) if whole else fragment})"

    def models(self, filters: Filters | None, name: str = "model", *, whole: bool = False) -> str:
        fragment = self.scan(MODEL_CALLS, filters)
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
        return self.whole(self.scan(AGENT_RUNS, None))
