"""Where the Claude Code command hook keeps each chain between its processes: SQLite or Redis.

Each hook call builds a guard, gives it the chain's state, lets it decide on the call's span, and keeps
what it then holds:

- :class:`SQLiteChains` (the default): one row per chain key in ``claude_code_chains`` of a file beside
  the store (``repeat-guard.db`` -> ``repeat-guard.chains.db``: the store's own file keeps only what its
  schema names). The read, the guard's decision and the write are one ``BEGIN IMMEDIATE`` transaction,
  so concurrent hook processes (parallel tool calls, subagents) take their turns and never lose a call.
  Rows idle for ``store_expiry_seconds`` are deleted.
- :class:`RedisChains` (``OTEL_REPEAT_GUARD_STORE=redis://...``): the guard's own shared chain store,
  atomic per call by its server-side script; nothing to load or keep here.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import orjson

from otel_repeat_guard.core.config import MEMORY_STORE, GuardConfig
from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.integrations._claude import json_text
from otel_repeat_guard.integrations._claude_calls import (
    OpenCall,
    due,
    wait_for_results,
    warn,
)
from otel_repeat_guard.integrations._claude_deciders import Counted, SpanDecider
from otel_repeat_guard.store.path_text import is_file, make_dirs, parent_of, path_text, stem_and_suffix, with_name
from otel_repeat_guard.store.schema import check_creatable, store_error

if TYPE_CHECKING:
    from otel_repeat_guard.integrations._claude_deciders import Deciders

BUSY_TIMEOUT_S = 0.3
"""How long a hook process waits for another's transaction (each holds it for a few milliseconds): past it, the
call is counted in this process's memory, from the chain as stored, and its write is lost (said in one line)."""
READ_TIMEOUT_S = 0.1
"""How long a plain read of the chains file waits (WAL: a reader waits for no writer, only for a recovery)."""
TABLE = "claude_code_chains"
OPEN = "claude_code_open_calls"
SETTLED = "claude_code_denied_calls"
_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    chain_key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    arguments_key BLOB,
    run INTEGER NOT NULL,
    waiting TEXT NOT NULL,
    updated_at REAL NOT NULL
)""",
    f"CREATE TABLE IF NOT EXISTS {OPEN} (call_id TEXT PRIMARY KEY, chain_key TEXT NOT NULL, hook_input TEXT NOT NULL,"
    " opened_at REAL NOT NULL, answer TEXT, answered_ns INTEGER)",
    f"CREATE INDEX IF NOT EXISTS {OPEN}_chain ON {OPEN}(chain_key)",
    f"CREATE TABLE IF NOT EXISTS {SETTLED} (call_id TEXT PRIMARY KEY, settled_at REAL NOT NULL)",
)
ANSWER_COLUMNS = (("answer", "TEXT"), ("answered_ns", "INTEGER"))
"""Added to a chains file written before calls waited for the calls Claude asked for before them."""


def chains_path(store: str) -> str:
    """The chain file beside the store: ``repeat-guard.db`` -> ``repeat-guard.chains.db`` (paths as
    ``str(pathlib.Path(...))`` gives them: :mod:`otel_repeat_guard.store.path_text`)."""
    stem, suffix = stem_and_suffix(store)
    return with_name(store, f"{stem}.chains{suffix or '.db'}")


class SQLiteChains:
    """The chains in SQLite, inside one immediate transaction (opened by :func:`chain_state`)."""

    def __init__(self, config: GuardConfig, conn: sqlite3.Connection, decider: Deciders = SpanDecider) -> None:
        self._config, self._conn, self._decider = config, conn, decider

    def drop(self, keys: Sequence[str]) -> None:
        for table in (TABLE, OPEN):
            self._conn.executemany(f"DELETE FROM {table} WHERE chain_key = ?", [(key,) for key in keys])

    def drop_session(self, prefix: str) -> None:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        for table in (TABLE, OPEN):
            self._conn.execute(
                f"DELETE FROM {table} WHERE chain_key = ? OR chain_key LIKE ? ESCAPE '\\'", (prefix, escaped + "/%")
            )

    def opened(self, key: str, hook_input: Mapping[str, Any]) -> None:
        """PreToolUse: the call is open until it counts (a call no JSON encoder can write counts when answered)."""
        call_id = hook_input.get("tool_use_id")
        stored = json_text(hook_input) if call_id else None
        if stored is not None:
            self._conn.execute(
                f"INSERT OR REPLACE INTO {OPEN} (call_id, chain_key, hook_input, opened_at) VALUES (?, ?, ?, ?)",
                (str(call_id), key, stored, time.time()),
            )

    def count(self, hook_input: Mapping[str, Any], key: str) -> Counted:
        """PostToolUse or PostToolUseFailure: the call is answered. The chain's calls that count now are
        counted, in order (see :mod:`~otel_repeat_guard.integrations._claude_calls`): this one among them, or
        not yet while a call Claude asked for before it still runs. A call never opened counts at once, after
        them; one counted already as refused does not count again."""
        call_id = str(hook_input.get("tool_use_id") or "")
        is_open = self._conn.execute(f"SELECT 1 FROM {OPEN} WHERE call_id = ?", (call_id,)).fetchone() is not None
        stored = json_text(hook_input) if is_open else None
        if stored is not None:
            self._conn.execute(
                f"UPDATE {OPEN} SET answer = ?, answered_ns = ? WHERE call_id = ?", (stored, time.time_ns(), call_id)
            )
        elif is_open:  # no encoder writes it (nested past the limits): it counts now, after the calls due
            self._conn.execute(f"DELETE FROM {OPEN} WHERE call_id = ?", (call_id,))
        answered = stored is not None
        counted = self._due(key, turn_over=False)
        if not answered:
            settled = self._conn.execute(f"DELETE FROM {SETTLED} WHERE call_id = ?", (call_id,)).rowcount
            if not settled:
                counted.append((dict(hook_input), None))
        return self._decide(key, counted)

    def settle(self, key: str) -> Counted:
        """The chain's turn is over (Stop, SubagentStop, a new prompt): its open calls count now."""
        return self._decide(key, self._due(key, turn_over=True))

    def _due(self, key: str, *, turn_over: bool) -> list[tuple[dict[str, Any], int | None]]:
        rows = self._conn.execute(
            f"SELECT call_id, hook_input, answer, answered_ns FROM {OPEN} WHERE chain_key = ? ORDER BY rowid", (key,)
        ).fetchall()
        calls = []
        for call_id, opened, answer, answered_ns in rows:
            try:
                calls.append(OpenCall(call_id, _loads(opened), _loads(answer) if answer else None, answered_ns))
            except ValueError:  # one odd row costs its call, never the chain
                warn("repeat guard: the stored call %r is unreadable; it is not counted", call_id)
                self._conn.execute(f"DELETE FROM {OPEN} WHERE call_id = ?", (call_id,))
        found = due(calls, turn_over)
        self._conn.executemany(f"DELETE FROM {OPEN} WHERE call_id = ?", [(call_id,) for call_id in found.closed])
        now = time.time()
        self._conn.executemany(
            f"INSERT OR REPLACE INTO {SETTLED} (call_id, settled_at) VALUES (?, ?)",
            [(call_id, now) for call_id in found.refused],
        )
        return found.counted

    def _decide(self, key: str, calls: Sequence[tuple[Mapping[str, Any], int | None]]) -> Counted:
        """One guard, given the chain's stored state, decides on ``calls`` (each with when it ended, None: now),
        in order; its state is stored again."""
        if not calls:
            return Counted([], [])
        one = self._decider(self._config, str(calls[0][0].get("session_id") or ""))
        row = self._conn.execute(
            f"SELECT tool, arguments_key, run, waiting FROM {TABLE} WHERE chain_key = ?", (key,)
        ).fetchone()
        if row is not None:
            tool, arguments_key, run, waiting = row
            try:
                one.restore_chain(key, [tool, arguments_key, run, orjson.loads(waiting)])
            except (TypeError, ValueError):  # one odd row costs its chain, never the call
                warn("repeat guard: the stored chain of %r is unreadable; it starts afresh", key)
        for call, end in calls:
            one.count(call, key, end=end)
        state = one.chain_state(key)
        now = time.time()
        if state is not None:
            tool, arguments_key, run, waiting = state
            self._conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (chain_key, tool, arguments_key, run, waiting, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key, tool, arguments_key, run, orjson.dumps(waiting).decode(), now),
            )
        expired = now - self._config.store_expiry_seconds
        self._conn.execute(f"DELETE FROM {TABLE} WHERE updated_at < ?", (expired,))
        self._conn.execute(f"DELETE FROM {OPEN} WHERE opened_at < ?", (expired,))
        self._conn.execute(f"DELETE FROM {SETTLED} WHERE settled_at < ?", (expired,))
        return one.counted(key)


class RedisChains:
    """The chains in the guard's shared chain store (Redis): each call's update is its script's."""

    def __init__(self, config: GuardConfig) -> None:
        self._config = config

    def drop(self, keys: Sequence[str]) -> None:
        from otel_repeat_guard.processor import RepeatGuardSpanProcessor

        guard = RepeatGuardSpanProcessor(self._config)
        for key in keys:
            guard.forget(key)

    def drop_session(self, prefix: str) -> None:
        from otel_repeat_guard.state.connection import RUN_PREFIX, connect, text_of, wire

        client = connect(self._config.chain_store, self._config.store_timeout_ms)
        found = client.scan_iter(match=wire(f"{RUN_PREFIX}{_glob_escape(prefix)}/*"), count=500)
        self.drop([prefix, *(text_of(name)[len(RUN_PREFIX) :] for name in found)])

    def opened(self, key: str, hook_input: Mapping[str, Any]) -> None:
        """Open calls are kept in SQLite only: in Redis, a call the permissions refuse is not counted."""

    def settle(self, key: str) -> Counted:
        return Counted([], [])

    def count(self, hook_input: Mapping[str, Any], key: str) -> Counted:
        one = SpanDecider(self._config, str(hook_input.get("session_id") or ""))  # the guard's shared store decides
        one.count(hook_input, key)
        return one.counted(key)


def _unreachable(config: GuardConfig) -> str | None:
    """Why the Redis of ``config`` cannot be used now (a ping within its timeout), or None."""
    from otel_repeat_guard.state.connection import connect
    from otel_repeat_guard.state.deadline import Deadline

    try:
        with Deadline(config.store_timeout_ms / 1000):
            connect(config.chain_store, config.store_timeout_ms).ping()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def wait_for_refusals(config: GuardConfig, store: str, key: str, hook_input: Mapping[str, Any]) -> None:
    """Before the transaction that counts an answered call: wait, briefly, for the transcript to show the results
    of the calls asked for before it that nothing answered (:func:`~otel_repeat_guard.integrations._claude_calls.
    wait_for_results`). A plain read: concurrent hook processes go on meanwhile. Only for PostToolUse and
    PostToolUseFailure; nothing to do in Redis."""
    path = chains_path(store)
    answered = hook_input.get("hook_event_name") in ("PostToolUse", "PostToolUseFailure")
    if not answered or config.shared_store or not is_file(path):
        return
    found = str(hook_input.get("tool_use_id") or "")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=READ_TIMEOUT_S)
        try:
            rows = conn.execute(
                f"SELECT call_id, hook_input, answer FROM {OPEN} WHERE chain_key = ? ORDER BY rowid", (key,)
            ).fetchall()
        finally:
            conn.close()
        calls = [
            OpenCall(call_id, _loads(opened), hook_input if call_id == found else _loads(answer) if answer else None)
            for call_id, opened, answer in rows
        ]
    except (sqlite3.Error, ValueError):  # an older file, or one odd row: the transaction settles what it can
        return
    if any(call.call_id == found for call in calls):  # a call never opened (an excluded tool) waits for none
        wait_for_results(calls)


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # a lone surrogate escape, which orjson refuses


def _add_answer_columns(conn: sqlite3.Connection) -> None:
    """Bring a chains file of an earlier version up to date (inside the transaction: one process does it)."""
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({OPEN})")}
    for column, kind in ANSWER_COLUMNS:
        if column not in columns:
            conn.execute(f"ALTER TABLE {OPEN} ADD COLUMN {column} {kind}")


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


@contextmanager
def chain_state(
    config: GuardConfig, store: str, decider: Deciders = SpanDecider
) -> Iterator[SQLiteChains | RedisChains]:
    """The chains as ``config`` keeps them: Redis for a shared store, else SQLite beside ``store``. A Redis that does
    not answer leaves the chains to SQLite until it does: a hook process lives for one event, so the guard's own
    fallback (this process's memory) would count every call as a run of one, and see no loop at all."""
    if config.shared_store:
        problem = _unreachable(config)
        if problem is None:
            yield RedisChains(config)
            return
        warn(
            "repeat guard: the chain store %s does not answer (%s); this call is counted in %s",
            safe_url(config.chain_store),
            problem,
            chains_path(store),
        )
        config = dataclasses.replace(config, chain_store=MEMORY_STORE)  # the guard that decides keeps them here
    path = chains_path(store)
    make_dirs(parent_of(path))
    check_creatable(store)  # a directory, a device: named, and no chains file made beside it (/dev/null.chains.db)
    try:
        conn = sqlite3.connect(path_text(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise store_error(path, error, writing=True) from error
    try:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL stays consistent; a power cut may lose the last call
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:  # SQLite's own words name no file: "unable to open database file"
            if not _busy(error):
                raise store_error(path, error, writing=True) from error
            with _in_memory(conn, path) as copy:  # another process holds the write lock past the wait
                yield SQLiteChains(config, copy, decider)
            return
        try:
            _add_answer_columns(conn)
            yield SQLiteChains(config, conn, decider)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


def _busy(error: sqlite3.Error) -> bool:
    return isinstance(error, sqlite3.OperationalError) and ("locked" in str(error) or "busy" in str(error))


@contextmanager
def _in_memory(conn: sqlite3.Connection, path: str) -> Iterator[sqlite3.Connection]:
    """The chains file busy past :data:`BUSY_TIMEOUT_S`: a copy in this process's memory (of the file as last
    committed; empty when even a read waits), for one call to be counted from and thrown away."""
    copy = sqlite3.connect(":memory:", isolation_level=None)
    try:
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(READ_TIMEOUT_S * 1000)}")
            conn.backup(copy)
            how = "from the chain as stored"
        except sqlite3.Error:
            how = "afresh (the file could not even be read)"
        for statement in _SCHEMA:
            copy.execute(statement)
        _add_answer_columns(copy)
        yield copy
    finally:
        copy.close()
    warn(
        "repeat guard: %s is busy (another process has held its write lock for over %.1f s): this call was "
        "counted in memory %s, and is not written there",
        path,
        BUSY_TIMEOUT_S,
        how,
    )
