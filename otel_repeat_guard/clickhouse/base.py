"""What every ClickHouse question is built from: the table, the guard's configuration, the bounded scans."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pandas as pd

from otel_repeat_guard.clickhouse.calls import (
    SERVICE_CONDITION,
    SLACK_NS,
    like,
    tracked_condition,
)
from otel_repeat_guard.clickhouse.client import Client, Value, connect
from otel_repeat_guard.clickhouse.guard_logs import LogsTable, known_logs
from otel_repeat_guard.clickhouse.rollup import (
    FRESH,
    ROLLED_TO,
    ROLLUP_SERVICE_CONDITION,
    Fragments,
    Rollup,
    fragments,
)
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.store.queries.filters import Filters

_FAR = 2**62
LOOK_S = 1.0
"""How long the reader trusts the rollup's watermark it looked up (one question's SQL and parameters agree)."""


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
        self._tracked_sql = tracked_condition(len(self._include), len(self._exclude))
        self._patterns: dict[str, Value] = {f"track_in{i}": p for i, p in enumerate(self._include)}
        self._patterns.update({f"track_ex{i}": p for i, p in enumerate(self._exclude)})
        self.rollup = (
            None if target.rollup is None else Rollup(target.rollup, target.table, f"{target.database}.{target.table}")
        )
        self._looked: tuple[float, int, bool] | None = None  # when, the watermark, rows after it
        self._logs: tuple[LogsTable | None] | None = None  # looked up once: the logs table beside the table

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
            **self._patterns,
            "lo": -_FAR if start is None else start,
            "hi": _FAR if end is None else end,
        }
        if filters is not None and filters.services:
            services = list(filters.services)
            params["services"] = [*services, ""] if "unknown_service" in services else services
        if filters is not None:
            params["agents"], params["tools"] = list(filters.agents), list(filters.tools)
        logs = self.logs()
        if logs is not None:
            params.update(logs.params())
        if self.rollup is not None:
            params.update(self.rollup.params())
            params["rolled_to"] = self._watermark()[1]
        params.update(extra)
        return params

    def _watermark(self) -> tuple[float, int, bool]:
        """The rollup's watermark and whether the table holds rows after it, looked up at most every
        :data:`LOOK_S` (the SQL of one question and its parameters then agree)."""
        now = time.monotonic()
        if self._looked is None or now - self._looked[0] > LOOK_S:
            rolled_to = self.rolled_to()
            params: dict[str, Value] = {"db": self.target.database, "tbl": self.target.table, "rolled_to": rolled_to}
            fresh = int(self.client.frame(FRESH, params)["fresh"].iloc[0]) > 0
            self._looked = (now, rolled_to, fresh)
        return self._looked

    def logs(self) -> LogsTable | None:
        """The logs table beside the table, where the guard's events of spans that carry none are read
        (``guard_logs``); None for none. Looked up once per reader, and at most once a minute per process."""
        if self._logs is None:
            self._logs = (known_logs(self.client, self.target),)
        return self._logs[0]

    def _fragments(self) -> Fragments:
        logs = self.logs()
        if self.rollup is None:
            return fragments(rolled=False, fresh=False, logs=logs)
        return fragments(rolled=True, fresh=self._watermark()[2], logs=logs)

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
        fragment = self.scan(self._fragments().calls, filters).replace("{tracked}", self._tracked_sql)
        return f"{name} AS ({self.whole(fragment) if whole else fragment})"

    def models(self, filters: Filters | None, name: str = "model", *, whole: bool = False) -> str:
        fragment = self.scan(self._fragments().models, filters)
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
        return self.whole(self.scan(self._fragments().runs, None))
