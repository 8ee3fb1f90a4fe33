"""What the page reads from the store: each question through one cached helper, asked of the store's
:class:`~otel_repeat_guard.dashboard.source.Reader`. No SQL, no drawing.

``store`` is a SQLite path (the default) or a ClickHouse URL (``clickhouse://…``, ``chdb://DIR``); each read
asks a fresh reader and keeps its answer for CACHE_TTL_SECONDS per arguments, so a rerun (a widget change,
an auto-refresh) asks the store again only for what changed or aged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import costs
from otel_repeat_guard.dashboard.source import QUESTIONS, Reader, reader_for
from otel_repeat_guard.store.queries import Filters

CACHE_TTL_SECONDS = 5


def ask(store: str, question: Callable[[Reader], Any]) -> Any:
    """``question`` asked of a fresh reader of ``store``, closed after."""
    reader = reader_for(store)
    try:
        return question(reader)
    finally:
        reader.close()


def cached(question: str | Callable[..., Any]) -> Callable[..., Any]:
    """The reader's method ``question`` (a name, or a function of the reader) as ``read(store, ...)``, its
    answer kept CACHE_TTL_SECONDS for the same arguments (which Streamlit must be able to hash)."""
    name = question if isinstance(question, str) else question.__name__

    def read(store: str, /, *args: Any, **kwargs: Any) -> Any:
        if isinstance(question, str):
            return ask(store, lambda reader: getattr(reader, question)(*args, **kwargs))
        return ask(store, lambda reader: question(reader, *args, **kwargs))

    # Streamlit keys a function's cache by its module, qualified name and source, the same for every
    # read: the question's own name keeps each one's answers apart.
    read.__name__ = name
    read.__qualname__ = f"cached.{name}"
    return st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)(read)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def has_data(db: str) -> bool:
    """Whether the store holds any call (a SQLite store: has a schema and a call)."""
    return bool(ask(db, lambda reader: reader.has_data()))


def _priced_model_tokens(reader: Reader, filters: Filters) -> pd.DataFrame:
    return costs.price(reader.model_tokens(filters, costs.bands()))


def _priced_wasted_tokens(reader: Reader, filters: Filters) -> pd.DataFrame:
    return costs.price(reader.wasted_tokens(filters, costs.bands()))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def model_tokens(db: str, filters: Filters) -> pd.DataFrame:
    result: pd.DataFrame = ask(db, lambda reader: _priced_model_tokens(reader, filters))
    return result


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def wasted_tokens(db: str, filters: Filters) -> pd.DataFrame:
    result: pd.DataFrame = ask(db, lambda reader: _priced_wasted_tokens(reader, filters))
    return result


for _question in QUESTIONS:  # each of the reader's questions, cached; the two priced above stand
    globals().setdefault(_question, cached(_question))


def __getattr__(name: str) -> Callable[..., Any]:
    """For the type checker: the module's reads are the reader's questions, set above (none is missing)."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
