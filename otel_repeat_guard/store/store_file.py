"""A writing connection that notices when the path of its store no longer names the file it writes.

SQLite keeps writing through an open connection after its file is deleted or replaced: the rows
go into an unlinked inode (or into the old file), every commit succeeds and nothing is logged.
:class:`WritingConnection` remembers the file's identity (device and inode) when it opens it and
compares before each write; when the file went away it closes the old connection (rows written
before stay in the old file) and opens a store at the path again, created if need be.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from otel_repeat_guard.store.schema import open_for_writing

logger = logging.getLogger("otel_repeat_guard")


class StoreGone(sqlite3.OperationalError):
    """The store file was deleted or replaced and no store could be opened at its path again."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:  # deleted, or its folder is gone
        return None
    return stat.st_dev, stat.st_ino


class WritingConnection:
    """The connection to write the store at ``path`` with; :meth:`current` before each write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = open_for_writing(path)
        self._identity = _identity(path)
        self._open = True
        self.reopened = 0
        """Times the file was deleted or replaced while in use and a store was opened at the path again."""

    def current(self) -> sqlite3.Connection:
        """The connection, opened again first if the path no longer names its file; raises :class:`StoreGone`
        when no store can be opened there now (the next call tries again)."""
        identity = _identity(self.path)
        if self._open and identity is not None and identity == self._identity:
            return self._conn
        if self._open:
            logger.warning("store %s was deleted or replaced while in use: opening a store at its path", self.path)
            self._retire()
        try:
            self._conn = open_for_writing(self.path)
        except Exception as exc:
            raise StoreGone(f"store {self.path} was deleted or replaced and cannot be opened again: {exc}") from exc
        self._open, self._identity = True, _identity(self.path)
        self.reopened += 1
        return self._conn

    def _retire(self) -> None:
        """Close the connection to the old file, leaving no write-ahead log behind for the new one.

        SQLite does not checkpoint on close once its file has moved, so the ``-wal`` beside the path
        (the old file's) would be replayed into whatever file now has the name. A checkpoint that
        empties it first keeps the new file as it is; the old file gets its own last rows."""
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:  # another process holds the old file's log: it empties it when it notices
            logger.warning("store %s: could not empty the old file's write-ahead log: %s", self.path, exc)
        self._conn.close()
        self._open = False

    def close(self) -> None:
        self._conn.close()
