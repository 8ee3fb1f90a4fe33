"""The seam between the dashboard and where its figures come from: a :class:`Reader` per store.

The page asks every question through a reader; ``reader_for(store)`` picks it from the store's name:

- a SQLite path (the default): :class:`SQLiteReader`, the embedded store's ``queries`` on a fresh
  read-only connection per question;
- ``clickhouse://USER@HOST:8123/DB?table=otel_traces`` or ``chdb://DIR``: the Collector exporter's table,
  read by :class:`otel_repeat_guard.clickhouse.reader.ClickHouseReader` (the ``clickhouse`` extra).

Both answer with the same columns, so the sections draw either without knowing which.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast

import pandas as pd

from otel_repeat_guard.store import queries
from otel_repeat_guard.store.origin import has_rows
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.schema import open_for_reading

P = ParamSpec("P")
T = TypeVar("T")


class Reader(Protocol):
    """Every question the page asks a store; each answer is what the ``queries`` function of that name returns."""

    def has_data(self) -> bool: ...
    def time_bounds(self) -> pd.DataFrame: ...
    def filter_options(self) -> pd.DataFrame: ...
    def headline(self, filters: Filters) -> pd.DataFrame: ...
    def hotspots_by_tool(self, filters: Filters) -> pd.DataFrame: ...
    def hotspots_by_agent(self, filters: Filters) -> pd.DataFrame: ...
    def model_tokens(self, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame: ...
    def wasted_tokens(self, filters: Filters, bands: Sequence[int] = ()) -> pd.DataFrame: ...
    def has_model_calls(self) -> bool: ...
    def reminder_outcomes(self, filters: Filters, window: int = ...) -> pd.DataFrame: ...
    def reminder_count(self, filters: Filters) -> int: ...
    def reminder_variants(self, filters: Filters, window: int = ...) -> pd.DataFrame: ...
    def over_time(self, filters: Filters, bucket_s: float) -> pd.DataFrame: ...
    def run_lengths(self, filters: Filters) -> pd.DataFrame: ...
    def unguarded_calls(self, filters: Filters) -> pd.DataFrame: ...
    def undelivered_reminders(self, filters: Filters) -> pd.DataFrame: ...
    def excluded_tools(self, tools: Sequence[str]) -> pd.DataFrame: ...
    def hotspot_runs(self, filters: Filters, tool: str, limit: int = 25) -> pd.DataFrame: ...
    def hotspot_loops(self, filters: Filters, tool: str, kinds: Sequence[str], limit: int = 25) -> pd.DataFrame: ...
    def agent_cycles(self, agent_key: str, limit: int = 25) -> pd.DataFrame: ...
    def cycle_calls(self, agent_key: str, end_id: int, period: int, repetitions: int) -> pd.DataFrame: ...
    def loop_start_ns(self, agent_key: str, end_id: int, run_length: int) -> int | None: ...
    def run_timeline(
        self, agent_key: str, *, focus_ns: int | None = None, before: int = 8, limit: int = ...
    ) -> pd.DataFrame: ...
    def conversations(self, filters: Filters, limit: int = 25) -> pd.DataFrame: ...
    def conversation_runs(self, conversation: str, filters: Filters | None = None) -> pd.DataFrame: ...
    def missing_facts(self) -> str | None: ...
    def close(self) -> None: ...


def _on_connection(query: Callable[Concatenate[sqlite3.Connection, P], T]) -> Callable[..., T]:
    """``query(conn, ...)`` as a method asked on a fresh read-only connection to the reader's store."""

    def method(self: SQLiteReader, /, *args: P.args, **kwargs: P.kwargs) -> T:
        conn, _ = open_for_reading(self.path)
        try:
            return query(conn, *args, **kwargs)
        finally:
            conn.close()

    method.__name__ = query.__name__
    method.__doc__ = query.__doc__
    return method


QUESTIONS: tuple[str, ...] = tuple(
    name
    for name, member in vars(Reader).items()
    if callable(member) and name[0] != "_" and name not in ("has_data", "close")
)
"""The questions a :class:`Reader` answers from its ``queries``: the protocol's list, written once."""


class SQLiteReader:
    """The embedded store at ``path``: the default reader. Each of :data:`QUESTIONS` is the ``queries`` function
    of that name, asked on a fresh read-only connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def has_data(self) -> bool:
        """Whether the store has a schema and holds any call (the one read that needs the schema's presence)."""
        conn, has_schema = open_for_reading(self.path)
        try:
            return has_schema and has_rows(conn)
        finally:
            conn.close()

    def close(self) -> None:
        """Nothing held between questions."""


for _question in QUESTIONS:
    setattr(SQLiteReader, _question, _on_connection(getattr(queries, _question)))


def is_clickhouse(store: str) -> bool:
    """Whether ``store`` names a ClickHouse table rather than a SQLite file."""
    from otel_repeat_guard.clickhouse.target import is_clickhouse as named  # noqa: PLC0415 - only for ClickHouse

    return named(store)


def lists_loops(store: str) -> bool:
    """Whether the store's drill-down lists cycles, no-progress loops and parallel duplicates as well as runs of
    identical calls (the ClickHouse reader lists the runs only: it counts the others, see docs/operations.md)."""
    return not is_clickhouse(store)


def reader_for(store: str) -> Reader:
    """The reader of ``store``: ClickHouse for ``clickhouse://`` and ``chdb://``, else the SQLite file."""
    if is_clickhouse(store):
        from otel_repeat_guard.clickhouse.reader import ClickHouseReader  # noqa: PLC0415 - the optional engines
        from otel_repeat_guard.clickhouse.target import parse  # noqa: PLC0415

        return ClickHouseReader(parse(store))
    return cast("Reader", SQLiteReader(store))  # its questions are set from the protocol's list
