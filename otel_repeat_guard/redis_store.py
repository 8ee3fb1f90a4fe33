"""Where the Redis chain store's names were first: they live in :mod:`otel_repeat_guard.state.redis` (the
store) and :mod:`otel_repeat_guard.state.connection` (the connection and its failures) now."""

from otel_repeat_guard.config import safe_url
from otel_repeat_guard.state.connection import (
    INBOX_DRAIN,
    INBOX_PREFIX,
    INBOX_PUT,
    PREFIX,
    RETRY_AFTER_SECONDS,
    RUN_PREFIX,
    STORE_FAILURES,
    FailureCounter,
    Quiet,
    StoreHealth,
    connect,
    failure_counter,
    reconnect,
    store_health,
    text_of,
)
from otel_repeat_guard.state.redis import CAS_ATTEMPTS, RedisChainStore, dump_state, load_state

__all__ = [
    "CAS_ATTEMPTS",
    "INBOX_DRAIN",
    "INBOX_PREFIX",
    "INBOX_PUT",
    "PREFIX",
    "RETRY_AFTER_SECONDS",
    "RUN_PREFIX",
    "STORE_FAILURES",
    "FailureCounter",
    "Quiet",
    "RedisChainStore",
    "StoreHealth",
    "connect",
    "dump_state",
    "failure_counter",
    "load_state",
    "reconnect",
    "safe_url",
    "store_health",
    "text_of",
]
