"""Who made a store, and what a demo run may do to it: the demo empties only a store it made (``store_info``'s
origin), and any other writer's first call takes that claim away."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from otel_repeat_guard.store.schema import StoreError, open_for_writing, store_error

if TYPE_CHECKING:  # pathlib is imported where a path is not on a Claude Code hook's way (store.path_text)
    from pathlib import Path

ORIGIN_DEMO = "demo"
"""``store_info`` origin of a store the demo made: a new demo run may empty it."""
_DATA_TABLES = (
    "undelivered_reminders",
    "detections",
    "model_rollup",
    "tool_call_arguments",
    "tool_calls",
    "call_rollup",
    "dimensions",
    "agent_runs",
    "model_call_outputs",
    "model_calls",
    "store_info",
)


def store_origin(conn: sqlite3.Connection) -> str | None:
    """Who made the store (``store_info`` origin): ``"demo"``, or None for any other writer."""
    row = conn.execute("SELECT value FROM store_info WHERE key = 'origin'").fetchone()
    return None if row is None else str(row[0])


def written_by_another(conn: sqlite3.Connection) -> None:
    """A writer other than the demo stores calls: the store is no longer the demo's to empty."""
    conn.execute("DELETE FROM store_info WHERE key = 'origin' AND value = ?", (ORIGIN_DEMO,))


def has_rows(conn: sqlite3.Connection) -> bool:
    """Whether the store holds any tool or model call."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM tool_calls) OR EXISTS (SELECT 1 FROM model_calls)").fetchone()
    return bool(row[0])


def start_demo_store(path: Path | str, *, append: bool) -> None:
    """Prepare ``path`` for a demo run: empty it (it must be a demo store or empty) unless ``append``.

    Emptying is one transaction on the open file (never a delete of the file), so a dashboard
    reading it meanwhile sees the old rows or none. A store that holds calls some other writer
    made is refused with :class:`StoreError` unless ``append``: the demo never empties it.
    """
    conn = open_for_writing(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            origin = store_origin(conn)
            if not append and origin != ORIGIN_DEMO and has_rows(conn):
                raise StoreError(
                    f"{path} holds calls that the demo did not write; pass --append to add the demo's calls "
                    f"to it, or give the demo a store of its own with --db"
                )
            if not append:
                for table in _DATA_TABLES:
                    conn.execute(f"DELETE FROM {table}")  # fixed table names, no values
            if not append or (origin is None and not has_rows(conn)):
                conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES ('origin', ?)", (ORIGIN_DEMO,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise store_error(path, exc, writing=True) from exc
    finally:
        conn.close()
