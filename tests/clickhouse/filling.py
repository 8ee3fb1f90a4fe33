"""Filling a chdb ``otel_traces`` the way the Collector's clickhouse exporter would, beside the embedded store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from opentelemetry._logs import LoggerProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.table import TRACES_DDL, exporter_row, insert_sql
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import scenario


def demo_spans(db: Path, agents: int = 8, logger_provider: LoggerProvider | None = None) -> list[ReadableSpan]:
    """The demo scenario through the guard into the store at ``db``; the same spans, as the Collector gets them
    (the guard's log events to ``logger_provider``, if given)."""
    memories: list[InMemorySpanExporter] = []

    def exporters() -> list[InMemorySpanExporter]:  # one per service's provider: each shuts its own down
        memories.append(InMemorySpanExporter())
        return memories[-1:]

    run_scenario(scenario(agents), db, extra_exporters=exporters, logger_provider=logger_provider)
    return [span for memory in memories for span in memory.get_finished_spans()]


def fill(directory: Path, spans: Sequence[ReadableSpan], database: str = "otel", table: str = "otel_traces") -> Target:
    """A chdb directory whose ``database.table`` is the exporter's table holding ``spans``."""
    target = Target(database=database, table=table, path=directory)
    directory.mkdir(parents=True, exist_ok=True)  # a store is made here: the client reads existing ones only
    client = ChdbClient(target)
    client.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    client.execute(TRACES_DDL.format(database=database, table=table))
    rows = [exporter_row(span) for span in spans]
    for start in range(0, len(rows), 5000):
        client.execute(insert_sql(database, table, rows[start : start + 5000]))
    return target
