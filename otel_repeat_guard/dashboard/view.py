"""What every page of the dashboard draws from: the store, the sidebar's filters, and how to run a page.

The entry script (``app``) draws the sidebar once per rerun and keeps its choices here, in the session;
each page (``views/``) then draws with :func:`run_page`, which re-runs it alone on auto-refresh and turns a
store that fails into one message.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections.wording import Wording, wording
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS, Settings
from otel_repeat_guard.store import queries
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.schema import StoreError, store_error

_KEY = "repeat_guard_view"


@dataclass(frozen=True, slots=True)
class View:
    """The sidebar's choices for this rerun, and the store they apply to."""

    settings: Settings
    filters: Filters
    auto: bool
    kinds: tuple[str, ...]  # the loop kinds the store holds

    @property
    def store(self) -> str:
        return self.settings.store

    @property
    def words(self) -> Wording:
        return wording(self.filters.kind, self.kinds)

    def bucket_seconds(self) -> float:
        """A width giving 30-60 points over the part of the range that holds calls."""
        bounds = reads.time_bounds(self.store).iloc[0]
        first, last = int(bounds["first_ns"]), int(bounds["last_ns"])
        start = first if self.filters.start_ns is None else max(first, self.filters.start_ns)
        end = last if self.filters.end_ns is None else min(last, self.filters.end_ns)
        return queries.bucket_seconds(max(0, end - start))


def keep(view: View) -> None:
    st.session_state[_KEY] = view


def store_failed(db: str, exc: Exception) -> None:
    error = exc if isinstance(exc, StoreError) else store_error(db, exc) if isinstance(exc, sqlite3.Error) else exc
    st.error(f"Cannot read the store: {error}")


def _guarded(draw: Callable[[View], None], view: View) -> None:
    """A page's body; a fragment (re-run alone on auto-refresh), so it reports store errors itself."""
    try:
        draw(view)
    except (StoreError, sqlite3.Error) as exc:
        store_failed(view.store, exc)


def run_page(title: str, caption: str, draw: Callable[[View], None]) -> None:
    """Draws a page with the sidebar's choices of this rerun (none: the entry script showed a message)."""
    view = st.session_state.get(_KEY)
    if not isinstance(view, View):
        return
    st.title(title)
    st.caption(caption)
    body = st.fragment(run_every=REFRESH_SECONDS if view.auto else None)(_guarded)
    body(draw, view)
