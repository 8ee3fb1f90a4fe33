"""Spans from a guard that records no facts: noticed once, logged, and kept in the store for the dashboard's banner.

A guard made with ``record_facts=False`` (or an older guard, before the facts were on by default) puts its events on
the spans but not its decisions: the store then guesses each call's run from its events and its parent span, and
its issuer from the nearest model call, so wasted tokens, run keys and the run's timeline can disagree with the
guard's own metrics. The exporter cannot make those figures right; it says so once, with the fix.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the dashboard reads the note without the exporter's imports
    from otel_repeat_guard.store.records import ToolCallRow

KEY = "facts_missing"
"""The ``store_info`` key: its value is when (ns since the epoch) a writer first stored such a span."""

FIX = (
    "drop record_facts=False from the RepeatGuardSpanProcessor that feeds it (facts are on by default), "
    "or replay a collector's files with `otel-repeat-guard ingest --replay` so this guard decides them"
)
WHAT = (
    "spans from a repeat guard that records no facts: its wasted tokens, run keys and run timelines are "
    "the store's guesses and may disagree with the guard's metrics"
)


def lacks_facts(call: ToolCallRow) -> bool:
    """Whether the guard detected a loop on this call (its events are on the span) but wrote none of its facts."""
    return call.in_loop and not call.decided


def note(conn: sqlite3.Connection, noticed: bool) -> None:
    """Keeps, in the open transaction, that the store holds such spans if the batch ``noticed`` one (once)."""
    if noticed:
        conn.execute("INSERT OR IGNORE INTO store_info (key, value) VALUES (?, ?)", (KEY, str(time.time_ns())))


def missing_facts(conn: sqlite3.Connection) -> str | None:
    """The banner's text if the store holds spans without the guard's facts, else None."""
    try:
        row = conn.execute("SELECT 1 FROM store_info WHERE key = ?", (KEY,)).fetchone()
    except sqlite3.OperationalError:  # a store from before store_info: it holds no such note
        return None
    return None if row is None else f"This store holds {WHAT}. To fix it, {FIX}."
