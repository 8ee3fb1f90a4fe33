"""The connection to Redis that the shared chain store and the shared inbox use, and what happens when it
fails: every call has a short timeout and no retries; a failed call is counted on
``repeat_tool_guard.store_failures``, logged once per outage, and for a second after it calls go
straight to the caller's fallback (see ``docs/distributed.md``)."""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider

from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.state.deadline import connection_class
from otel_repeat_guard.version import __version__

logger = logging.getLogger("otel_repeat_guard")

PREFIX = "repeat_tool_guard:"
"""Every key the guard writes starts with this."""
RUN_PREFIX = PREFIX + "run:"
INBOX_PREFIX = PREFIX + "inbox:"
STORE_FAILURES = "repeat_tool_guard.store_failures"
RETRY_AFTER_SECONDS = 1.0
"""After a failed call, how long calls go straight to the process-local fallback before Redis is tried again."""

INBOX_PUT = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

INBOX_DRAIN = """
local items = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return items
"""


# -- the connection, and what happens when it fails ------------------------------------------


def connect(url: str, timeout_ms: int) -> Any:
    """A redis-py client for ``url`` without retries, whose every read, write and connect gives up after
    ``timeout_ms``, and within a :class:`~otel_repeat_guard.state.deadline.Deadline` by its end (its
    sockets keep it: :mod:`otel_repeat_guard.state.deadline`)."""
    try:
        redis = importlib.import_module("redis")
        backoff = importlib.import_module("redis.backoff")
        retry = importlib.import_module("redis.retry")
        connections = importlib.import_module("redis.connection")
    except ImportError as error:
        raise ValueError(
            "chain_store is a Redis URL, but the redis package is not installed: pip install 'otel-repeat-guard[redis]'"
        ) from error
    seconds = timeout_ms / 1000
    base = connections.parse_url(url).get("connection_class", connections.Connection)  # TCP, TLS or a Unix socket
    return redis.Redis.from_url(
        url,
        connection_class=connection_class(base),
        socket_timeout=seconds,
        socket_connect_timeout=seconds,
        retry=retry.Retry(backoff.NoBackoff(), 0),
        health_check_interval=0,
    )


_inherited: list[Any] = []
"""In a forked child, the clients made before the fork: never used nor closed here (their pool's lock may be held
by a thread that is not in this process), and kept so that the garbage collector never closes them either."""


def reconnect(client: Any, url: str, timeout_ms: int) -> Any:
    """In a forked child: a new client for ``url`` (as :func:`connect`), the parent's ``client`` left alone."""
    _inherited.append(client)
    return connect(url, timeout_ms)


def _reason(error: BaseException) -> str:
    name = type(error).__name__
    if "Timeout" in name:
        return "timeout"
    if "Connection" in name or isinstance(error, OSError):
        return "connection"
    return "error"


class FailureCounter:
    """``repeat_tool_guard.store_failures``: calls to the shared store that fell back, by operation and reason
    (``timeout``, ``connection``, ``error``; ``unavailable`` when not tried during an outage)."""

    __slots__ = ("_counts", "_lock")

    def __init__(self, meter_provider: MeterProvider) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        meter_provider.get_meter("otel_repeat_guard", __version__).create_observable_counter(
            STORE_FAILURES,
            callbacks=[self._observe],
            unit="{call}",
            description="Calls to the shared chain store (Redis) that failed or were not tried, and fell back "
            "to this process's state, by operation and reason.",
        )

    def add(self, operation: str, reason: str) -> None:
        key = (operation, reason)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def after_fork(self) -> None:
        """In a forked child: a fresh lock, and no count (the child counts its own)."""
        self._lock = threading.Lock()
        self._counts.clear()

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._counts.items())
        return [Observation(n, {"operation": operation, "reason": reason}) for (operation, reason), n in totals]


_counters: dict[int, tuple[MeterProvider, FailureCounter]] = {}
_counters_lock = threading.Lock()


def failure_counter(meter_provider: MeterProvider | None = None) -> FailureCounter:
    """The failure counter of ``meter_provider`` (default: the global one): one per provider, shared by every
    store and inbox on it (an instrument name can be registered only once)."""
    provider = get_meter_provider() if meter_provider is None else meter_provider
    with _counters_lock:
        found = _counters.get(id(provider))
        if found is None:
            found = _counters[id(provider)] = (provider, FailureCounter(provider))
        return found[1]


class StoreHealth:
    """Whether to try the store now; counts each fallback and logs once when an outage starts and ends."""

    __slots__ = ("_counter", "_down", "_retry_at", "_where")

    def __init__(self, where: str, counter: FailureCounter) -> None:
        self._where = where
        self._counter = counter
        self._down = False
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        return self._down

    def usable(self, operation: str) -> bool:
        """False (and the call counted as ``unavailable``) during the pause after a failure."""
        if not self._down or time.monotonic() >= self._retry_at:
            return True
        self._counter.add(operation, "unavailable")
        return False

    def failed(self, operation: str, error: BaseException) -> None:
        self._counter.add(operation, _reason(error))
        self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
        if not self._down:
            self._down = True
            logger.warning(
                "repeat guard: the chain store %s failed (%s: %s); counting in this process until it is back",
                self._where,
                type(error).__name__,
                error,
            )

    def missed(self, operation: str, error: BaseException) -> None:
        """An operation that is no run's call failed (a scan of every key): counted and said, the store left up."""
        self._counter.add(operation, _reason(error))
        logger.warning(
            "repeat guard: %s on the chain store %s failed (%s: %s); answered from this process alone",
            operation,
            self._where,
            type(error).__name__,
            error,
        )

    def after_fork(self) -> None:
        """In a forked child, with a connection of its own: the store is tried at once."""
        self._down = False
        self._retry_at = 0.0

    def succeeded(self) -> None:
        if self._down:
            self._down = False
            logger.warning("repeat guard: the chain store %s is back", self._where)


_healths: dict[tuple[str, int], StoreHealth] = {}


def store_health(url: str, meter_provider: MeterProvider | None = None) -> StoreHealth:
    """The health of the store at ``url``: one per URL (and meter provider) in this process, shared by the
    guard's chains and its inbox, so an outage is logged once and both skip Redis while it lasts."""
    provider = get_meter_provider() if meter_provider is None else meter_provider
    counter = failure_counter(provider)
    with _counters_lock:
        key = (url, id(provider))
        found = _healths.get(key)
        if found is None:
            found = _healths[key] = StoreHealth(safe_url(url), counter)
        return found


def _after_fork() -> None:
    """In a forked child: a fresh lock for the registries, and every counter and health afresh."""
    global _counters_lock  # noqa: PLW0603 - the module's own lock, renewed
    _counters_lock = threading.Lock()
    for _, counter in _counters.values():
        counter.after_fork()
    for health in _healths.values():
        health.after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork)


class Quiet:
    """Instrumentation suppressed for the block: an instrumented Redis client makes no spans of the guard's calls."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))

    def __exit__(self, *exc: object) -> None:
        detach(self._token)


def wire(text: str) -> bytes:
    """A key or a name as Redis gets it: UTF-8, a lone surrogate (which a Python string may hold, from a model's cut
    output or a Node JSON escape) passed as its three bytes, where redis-py's strict encoding raised, and the failed
    call took the store down for every run of the process. :func:`text_of` reads it back the same."""
    return text.encode("utf-8", "surrogatepass")


def text_of(value: Any) -> str:
    """What Redis returned, as text: :func:`wire`'s bytes read back exactly; other bytes that are not UTF-8, each
    as U+FFFD."""
    if not isinstance(value, bytes):
        return str(value)
    try:
        return value.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return value.decode("utf-8", "replace")
