"""What the page reads from the store: the ``queries``, each through one cached helper. No SQL, no drawing.

Each read opens its own read-only connection to the store at ``db`` and keeps its answer for
CACHE_TTL_SECONDS per arguments, so a rerun (a widget change, an auto-refresh) asks SQLite again
only for what changed or aged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import costs, queries
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.store.schema import has_rows, open_for_reading

CACHE_TTL_SECONDS = 5

P = ParamSpec("P")
T = TypeVar("T")


def cached(query: Callable[Concatenate[sqlite3.Connection, P], T]) -> Callable[Concatenate[str, P], T]:
    """``query(conn, ...)`` as ``read(db, ...)``: asked on a fresh read-only connection to the store at ``db``,
    its answer kept CACHE_TTL_SECONDS for the same arguments (which Streamlit must be able to hash)."""

    def read(db: str, /, *args: P.args, **kwargs: P.kwargs) -> T:
        conn, _ = open_for_reading(Path(db))
        try:
            return query(conn, *args, **kwargs)
        finally:
            conn.close()

    # Streamlit keys a function's cache by its module, qualified name and source, the same for every
    # read: the query's own name keeps each query's answers apart.
    read.__name__ = query.__name__
    read.__qualname__ = f"cached.{query.__module__}.{query.__qualname__}"
    return st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)(read)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def has_data(db: str) -> bool:
    """Whether the store has a schema and holds any call (the one read that needs the schema's presence)."""
    conn, has_schema = open_for_reading(Path(db))
    try:
        return has_schema and has_rows(conn)
    finally:
        conn.close()


def _priced_model_tokens(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    return costs.price(queries.model_tokens(conn, filters, costs.bands()))


def _priced_wasted_tokens(conn: sqlite3.Connection, filters: Filters) -> pd.DataFrame:
    return costs.price(queries.wasted_tokens(conn, filters, costs.bands()))


time_bounds = cached(queries.time_bounds)
filter_options = cached(queries.filter_options)
headline = cached(queries.headline)
hotspots_by_tool = cached(queries.hotspots_by_tool)
hotspots_by_agent = cached(queries.hotspots_by_agent)
model_tokens = cached(_priced_model_tokens)
wasted_tokens = cached(_priced_wasted_tokens)
reminder_outcomes = cached(queries.reminder_outcomes)
reminder_count = cached(queries.reminder_count)
over_time = cached(queries.over_time)
run_lengths = cached(queries.run_lengths)
unguarded_calls = cached(queries.unguarded_calls)
excluded_tools = cached(queries.excluded_tools)
hotspot_runs = cached(queries.hotspot_runs)
hotspot_loops = cached(queries.hotspot_loops)
agent_cycles = cached(queries.agent_cycles)
cycle_calls = cached(queries.cycle_calls)
loop_start_ns = cached(queries.loop_start_ns)
run_timeline = cached(queries.run_timeline)
conversations = cached(queries.conversations)
conversation_runs = cached(queries.conversation_runs)
