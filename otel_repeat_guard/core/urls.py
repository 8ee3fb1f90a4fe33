"""Store URLs: quoted without their credentials (:func:`safe_url`, the one function every message uses), and a
Redis URL checked as redis-py will read it (:func:`redis_url_problem`)."""

from __future__ import annotations

import importlib
import inspect
import re

_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*:[/\\]+"
"""A URL's scheme and the slashes after it (one, two or three, or backslashes): ``u:pw@h`` has none. (Both patterns
are compiled where a URL is quoted, by :mod:`re`'s cache: a Claude Code hook's call quotes none, and their compile
cost it about a hundredth of it.)"""
_SECRET_PARAMETER = r"([?&;][^=&;#]*(?:pass|pwd|secret|token|key|auth|cred)[^=&;#]*=)[^&;#]*"
"""A query parameter that may hold a secret (redis-py's ``?password=``, a ``token=``, an ``api_key=``): its value
(any case)."""


def safe_url(url: str) -> str:
    """``url`` as a log line or an error may quote it: without its credentials, however malformed it is.

    The one function that quotes a store URL (a Redis chain store, a ClickHouse ``--store`` or ``--from``): the
    user part (user and password) becomes ``***``, and so does the value of every query parameter that may hold a
    secret (``password=``, ``token=``, ``…key=``, ``auth…=``). The user part ends at the last ``@`` before the
    query: a password with ``/``, ``#`` or ``@`` in it is dropped whole; one with a ``?`` in it too (an ``@`` after
    the ``?`` with no ``=`` before it). A URL with no ``scheme:/`` (``u:pw@h:8123/db``) or with one slash
    (``clickhouse:/u:pw@h``) loses its user part the same way."""
    scheme = re.match(_SCHEME, url)
    start = scheme.end() if scheme is not None else 0
    query = url.find("?", start)
    at = url.rfind("@", start, len(url) if query < 0 else query)
    if at < 0 and query >= 0:  # no "@" before the "?": a "?" inside a password, unless a parameter came first
        later = url.rfind("@", query)
        at = later if later >= 0 and "=" not in url[start:later] else -1
    if at >= 0:
        url = url[:start] + "***" + url[at:]
    return re.sub(_SECRET_PARAMETER, r"\g<1>***", url, flags=re.IGNORECASE)


def redis_url_problem(url: str) -> str | None:
    """What redis-py's own URL parser (the one ``Redis.from_url`` uses) finds wrong with ``url``: None when
    nothing, or when redis-py (the ``redis`` extra) is not installed, where the scheme check is all there is."""
    try:
        connection = importlib.import_module("redis.connection")  # an optional extra, only for a Redis URL
    except ImportError:
        return None
    try:
        options = connection.parse_url(url)
    except Exception as error:  # its ValueError, or whatever a malformed URL makes urllib raise
        return str(error) or type(error).__name__
    kind = options.pop("connection_class", connection.Connection)
    if kind is connection.UnixDomainSocketConnection and not options.get("path"):
        return "a unix:// URL needs the socket's path, as unix:///run/redis.sock"
    database = url.partition("://")[2].partition("?")[0].partition("/")[2]
    if kind is not connection.UnixDomainSocketConnection and not (
        (database.isascii() and database.isdigit()) or not database
    ):
        return f"the database after the host must be a number, got {database!r}"
    known = {name for part in (*inspect.getmro(kind), connection.ConnectionPool) for name in _parameters(part)}
    unknown = sorted(set(options) - known)  # else accepted here, and a TypeError in every call to the store
    return f"unknown option(s) {', '.join(unknown)}" if unknown else None


def _parameters(kind: type) -> list[str]:
    """The named parameters of ``kind``'s own ``__init__``."""
    init = kind.__dict__.get("__init__")
    if init is None:
        return []
    return [p.name for p in inspect.signature(init).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
