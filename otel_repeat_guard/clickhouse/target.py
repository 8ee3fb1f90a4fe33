"""Where a ClickHouse store is: parsed from ``--store`` (or ``$OTEL_REPEAT_GUARD_DASHBOARD_STORE``), credentials apart.

``clickhouse://USER@HOST:PORT/DATABASE?table=TABLE[&secure=1]`` names a server (HTTP interface, port 8123 by
default, 8443 with ``secure=1``); ``chdb://DIR`` names a chdb data directory. Both default to the Collector
exporter's database ``otel`` and table ``otel_traces``. ``&rollup=DB`` names the database that holds the
guard's rollup of that table (``clickhouse/rollup.py``): the reader then reads the rolled-up rows.

The password never travels on the command line (where ``ps`` and shell history would show it): a URL with
one is refused. It comes from ``$OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD``, else from the file that
``$OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD_FILE`` names (a Docker or Kubernetes secret), else it is empty.

Every wait on a server is bounded: ``connect_timeout`` (seconds, :data:`CONNECT_TIMEOUT_S` unless the URL says
``&connect_timeout=S``) for the connection and the server's first answer, ``send_receive_timeout``
(:data:`SEND_RECEIVE_TIMEOUT_S`, ``&send_receive_timeout=S``) for each later wait on its bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.store.schema import StoreError

PASSWORD_ENV = "OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD"
PASSWORD_FILE_ENV = "OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD_FILE"
USER_ENV = "OTEL_REPEAT_GUARD_CLICKHOUSE_USER"
DEFAULT_DATABASE = "otel"
DEFAULT_TABLE = "otel_traces"
SCHEMES = ("clickhouse", "chdb")
CONNECT_TIMEOUT_S = 5
"""How long connecting to a server may take, its first answer (its version) included: a port that accepts the
connection and never answers is refused after this."""
SEND_RECEIVE_TIMEOUT_S = 60
"""How long a query may wait for the server's next bytes (a server busy on a long query sends its progress more
often than this, when the reader's user may set ``send_progress_in_http_headers``)."""
MAX_TIMEOUT_S = 86_400
TIMEOUTS = ("connect_timeout", "send_receive_timeout")
"""The store URL's options that bound the waits on a server, in whole seconds."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # fullmatch: "$" would let a final "\n" through


class TargetError(StoreError, ValueError):
    """A store URL that cannot be used, in one line."""


@dataclass(frozen=True, slots=True)
class Target:
    """One ClickHouse table to read: on a server (``host``) or in a chdb directory (``path``)."""

    database: str = DEFAULT_DATABASE
    table: str = DEFAULT_TABLE
    host: str | None = None
    port: int = 8123
    user: str = "default"
    secure: bool = False
    path: Path | None = None
    password: str = field(default="", repr=False)
    rollup: str | None = None
    """The database of the guard's rollup of the table (``?rollup=``), if any: never the table's own."""
    connect_timeout: int = CONNECT_TIMEOUT_S
    """Seconds for connecting to the server and its first answer (``&connect_timeout=``)."""
    send_receive_timeout: int = SEND_RECEIVE_TIMEOUT_S
    """Seconds for each later wait on the server's bytes (``&send_receive_timeout=``)."""

    @property
    def embedded(self) -> bool:
        return self.path is not None

    def describe(self) -> str:
        """The target as the user may see it (never the password)."""
        rolled = "" if self.rollup is None else f", rollup {self.rollup}"
        if self.path is not None:
            return f"{safe_url(f'chdb://{self.path}')} ({self.database}.{self.table}{rolled})"
        scheme = "https" if self.secure else "http"
        return f"{self.user}@{scheme}://{self.host}:{self.port} ({self.database}.{self.table}{rolled})"


def is_clickhouse(store: str) -> bool:
    """Whether ``store`` names a ClickHouse store rather than a SQLite file."""
    return store.partition("://")[0].lower() in SCHEMES and "://" in store


def _identifier(value: str, what: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise TargetError(f"the {what} name {value!r} is not a plain ClickHouse identifier (letters, digits, _)")
    return value


def _password(environ: Mapping[str, str]) -> str:
    if environ.get(PASSWORD_ENV):
        return environ[PASSWORD_ENV]
    file = environ.get(PASSWORD_FILE_ENV)
    if not file:
        return ""
    try:
        return Path(file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TargetError(
            f"cannot read the ClickHouse password file ${PASSWORD_FILE_ENV} ({file}): {exc.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise TargetError(
            f"cannot read the ClickHouse password file ${PASSWORD_FILE_ENV} ({file}): it is not UTF-8 text"
        ) from None


def parse(store: str, environ: Mapping[str, str] | None = None) -> Target:
    """The target ``store`` names; a TargetError (one line) when it cannot be used."""
    env = os.environ if environ is None else environ
    shown = safe_url(store)  # the URL as every message here quotes it: no user, no password
    try:
        parts = urlsplit(store)
    except ValueError as exc:  # an unclosed [ of an IPv6 address
        raise TargetError(f"{shown!r} is no valid store URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or not store[len(parts.scheme) :].startswith("://"):
        if not parts.scheme:  # a file name, most likely: the embedded store is --db
            raise TargetError(
                f"{shown!r} is no store URL: use clickhouse://… or chdb://…, or --db FILE for a SQLite store"
            )
        raise TargetError(f"{shown!r} is no ClickHouse store URL: use clickhouse://… or chdb://…")
    if parts.password is not None or ":" in unquote(parts.username or ""):  # %3A: a password in disguise
        raise TargetError(
            f"a password in the store URL is refused (the command line is visible to others): "
            f"set ${PASSWORD_ENV}, or ${PASSWORD_FILE_ENV} to a file holding it"
        )
    query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    known = ("table", "database", "secure", "rollup", *TIMEOUTS)
    unknown = sorted(set(query) - set(known))
    if unknown:
        named = ", ".join(unknown) if all(_IDENTIFIER.fullmatch(key) for key in unknown) else f"in {shown!r}"
        raise TargetError(f"unknown store URL option(s) {named} (known: {', '.join(known)})")
    connect_timeout, send_receive_timeout = (_seconds(query, name) for name in TIMEOUTS)
    table = _identifier(query.get("table") or DEFAULT_TABLE, "table")
    if scheme == "chdb":
        if parts.username is not None:
            raise TargetError(f"{shown!r}: chdb:// takes a data directory (chdb://DIR), not a user")
        path = unquote(parts.netloc + parts.path)
        if not path:
            raise TargetError("chdb:// needs a data directory: chdb://DIR")
        database = _identifier(query.get("database") or DEFAULT_DATABASE, "database")
        return Target(database=database, table=table, path=Path(path), rollup=_rollup(query, database))
    if not parts.hostname:
        raise TargetError("clickhouse:// needs a host: clickhouse://USER@HOST:8123/DATABASE?table=otel_traces")
    secure = query.get("secure", "").lower() in ("1", "true", "yes")
    try:
        port = parts.port or (8443 if secure else 8123)
    except ValueError:
        raise TargetError(f"the port in {shown!r} is not a number from 1 to 65535") from None
    database = _identifier(parts.path.strip("/") or query.get("database") or DEFAULT_DATABASE, "database")
    user = unquote(parts.username) if parts.username else env.get(USER_ENV) or "default"
    return Target(
        database=database,
        table=table,
        host=parts.hostname,
        port=port,
        user=user,
        secure=secure,
        password=_password(env),
        rollup=_rollup(query, database),
        connect_timeout=connect_timeout,
        send_receive_timeout=send_receive_timeout,
    )


def _seconds(query: Mapping[str, str], name: str) -> int:
    """The URL's ``name`` option: whole seconds from 1 to a day; its default when the URL does not say."""
    default = CONNECT_TIMEOUT_S if name == "connect_timeout" else SEND_RECEIVE_TIMEOUT_S
    text = query.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_TIMEOUT_S):
        raise TargetError(
            f"the store URL option {name}={text[:40]!r} is not a whole number of seconds from 1 to {MAX_TIMEOUT_S} "
            f"(the default is {default})"
        )
    return int(text)


def _rollup(query: Mapping[str, str], database: str) -> str | None:
    """The rollup database the URL names (``rollup=``), if any: a database of the guard's own."""
    if "rollup" not in query:
        return None
    rollup = _identifier(query["rollup"], "rollup database")
    if rollup == database:
        raise TargetError(
            f"the rollup database {rollup!r} is the table's own database: name a database of the guard's own "
            "(nothing is written beside your table)"
        )
    return rollup
