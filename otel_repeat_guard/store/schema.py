"""The store's SQLite schema: creating it, opening it, and refusing files that are not ours.

One file holds every tool call the exporter recognized. The schema is versioned in a
small table (and mirrored in ``PRAGMA user_version``) so a newer release's file, or a
SQLite file of some other program, gives a clear error instead of wrong numbers. The tables,
their indexes and roll-ups, the version history and the upgrades from each older version are in
:mod:`otel_repeat_guard.store.tables`; their public names are importable from here too.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import TYPE_CHECKING

from otel_repeat_guard.store.path_text import exists, is_dir, is_file, joined, parent_of, path_text
from otel_repeat_guard.store.tables import (
    DETECTION_INDEXES,
    INDEXES,
    MODEL_INDEXES,
    MODEL_ROLLUP_FROM_CALLS,
    ROLLED_UP_MODEL_CALL,
    ROLLUP_BUCKET_NS,
    ROLLUP_FROM_CALLS,
    SMALL_INPUT_TOKENS,
    TABLES,
    UPGRADES,
    rebuild_rollup,
    user_tables,
)

if TYPE_CHECKING:  # pathlib is imported where a path is not on a Claude Code hook's way (store.path_text)
    from pathlib import Path

__all__ = [
    "APPLICATION",
    "BUSY_TIMEOUT_MS",
    "DB_ENV",
    "DEFAULT_DB",
    "MODEL_ROLLUP_FROM_CALLS",
    "ROLLED_UP_MODEL_CALL",
    "ROLLUP_BUCKET_NS",
    "ROLLUP_FROM_CALLS",
    "SCHEMA_VERSION",
    "SMALL_INPUT_TOKENS",
    "CorruptStoreError",
    "MissingDatabaseError",
    "SchemaError",
    "StoreAccessError",
    "StoreError",
    "check_creatable",
    "check_integrity",
    "check_schema",
    "default_db_path",
    "open_for_reading",
    "open_for_writing",
    "rebuild_rollup",
    "store_error",
    "upgrade",
]

APPLICATION = "otel-repeat-guard"
SCHEMA_VERSION = 9
DEFAULT_DB = "repeat-guard.db"
DB_ENV = "OTEL_REPEAT_GUARD_DB"
BUSY_TIMEOUT_MS = 30_000


class StoreError(Exception):
    """The store cannot be used; the message says which file and why."""


class MissingDatabaseError(StoreError):
    """The database file does not exist."""


class SchemaError(StoreError):
    """The file is not an otel-repeat-guard store this version can read."""


class CorruptStoreError(SchemaError):
    """The file is damaged: corrupt, truncated, or not a SQLite file at all."""


class StoreAccessError(StoreError):
    """The file or its directory cannot be written (or, for a WAL store, read) by this process, or the path names
    a directory, a device or a pipe instead of a file."""


def _writable(path: Path | str) -> bool:
    return os.access(path, os.W_OK)


def store_error(path: Path | str, exc: sqlite3.Error, *, writing: bool = False) -> StoreError:
    """A one-line :class:`StoreError` saying what is wrong with the store at ``path`` and where.

    SQLite's own messages ("attempt to write a readonly database", "database disk image is
    malformed") name neither the file nor the cause, so they are translated here.
    """
    from pathlib import Path  # noqa: PLC0415 - where a path is not on a Claude Code hook's way (store.path_text)

    path = Path(path)
    text = str(exc)
    directory = path.resolve().parent
    if isinstance(exc, sqlite3.OperationalError) and ("readonly" in text or "unable to open" in text):
        if not _writable(directory):
            need = f"{path.name}-wal and {path.name}-shm" if writing else f"{path.name}-shm"
            return StoreAccessError(
                f"cannot {'write' if writing else 'read'} the store {path}: its directory {directory} is not "
                f"writable, and SQLite must create {need} there ({text})"
            )
        if path.exists() and not _writable(path):
            return StoreAccessError(f"cannot write the store {path}: the file is read-only ({text})")
        return StoreAccessError(f"cannot open the store {path} ({text})")
    if "malformed" in text or "not a database" in text:
        return CorruptStoreError(
            f"{path} is corrupt, truncated or not a SQLite database ({text}); "
            f"restore it from a backup or pass a different --db path"
        )
    return StoreError(f"cannot use the store {path} ({text})")


def _quoted(text: str) -> str:
    """``text`` quoted for a shell command in a message (:func:`shlex.quote`; imported here, where a message is
    written: a Claude Code hook process opens the store on every call, and seldom says one)."""
    import shlex  # noqa: PLC0415 - see above

    return shlex.quote(text)


def default_db_path() -> Path:
    """``$OTEL_REPEAT_GUARD_DB`` if set, else ``./repeat-guard.db``."""
    from pathlib import Path  # noqa: PLC0415 - as above

    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def _connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, uri=uri, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def check_schema(conn: sqlite3.Connection, path: Path | str, *, upgradable: bool = False) -> bool:
    """Raise a :class:`StoreError` unless the file is ours and readable; False if it is empty.

    With ``upgradable``, an older version we know how to upgrade passes (the caller upgrades it).
    """
    try:
        tables = user_tables(conn)
        if not tables:
            return False
        if "repeat_guard_schema" not in tables:
            found = ", ".join(sorted(tables))
            raise SchemaError(
                f"{path} is a SQLite database of another program (tables: {found}), "
                f"not an {APPLICATION} store; pass a different --db path"
            )
        row = conn.execute("SELECT application, version FROM repeat_guard_schema").fetchone()
    except sqlite3.Error as exc:  # damaged pages, or a WAL store SQLite cannot open here
        raise store_error(path, exc) from exc
    if row is None or row[0] != APPLICATION:
        raise SchemaError(f"{path} has a repeat_guard_schema table without an {APPLICATION} version row")
    version = row[1]
    if not isinstance(version, int):
        raise SchemaError(f"{path} has a store schema version {version!r} that is not a number")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{path} uses store schema version {version}, newer than the {SCHEMA_VERSION} this "
            f"otel-repeat-guard understands; upgrade otel-repeat-guard to read it"
        )
    if version < SCHEMA_VERSION and not (upgradable and version in UPGRADES):
        hint = (
            f"it is upgraded in place the next time a writer opens it: `otel-repeat-guard dashboard --db {_quoted(str(path))}`, "
            f"an `otel-repeat-guard ingest` or a SQLiteSpanExporter"
            if version in UPGRADES
            else "it was not written by a released otel-repeat-guard"
        )
        raise SchemaError(
            f"{path} uses store schema version {version}, older than the {SCHEMA_VERSION} this "
            f"otel-repeat-guard reads; {hint}"
        )
    return True


def _stored_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT version FROM repeat_guard_schema").fetchone()[0])


def _refuse_other_than_a_file(path: str) -> None:
    """A directory, a device or a pipe where the store's file should be: named as what it is, not as a store to
    create (which the demo would then refuse the same way) nor as SQLite's "unable to open database file".
    ``path`` as :func:`~otel_repeat_guard.store.path_text.path_text` gives it."""
    if is_dir(path):
        raise StoreAccessError(f"{path} is a directory: give the store's file, such as {joined(path, DEFAULT_DB)}")
    if exists(path) and not is_file(path):
        raise StoreAccessError(f"{path} is not a regular file: give the store's file, such as ./{DEFAULT_DB}")


def check_creatable(path: Path | str) -> None:
    """Raise :class:`StoreAccessError` (:class:`MissingDatabaseError` for a missing directory) unless a store can be
    opened or created at ``path``: it is a regular file or nothing yet, and its directory exists. (Without
    :mod:`pathlib`, which a Claude Code hook's call would import for it: :mod:`otel_repeat_guard.store.path_text`.)"""
    path = path_text(path)
    _refuse_other_than_a_file(path)
    if not exists(parent_of(path)):
        raise MissingDatabaseError(f"the directory for the store {path} does not exist")


def open_for_writing(path: Path | str) -> sqlite3.Connection:
    """Open (creating if needed) a store for the exporter: WAL mode, schema checked or created.

    Processes that open a new store at the same moment can get "database is locked" from
    SQLite without its busy handler being asked (switching a fresh file to WAL); they
    retry, for as long as the busy timeout.
    """
    path = path_text(path)  # str(Path(path)), without pathlib (a Claude Code hook's call opens the store)
    check_creatable(path)
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return _open_for_writing_once(path)
        except StoreError as exc:
            locked = isinstance(exc.__cause__, sqlite3.OperationalError) and "locked" in str(exc.__cause__)
            if not locked or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


def _open_for_writing_once(path: str) -> sqlite3.Connection:
    try:
        conn = _connect(path)
    except sqlite3.Error as exc:
        raise store_error(path, exc, writing=True) from exc
    try:
        conn.isolation_level = None  # explicit transactions only
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")  # serializes schema creation between processes
        if not check_schema(conn, path, upgradable=True):
            for statement in (*TABLES, *INDEXES, *MODEL_INDEXES, *DETECTION_INDEXES):
                conn.execute(statement)
            conn.execute("INSERT INTO repeat_guard_schema VALUES (?, ?)", (APPLICATION, SCHEMA_VERSION))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif (version := _stored_version(conn)) < SCHEMA_VERSION:
            for step in range(version, SCHEMA_VERSION):
                UPGRADES[step](conn)
            conn.execute("UPDATE repeat_guard_schema SET version = ?", (SCHEMA_VERSION,))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise store_error(path, exc, writing=True) from exc
        raise
    return conn


def _read_uri(path: Path) -> str:
    """A read-only URI; ``immutable`` when SQLite could not create the -shm file it needs otherwise.

    A WAL store is read through its -shm file, which the reader creates next to the store.
    In a directory this process cannot write, that fails. If there is no -wal file either,
    every committed row is in the main file and no writer has it open in WAL mode (it would
    have created the -wal), so the file is read as immutable instead.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if not _writable(path.resolve().parent) and not wal.exists():
        uri += "&immutable=1"
    return uri


def open_for_reading(path: Path | str, *, upgradable: bool = False) -> tuple[sqlite3.Connection, bool]:
    """Open an existing store read-only; returns the connection and whether it has a schema.

    Raises :class:`MissingDatabaseError` if there is no file and another :class:`StoreError`
    if it is not a store this version can read (with ``upgradable``: nor upgrade, for a writer
    that is about to open it). Never creates or changes the file.
    """
    from pathlib import Path  # noqa: PLC0415 - where a path is not on a Claude Code hook's way (store.path_text)

    path = Path(path)
    _refuse_other_than_a_file(str(path))
    if not path.is_file():
        raise MissingDatabaseError(
            f"no store at {path}: run `otel-repeat-guard demo --db {_quoted(str(path))}` to create one, or point "
            f"--db / ${DB_ENV} at the file your SQLiteSpanExporter writes"
        )
    try:
        conn = _connect(_read_uri(path), uri=True)
    except sqlite3.Error as exc:
        raise store_error(path, exc) from exc
    try:
        has_schema = check_schema(conn, path, upgradable=upgradable)
    except BaseException:
        conn.close()
        raise
    return conn, has_schema


def check_integrity(conn: sqlite3.Connection, path: Path | str) -> None:
    """Raise :class:`CorruptStoreError` unless ``PRAGMA quick_check`` finds the file sound.

    The schema check reads only the first pages; this walks every page of every table and
    index (about 30 ms per 10 MB), so damage deep in the file is named before any query.
    """
    try:
        problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.Error as exc:
        raise store_error(path, exc) from exc
    if problem != "ok":
        raise CorruptStoreError(
            f"{path} is corrupt ({_one_line(str(problem))}); restore it from a backup or pass a different --db path"
        )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def upgrade(path: Path | str) -> int | None:
    """Upgrade an older store in place (as a writer opening it does); the version it had, or None if current."""
    conn, has_schema = open_for_reading(path, upgradable=True)
    try:
        version = _stored_version(conn) if has_schema else SCHEMA_VERSION
    finally:
        conn.close()
    if version >= SCHEMA_VERSION:
        return None
    open_for_writing(path).close()
    return version
