"""The two engines that answer the reader's SQL: a ClickHouse server (``clickhouse-connect``) and chdb.

Every value travels as a query parameter (``{name:Type}`` in the SQL text, bound by ClickHouse itself), the
table's database and name included (``{db:Identifier}``). Each failure becomes one
:class:`ClickHouseStoreError` line naming the target and the cause: refused connection, refused
credentials, a missing database or table, a query ClickHouse rejected.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import pandas as pd

from otel_repeat_guard.clickhouse.target import PASSWORD_ENV, PASSWORD_FILE_ENV, Target
from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.store.schema import StoreError

Value = int | float | str | Sequence[str] | Sequence[int]

_CODE = re.compile(r"Code: (\d+)")
_AUTH_CODES = {
    192,
    193,
    194,
    195,
    516,
}  # UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, IP_ADDRESS_NOT_ALLOWED, AUTHENTICATION_FAILED
_MISSING_CODES = {60, 81}  # UNKNOWN_TABLE, UNKNOWN_DATABASE
SETTINGS = {"prefer_column_name_to_alias": 1}
"""The reader's SQL names its results as the store's columns (``SUM(calls) AS calls``): a column's name wins."""
_MISSING_CLIENT = (
    "reading ClickHouse needs the clickhouse extra: pip install 'otel-repeat-guard[clickhouse]' ({name} is missing)"
)


class ClickHouseStoreError(StoreError):
    """The ClickHouse store cannot be read; the message (one line) says which and why."""


class Client(Protocol):
    """What the reader needs of an engine: a query's rows as a DataFrame."""

    target: Target

    def frame(self, sql: str, params: Mapping[str, Value]) -> pd.DataFrame: ...

    def close(self) -> None: ...


class WritingClient(Client, Protocol):
    """An engine that also runs statements with no rows: the rollup (``rolling``) writes its own database."""

    def execute(self, sql: str, params: Mapping[str, Value] | None = None) -> None: ...


def first_line(text: str, limit: int = 300) -> str:
    """The first meaningful line of an engine's message, bounded."""
    for raw in str(text).splitlines():
        line = raw.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return "(no message)"


_HEADER = re.compile(
    r"((?:proxy-)?authorization|(?:set-)?cookie|x-clickhouse-(?:key|user)|[\w-]*(?:token|secret|passw|api-?key)[\w-]*)"
    r"(['\"]?\s*[:=]\s*)(?:'[^']*'|\"[^\"]*\"|[^\r\n]*)",
    re.IGNORECASE,
)
"""A header-like entry that may carry credentials, as a header line or a quoted mapping entry: its value."""
_AUTH_SCHEME = re.compile(r"\b(Basic|Bearer|Digest|Negotiate)\s+\S+", re.IGNORECASE)
_BASE64ISH = re.compile(
    r"(?<![\w+/=])(?=[A-Za-z0-9+/]*\d)(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{16,}={0,2}"
)
"""A run of 16 base64 characters or more, with a digit, a capital and a small letter: an encoded credential."""
_SHORTEST_SECRET = 4
"""A password shorter than this is not searched for as it is (its letters would be struck out of every word)."""


def scrubbed(target: Target, text: str) -> str:
    """A server's error text with nothing of the request's credentials: a proxy or a debugging endpoint may
    reflect the request's headers. The password (as sent, and in base64 as Basic authentication sends it), the
    value of every header-like ``Authorization``, ``Cookie``, ``X-ClickHouse-Key``, ``…token…`` entry, whatever
    follows ``Basic`` or ``Bearer``, and every base64-looking run of 16 characters or more become ``***``."""
    if target.password:
        basic = base64.b64encode(f"{target.user}:{target.password}".encode()).decode()
        for secret in (basic, target.password):
            if len(secret) >= _SHORTEST_SECRET:
                text = text.replace(secret, "***")
    text = _HEADER.sub(lambda found: f"{found.group(1)}{found.group(2)}***", text)
    text = _AUTH_SCHEME.sub(lambda found: f"{found.group(1)} ***", text)
    return _BASE64ISH.sub("***", text)


def explain(target: Target, exc: BaseException) -> ClickHouseStoreError:
    """One line for what went wrong reading ``target`` (the server's text scrubbed of credentials first)."""
    text = scrubbed(target, str(exc))
    message = first_line(text)
    code_match = _CODE.search(text)
    code = int(code_match.group(1)) if code_match else None
    where = target.describe()
    if code in _AUTH_CODES:
        return ClickHouseStoreError(
            f"ClickHouse at {where} refused the credentials of user {target.user!r} "
            f"(the password comes from ${PASSWORD_ENV} or ${PASSWORD_FILE_ENV})"
        )
    if code in _MISSING_CODES:
        return ClickHouseStoreError(
            f"ClickHouse at {where} has no table {target.database}.{target.table}: "
            "is the Collector's clickhouse exporter writing there (database and traces_table_name)?"
        )
    refused = ("Connection refused", "Failed to establish", "Max retries exceeded", "timed out", "Name or service")
    if any(cause in text for cause in refused):
        return ClickHouseStoreError(f"cannot reach ClickHouse at {where}: {_network_cause(text)}")
    if re.search(r"HTTP status (404|405|301|302|400)\b", text) and code is None:  # a web server, a proxy
        return ClickHouseStoreError(
            f"ClickHouse at {where} failed: {message} (is that port ClickHouse's HTTP interface: 8123, or 8443 with "
            "secure=1?)"
        )
    return ClickHouseStoreError(f"ClickHouse at {where} failed: {message}")


def _network_cause(text: str) -> str:
    for cause in ("Connection refused", "timed out", "Name or service not known"):
        if cause in text:
            return cause.lower()
    return first_line(text, 160)


_ESCAPES = str.maketrans({c: "\\" + c for c in ("\\", "'", "`", "\t", "\n")})
"""ClickHouse's escapes of a string parameter's text (read as TSV reads a field: ``\\`` starts an escape there)."""


def parameter_text(value: Value) -> str:
    """The text of a query parameter as ClickHouse parses it: a string's escapes written out (a bare ``\\``,
    tab or newline would be read as an escape or end the value), an array's strings quoted and escaped the same way.

    This is the text clickhouse-connect sends a server for the same value (its ``format_bind_value``; a test holds
    them equal), so the chdb and server clients read one value alike. chdb takes text only."""
    if isinstance(value, str):
        return value.translate(_ESCAPES)
    if isinstance(value, (int, float)):
        return repr(value)
    items = [f"'{item.translate(_ESCAPES)}'" if isinstance(item, str) else repr(int(item)) for item in value]
    return "[" + ", ".join(items) + "]"


class ChdbClient:
    """chdb on a data directory. chdb holds one session per process: this module shares it per directory."""

    _lock = threading.Lock()
    _sessions: ClassVar[dict[str, Any]] = {}

    def __init__(self, target: Target) -> None:
        try:
            from chdb import session as chdb_session  # noqa: PLC0415 - optional: the clickhouse extra
        except ImportError:
            raise ClickHouseStoreError(_MISSING_CLIENT.format(name="chdb")) from None
        self.target = target
        key = str(target.path)
        if target.path is None or not target.path.is_dir():  # chdb would make it: a typo would read as empty
            raise ClickHouseStoreError(
                f"no chdb data directory at {safe_url(str(target.path))}: give the directory chdb or ClickHouse keeps the table in"
            )
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                for other in list(self._sessions.values()):  # one session at a time: close the other directory's
                    other.close()
                self._sessions.clear()
                said: list[str] = []
                try:
                    with _engine_output(said):
                        session = chdb_session.Session(key)  # type: ignore[no-untyped-call]
                    for name, value in SETTINGS.items():
                        session.query(f"SET {name} = {value}")  # type: ignore[no-untyped-call]
                except Exception as exc:
                    raise _unopened(target, exc, "".join(said)) from None
                self._sessions[key] = session
        self._session = session

    def frame(self, sql: str, params: Mapping[str, Value]) -> pd.DataFrame:
        text = {name: parameter_text(value) for name, value in params.items()}
        try:
            with self._lock:
                result = self._session.query(sql, "DataFrame", params=text)
        except Exception as exc:
            raise explain(self.target, exc) from None
        return result if isinstance(result, pd.DataFrame) else pd.DataFrame()

    def execute(self, sql: str, params: Mapping[str, Value] | None = None) -> None:
        """A statement with no rows (tests and benchmarks build their tables with it)."""
        text = {name: parameter_text(value) for name, value in (params or {}).items()}
        try:
            with self._lock:
                self._session.query(sql, "CSV", params=text)
        except Exception as exc:
            raise explain(self.target, exc) from None

    def close(self) -> None:
        """Nothing per reader: the directory's session lives as long as the process (see :func:`close_all`)."""

    @classmethod
    def close_all(cls) -> None:
        with cls._lock:
            for session in cls._sessions.values():
                session.close()
            cls._sessions.clear()


@contextlib.contextmanager
def _engine_output(said: list[str]) -> Iterator[None]:
    """What chdb's engine writes to the process's stderr (file descriptor 2, past Python) while opening a
    directory, kept in ``said`` instead: a refusal is one line of ours, not the engine's lines too."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no stderr to keep apart
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said.append(sink.read(64_000).decode("utf-8", "replace"))


def _unopened(target: Target, exc: BaseException, said: str) -> ClickHouseStoreError:
    """One line for a chdb directory that cannot be opened (``said``: what the engine wrote meanwhile); most
    often another process has it open."""
    if "Cannot lock file" in said or "Cannot lock file" in str(exc):
        return ClickHouseStoreError(
            f"cannot open the chdb directory {target.path}: another process has it open (chdb opens a directory in "
            "one process at a time: stop that one, or read a copy of the directory)"
        )
    cause = next((first_line(line) for line in said.splitlines() if "Exception" in line), None)
    return (
        explain(target, exc)
        if cause is None
        else ClickHouseStoreError(f"cannot open the chdb directory {target.path}: {cause}")
    )


class ServerClient:
    """A ClickHouse server through ``clickhouse-connect`` (HTTP). Connecting checks the credentials.

    Every wait is bounded by the target's timeouts: connecting and the server's first answer (its version, asked
    at connect) by ``connect_timeout``, each later wait on its bytes by ``send_receive_timeout``. A port that
    accepts the connection and never answers is refused after ``connect_timeout``, naming the option to raise."""

    def __init__(self, target: Target) -> None:
        try:
            import clickhouse_connect  # noqa: PLC0415 - optional: the clickhouse extra
            from clickhouse_connect.driver.httpclient import HttpClient  # noqa: PLC0415 - the clickhouse extra
            from urllib3 import Timeout  # noqa: PLC0415 - clickhouse-connect's transport
        except ImportError:
            raise ClickHouseStoreError(_MISSING_CLIENT.format(name="clickhouse-connect")) from None
        self.target = target
        # Its driver logs each failure itself; the caller gets it as one line instead.
        logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
        logging.getLogger("clickhouse_connect").propagate = False
        try:
            self._client = clickhouse_connect.get_client(
                host=target.host,
                port=target.port,
                username=target.user,
                password=target.password,
                database=target.database,
                secure=target.secure,
                connect_timeout=target.connect_timeout,
                send_receive_timeout=target.connect_timeout,  # the first answer: the server's version
                autogenerate_session_id=False,
                settings=dict(SETTINGS),
            )
        except Exception as exc:
            raise _timed_out(target, exc, "connect_timeout") or explain(target, exc) from None
        if isinstance(self._client, HttpClient):  # get_client's, for the HTTP interface; else the first bound stays
            self._client.timeout = Timeout(connect=target.connect_timeout, read=target.send_receive_timeout)

    def frame(self, sql: str, params: Mapping[str, Value]) -> pd.DataFrame:
        try:
            frame: pd.DataFrame = self._client.query_df(sql, parameters=dict(params))
        except Exception as exc:
            raise _timed_out(self.target, exc, "send_receive_timeout") or explain(self.target, exc) from None
        return frame

    def execute(self, sql: str, params: Mapping[str, Value] | None = None) -> None:
        """A statement with no rows (the rollup's, into its own database)."""
        try:
            self._client.command(sql, parameters=dict(params or {}))
        except Exception as exc:
            raise _timed_out(self.target, exc, "send_receive_timeout") or explain(self.target, exc) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a broken connection: nothing left to tell
            self._client.close()


def _timed_out(target: Target, exc: BaseException, option: str) -> ClickHouseStoreError | None:
    """One line for a wait past ``option``'s bound (``connect_timeout`` or ``send_receive_timeout``): which bound,
    and how to raise it; None when ``exc`` is no timeout."""
    if "timed out" not in str(exc) or _CODE.search(str(exc)):
        return None
    seconds = getattr(target, option)
    if option == "connect_timeout":
        what, hint = "connecting and its first answer", "is that port ClickHouse's HTTP interface? Raise"
    else:
        what, hint = "waiting on a query's next bytes", "narrow the time range, or raise"
    return ClickHouseStoreError(
        f"ClickHouse at {target.describe()} gave no answer within {option}={seconds} s ({what}): {hint} the bound "
        f"with the store URL option {option}=SECONDS"
    )


def connect(target: Target) -> WritingClient:
    """The client for ``target``: chdb for a directory, else the server."""
    return ChdbClient(target) if target.embedded else ServerClient(target)
