"""The guard's ``repeat_tool_guard.reminder_outcomes`` metric and the store's reading of its rows agree.

The same scripted scenario (the demo's, whose agents heed, ignore and outlive their reminders) goes
through real guards into a real store; the guard counts each reminder's outcome as its run's next
tracked call (or the run's end) decides it, and the dashboard's query reads the same from the rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_repeat_guard.decide import metrics as guard_metrics
from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import scenario
from otel_repeat_guard.store import open_for_reading, queries
from otel_repeat_guard.store.queries import Filters

OUTCOMES_METRIC = "repeat_tool_guard.reminder_outcomes"
T = TypeVar("T")


def _summed(reader: InMemoryMetricReader, name: str, key: Callable[[Mapping[str, Any]], T]) -> dict[T, int]:
    """The guard's metric ``name``, summed by ``key`` of each point's attributes."""
    data = reader.get_metrics_data()
    found: dict[T, int] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:  # type: ignore[union-attr]
                    at = key(point.attributes or {})
                    found[at] = found.get(at, 0) + int(point.value)  # type: ignore[union-attr]
    return found


def _demo(
    tmp_path: Path,
    agents: int,
    read_guard: Callable[[InMemoryMetricReader], T],
    query: Callable[[sqlite3.Connection, Filters], pd.DataFrame],
) -> tuple[T, pd.DataFrame]:
    """The demo scenario through real guards into a real store: the guard's metric and the store's answer."""
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    db = tmp_path / "store.db"
    run_scenario(scenario(agents), db, meter_provider=meter_provider)
    guard = read_guard(reader)
    meter_provider.shutdown()
    conn, _ = open_for_reading(db)
    try:
        return guard, query(conn, Filters())
    finally:
        conn.close()


def _guard_outcomes(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    """(outcome, tier) -> reminders, from the guard's metric."""
    return _summed(reader, OUTCOMES_METRIC, lambda a: (str(a["outcome"]), str(a.get("repeat_tool_guard.tier", ""))))


@pytest.mark.parametrize("agents", [4, 9])
def test_the_guards_metric_and_the_store_count_the_same_outcomes(tmp_path: Path, agents: int) -> None:
    guard, stored = _demo(tmp_path, agents, _guard_outcomes, queries.reminder_outcomes)
    by_outcome = {str(k): int(v) for k, v in stored.groupby("outcome")["reminders"].sum().items()}
    guard_by_outcome: dict[str, int] = {}
    for (outcome, _), n in guard.items():
        guard_by_outcome[outcome] = guard_by_outcome.get(outcome, 0) + n
    assert guard_by_outcome == by_outcome
    if all(tier for _, tier in guard):  # the guard names the tier too: compare per tier
        per_tier = {
            (str(o), str(t)): int(n) for (t, o), n in stored.groupby(["tier", "outcome"])["reminders"].sum().items()
        }
        assert guard == per_tier
    assert set(by_outcome) == {"broken", "ignored", "ended"}  # the scenario shows every decided outcome


def _guard_wasted_tokens(reader: InMemoryMetricReader) -> dict[str, int]:
    """tool -> input + output tokens, from the guard's ``repeat_tool_guard.wasted_tokens``."""
    return _summed(reader, guard_metrics.WASTED_TOKENS, lambda a: str(a["gen_ai.tool.name"]))


@pytest.mark.parametrize("agents", [4, 9])
def test_the_guards_metric_and_the_store_count_the_same_wasted_tokens(tmp_path: Path, agents: int) -> None:
    guard, stored = _demo(tmp_path, agents, _guard_wasted_tokens, queries.wasted_tokens)
    summed = stored.assign(tokens=stored["input_tokens"] + stored["output_tokens"]).groupby("tool")["tokens"].sum()
    assert guard == {str(tool): int(n) for tool, n in summed.items()}
    assert sum(guard.values()) > 0  # the demo's loops waste tokens
