"""A deadline per call to the shared store, whatever the server does.

redis-py's ``socket_timeout`` bounds each read: a server that trickles a reply one byte at a time, each
byte within the timeout, holds a command (and the span that waits for it) for as long as it likes. Here
each call to the store (:class:`Deadline`, around one store operation: every command it sends, a
script's reload after ``NOSCRIPT``, a connect and its handshake) has one deadline, ``store_timeout_ms``
after it starts, kept in a context variable. The connection's socket (:class:`DeadlineSocket`, which
:func:`connection_class` puts under every connection of the guard's pool) gives each connect, send
and receive only what is left of it, and none once it has passed: then redis-py raises its
``TimeoutError``, disconnects the connection (a reply abandoned half read is never read by the next
command) and the store falls back.

Interpreted, not compiled: the socket stands in for any socket object (TCP, Unix, TLS) by delegation,
and the connection classes subclass redis-py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

_deadline: ContextVar[float | None] = ContextVar("otel_repeat_guard_store_deadline", default=None)
"""When the current call to the store must be done (``time.monotonic()``), None outside one."""


def left() -> float | None:
    """Seconds left of the current call's deadline (None outside a call); raises ``socket.timeout`` once it passed."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the store call's deadline passed")
    return remaining


class Deadline:
    """One call to the store, done within ``seconds`` in all, and not instrumented (an instrumented Redis client
    makes no spans of the guard's calls). Nested, the nearer deadline holds."""

    __slots__ = ("_deadline", "_quiet", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def __enter__(self) -> None:
        deadline = time.monotonic() + self._seconds
        outer = _deadline.get()
        self._deadline: Token[float | None] = _deadline.set(deadline if outer is None or deadline < outer else outer)
        self._quiet = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))

    def __exit__(self, *exc: object) -> None:
        detach(self._quiet)
        _deadline.reset(self._deadline)


def _within(timeout: float | None) -> float | None:
    """``timeout`` (a socket's: None blocks, 0 polls), cut to what is left of the current call's deadline."""
    remaining = left()
    if remaining is None or (timeout is not None and timeout <= remaining):
        return timeout
    return remaining


class DeadlineSocket:
    """A connected socket whose every send and receive ends by the current call's deadline (and within the
    socket's own timeout, as redis-py sets it); everything else is the socket's own."""

    __slots__ = ("_sock", "_timeout")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._timeout: float | None = sock.gettimeout()

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._timeout

    def recv(self, *args: Any) -> Any:
        self._sock.settimeout(_within(self._timeout))
        return self._sock.recv(*args)

    def recv_into(self, *args: Any) -> Any:
        self._sock.settimeout(_within(self._timeout))
        return self._sock.recv_into(*args)

    def send(self, *args: Any) -> Any:
        self._sock.settimeout(_within(self._timeout))
        return self._sock.send(*args)

    def sendall(self, *args: Any) -> Any:
        self._sock.settimeout(_within(self._timeout))  # a timeout bounds the whole of sendall (Python >= 3.5)
        return self._sock.sendall(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _connect_within(connection: Any, connect: Callable[[], Any]) -> DeadlineSocket:
    """``connect()`` (a redis-py connection's own ``_connect``) given at most what is left of the deadline, its
    socket then kept to it."""
    configured = connection.socket_connect_timeout
    connection.socket_connect_timeout = _within(configured)
    try:
        return DeadlineSocket(connect())
    finally:
        connection.socket_connect_timeout = configured


_classes: dict[type, type] = {}


def connection_class(base: type) -> type:
    """``base``, a redis-py connection class (TCP, TLS, Unix socket), whose sockets keep the deadline."""
    found = _classes.get(base)
    if found is None:

        def _connect(self: Any) -> DeadlineSocket:
            return _connect_within(self, lambda: base._connect(self))  # type: ignore[attr-defined]  # noqa: SLF001 - the base class's own connect, extended

        found = type(f"Deadline{base.__name__}", (base,), {"_connect": _connect, "__module__": __name__})
        _classes[base] = found
    return found
