"""Chains and reminders shared by processes, in Redis: for agent runs whose tool calls run in workers.

Selected by ``GuardConfig(chain_store="redis://...")`` (``OTEL_REPEAT_GUARD_STORE``); needs the
``redis`` package (``pip install 'otel-repeat-guard[redis]'``). See ``docs/distributed.md``.

- :class:`RedisChainStore` keeps each run's state in one hash, ``repeat_tool_guard:run:<run key>``.
  The exact-repeat chain (tool, arguments digest, run length) is updated by one server-side Lua
  script per call: compare, increment or restart, and return the run length, atomically, so
  concurrent workers never double-count or lose a call. The reminders waiting for the run's next
  call are taken by the same script. The opt-in detectors' state (cycle, no progress, parallel
  duplicates) is serialized into the same hash and updated by compare-and-set on a version field.
  Every write renews the key's idle expiry; ``reset`` and ``forget`` delete it, from any process.
- :class:`~otel_repeat_guard.inbox.RedisReminderInbox` (in ``inbox``) is a ``ReminderInbox`` whose boxes are
  Redis lists, so the agent process drains what its workers' guards raised; a drain is one script
  (read and delete), so each reminder is delivered once.

Neither ever blocks the agent or raises into it: each call to Redis has a short timeout
(``store_timeout_ms``, 50 ms by default); a failed call falls back to this process's own state for
that call (the parent class's), is counted on ``repeat_tool_guard.store_failures`` and logged once
per outage; for a second after a failure calls go straight to the fallback, then Redis is tried
again, and state continues where Redis has it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider

from otel_repeat_guard.chains import ChainTracker, ReminderOutcome, RunEnded
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.detectors import Call, CycleDetector, Detection, Detector, NoProgressDetector, ParallelCollapse
from otel_repeat_guard.version import __version__

logger = logging.getLogger("otel_repeat_guard")

PREFIX = "repeat_tool_guard:"
"""Every key the guard writes starts with this."""
RUN_PREFIX = PREFIX + "run:"
INBOX_PREFIX = PREFIX + "inbox:"
STORE_FAILURES = "repeat_tool_guard.store_failures"
RETRY_AFTER_SECONDS = 1.0
"""After a failed call, how long calls go straight to the process-local fallback before Redis is tried again."""
CAS_ATTEMPTS = 8
"""Compare-and-set rounds for the detectors' state before the call falls back (a busy run's workers collide)."""
_ENTRY, _FIELD = "\x1e", "\x1f"  # separators of the waiting reminders' list: (kind, tier, period) entries

_OBSERVE = """
local key = KEYS[1]
local old = redis.call('HMGET', key, 't', 'k', 'n', 'p')
local run, ended_tool, ended_run = 1, '', 0
if ARGV[2] ~= '' and old[3] and old[2] == ARGV[2] and old[1] == ARGV[1] then
  run = redis.call('HINCRBY', key, 'n', 1)
else
  if old[3] then ended_tool, ended_run = old[1] or '', tonumber(old[3]) end
  redis.call('HSET', key, 't', ARGV[1], 'k', ARGV[2], 'n', 1)
end
local waiting = ''
if old[4] then waiting = old[4]; redis.call('HDEL', key, 'p') end
redis.call('PEXPIRE', key, ARGV[3])
return {run, ended_tool, ended_run, waiting}
"""
"""The exact-repeat chain, atomically: compare the call with the run's last, increment or restart, take the
repeat reminders that waited for this call. Returns (run length, ended tool, ended run length, waiting)."""

_REMINDED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], (redis.call('HGET', KEYS[1], ARGV[1]) or '') .. ARGV[2])
if ARGV[1] == 'w' then redis.call('HINCRBY', KEYS[1], 'v', 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
"""A reminder fired: it waits for the run's next call (field ``p`` for repeats, ``w`` for the detectors')."""

_FORGET = """
local old = redis.call('HMGET', KEYS[1], 't', 'n', 'p', 'w')
redis.call('DEL', KEYS[1])
return {old[1] or '', tonumber(old[2] or '0'), old[3] or '', old[4] or ''}
"""

_COMPARE_AND_SET = """
local version = redis.call('HGET', KEYS[1], 'v') or ''
if version ~= ARGV[1] then return 0 end
for i = 3, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('HINCRBY', KEYS[1], 'v', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
"""The detectors' state: written only if no other process wrote it since it was read (version ``v``)."""

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
    """A redis-py client for ``url`` whose every call gives up after ``timeout_ms``, without retries."""
    try:
        redis = importlib.import_module("redis")
        backoff = importlib.import_module("redis.backoff")
        retry = importlib.import_module("redis.retry")
    except ImportError as error:
        raise ValueError(
            "chain_store is a Redis URL, but the redis package is not installed: pip install 'otel-repeat-guard[redis]'"
        ) from error
    seconds = timeout_ms / 1000
    return redis.Redis.from_url(
        url,
        socket_timeout=seconds,
        socket_connect_timeout=seconds,
        retry=retry.Retry(backoff.NoBackoff(), 0),
        health_check_interval=0,
    )


def safe_url(url: str) -> str:
    """``url`` without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    user = credentials.partition(":")[0]
    return f"{scheme}{sep}{user + ':' if user else ':'}***@{host}"


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


class Quiet:
    """Instrumentation suppressed for the block: an instrumented Redis client makes no spans of the guard's calls."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))

    def __exit__(self, *exc: object) -> None:
        detach(self._token)


def text_of(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _waiting(raw: Any) -> list[tuple[str, str, int]]:
    """The reminders in a waiting list: (kind, tier, period) entries."""
    found = []
    for entry in text_of(raw).split(_ENTRY):
        parts = entry.split(_FIELD)
        if len(parts) == 3 and parts[2].isdigit():
            found.append((parts[0], parts[1], int(parts[2])))
    return found


# -- the opt-in detectors' state, serialized --------------------------------------------------


def dump_state(detectors: tuple[Detector, ...] | None, parallel: ParallelCollapse | None) -> bytes:
    """The detectors' state (and the parallel-duplicate window) as msgpack: no argument payload, digests only."""
    states: list[Any] = []
    for detector in detectors or ():
        if isinstance(detector, CycleDetector):
            history = [[tool, identity[1] if type(identity) is tuple else None] for identity, tool in detector._history]  # noqa: SLF001
            states.append(["cycle", history, list(detector._matched)])  # noqa: SLF001
        elif isinstance(detector, NoProgressDetector):
            previous = detector._previous  # noqa: SLF001
            last = None if previous is None else [previous.tool, previous.key, previous.outcome]
            states.append(["no_progress", last, detector._run])  # noqa: SLF001
        else:  # pragma: no cover - every built-in detector is one of the above
            states.append(None)
    recent = None if parallel is None else [list(seen) for seen in parallel._recent]  # noqa: SLF001
    return msgspec.msgpack.encode([states, recent])


def load_state(blob: bytes | None, detectors: tuple[Detector, ...] | None, parallel: ParallelCollapse | None) -> None:
    """Restore what :func:`dump_state` wrote into fresh detectors; a state that does not fit is left out."""
    if not blob:
        return
    try:
        states, recent = msgspec.msgpack.decode(blob)
        for detector, state in zip(detectors or (), states, strict=False):
            if isinstance(detector, CycleDetector) and state and state[0] == "cycle":
                matched = [int(n) for n in state[2]]
                if len(matched) == len(detector._matched):  # noqa: SLF001 - the same max_cycle_period
                    detector._history.clear()  # noqa: SLF001
                    for tool, key in state[1]:
                        identity: Any = (tool, key) if key is not None else object()  # unknown: equal to nothing
                        detector._history.append((identity, tool))  # noqa: SLF001
                    detector._matched = matched  # noqa: SLF001
            elif isinstance(detector, NoProgressDetector) and state and state[0] == "no_progress":
                last = state[1]
                detector._previous = None if last is None else Call(last[0], last[1], last[2])  # noqa: SLF001
                detector._run = int(state[2])  # noqa: SLF001
        if parallel is not None and recent:
            for tool, key, parent, start, end in recent:
                parallel._recent.append((tool, key, parent, start, end))  # noqa: SLF001
    except Exception:  # a state written by another version: start afresh
        logger.debug("repeat guard: unreadable detector state in the chain store; starting afresh", exc_info=True)


# -- the chain store -----------------------------------------------------------------------------


class RedisChainStore(ChainTracker):
    """The guard's per-run state in Redis (see the module docstring); this process's own chains, the
    parent class's, are the fallback for a call that cannot reach Redis."""

    __slots__ = (
        "_cas",
        "_client",
        "_expiry_ms",
        "_forget_script",
        "_health",
        "_max_raw",
        "_observe",
        "_raw_keys",
        "_reminded",
    )

    def __init__(
        self,
        url: str,
        max_agents: int,
        on_run_ended: RunEnded | None = None,
        *,
        detectors: Callable[[], tuple[Detector, ...]] | None = None,
        on_reminder_outcome: ReminderOutcome | None = None,
        timeout_ms: int = 50,
        expiry_seconds: int = 86_400,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        super().__init__(max_agents, on_run_ended, detectors=detectors, on_reminder_outcome=on_reminder_outcome)
        self._client = connect(url, timeout_ms)
        self._health = store_health(url, meter_provider)
        self._expiry_ms = expiry_seconds * 1000
        self._observe = self._client.register_script(_OBSERVE)
        self._reminded = self._client.register_script(_REMINDED)
        self._forget_script = self._client.register_script(_FORGET)
        self._cas = self._client.register_script(_COMPARE_AND_SET)
        self._raw_keys: dict[str, bytes] = {}  # agent -> its last call's key + raw key (see key_if_same_raw)
        self._max_raw = max_agents

    @classmethod
    def from_config(
        cls,
        config: GuardConfig,
        max_agents: int,
        on_run_ended: RunEnded | None = None,
        *,
        detectors: Callable[[], tuple[Detector, ...]] | None = None,
        on_reminder_outcome: ReminderOutcome | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> RedisChainStore:
        return cls(
            config.chain_store,
            max_agents,
            on_run_ended,
            detectors=detectors,
            on_reminder_outcome=on_reminder_outcome,
            timeout_ms=config.store_timeout_ms,
            expiry_seconds=config.store_expiry_seconds,
            meter_provider=meter_provider,
        )

    @property
    def health(self) -> StoreHealth:
        return self._health

    @staticmethod
    def _call(script: Any, run_key: str, *args: Any) -> Any:
        """Run a script on the run's key; raises on failure (the caller falls back)."""
        with Quiet():
            return script(keys=[RUN_PREFIX + run_key], args=args)

    # -- the exact-repeat chain ---------------------------------------------------------------

    def observe(self, agent_id: str, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        health = self._health
        if not health.usable("observe"):
            return super().observe(agent_id, tool, key, raw)
        try:
            run, ended_tool, ended_run, waiting = self._call(self._observe, agent_id, tool, key or b"", self._expiry_ms)
        except Exception as error:
            health.failed("observe", error)
            return super().observe(agent_id, tool, key, raw)
        health.succeeded()
        if self._chains:  # Redis is back: a run counted here during the outage ends, not to be mixed with it later
            super().forget(agent_id)
        run = int(run)
        if key is not None and raw is not None:
            self._remember_raw(agent_id, key + raw)
        if int(ended_run) > 1 and self._on_run_ended is not None:
            self._on_run_ended(text_of(ended_tool), int(ended_run))
        if waiting and self._on_reminder_outcome is not None:
            for kind, tier, _ in _waiting(waiting):  # a repeat reminder was ignored if this call went on with it
                self._on_reminder_outcome("ignored" if run > 1 else "broken", kind, tier)
        return run

    def _remember_raw(self, agent_id: str, keyed_raw: bytes) -> None:
        raw_keys = self._raw_keys
        raw_keys[agent_id] = keyed_raw
        if len(raw_keys) > self._max_raw:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del raw_keys[next(iter(raw_keys))]

    def key_if_same_raw(self, agent_id: str, raw: bytes) -> bytes | None:
        """As the parent's, from this process's memory of the run's last call: a text received byte for byte
        as before has the same key, whichever process saw it first."""
        keyed_raw = self._raw_keys.get(agent_id)
        if keyed_raw is None or keyed_raw[-len(raw) :] != raw:
            return super().key_if_same_raw(agent_id, raw)
        return keyed_raw[: -len(raw)]

    def run_length(self, agent_id: str) -> int:
        if self._health.usable("run_length"):
            try:
                with Quiet():
                    found = self._client.hget(RUN_PREFIX + agent_id, "n")
            except Exception as error:
                self._health.failed("run_length", error)
            else:
                self._health.succeeded()
                return 0 if found is None else int(found)
        return super().run_length(agent_id)

    # -- reminders -------------------------------------------------------------------------------

    def reminded(self, agent_id: str, kind: str, tier: str, period: int = 1) -> None:
        entry = f"{kind}{_FIELD}{tier}{_FIELD}{period}{_ENTRY}"
        if self._health.usable("reminded"):
            try:
                stored = self._call(self._reminded, agent_id, "p" if kind == "repeat" else "w", entry, self._expiry_ms)
            except Exception as error:
                self._health.failed("reminded", error)
            else:
                self._health.succeeded()
                if int(stored):
                    return
        super().reminded(agent_id, kind, tier, period)  # the call was counted here: so is its reminder

    # -- the opt-in detectors --------------------------------------------------------------------

    def detect(self, agent_id: str, call: Call) -> list[Detection]:
        make = self._detectors
        if make is None:
            return []
        found: list[Detection] = []

        def step(state: bytes | None, waiting: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]:
            detectors = make()
            load_state(state, detectors, None)
            outcomes = []
            for kind, tier, period in _waiting(waiting or b""):
                ignored = any(d.kind == kind and d.continues(call, period) for d in detectors)
                outcomes.append(("ignored" if ignored else "broken", kind, tier))
            found[:] = [seen for detector in detectors if (seen := detector.observe(call)) is not None]
            return [("d", dump_state(detectors, None)), ("w", b"")], outcomes

        if not self._update("detect", agent_id, ("d", "w"), step):
            return super().detect(agent_id, call)
        return found

    def parallel_duplicate(self, agent_id: str, call: Call, parent: int | None, start: int, end: int) -> bool:
        if call.key is None or parent is None:
            return False  # never parallel with anything: nothing to read or write
        duplicate = False

        def step(state: bytes | None, _: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]:
            nonlocal duplicate
            window = ParallelCollapse()
            load_state(state, None, window)
            duplicate = window.duplicate(call, parent, start, end)
            return ([] if duplicate else [("c", dump_state(None, window))]), []

        if not self._update("parallel", agent_id, ("c", "w"), step):
            return super().parallel_duplicate(agent_id, call, parent, start, end)
        return duplicate

    def _update(
        self,
        operation: str,
        agent_id: str,
        fields: tuple[str, str],
        step: Callable[[bytes | None, Any], tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]],
    ) -> bool:
        """Read ``fields`` and the version, compute, write back if nobody wrote in between; retry on a conflict.
        False when the store cannot be used (the caller falls back)."""
        health = self._health
        if not health.usable(operation):
            return False
        name = RUN_PREFIX + agent_id
        try:
            for _ in range(CAS_ATTEMPTS):
                with Quiet():
                    version, state, waiting = self._client.hmget(name, "v", *fields)
                writes, outcomes = step(state, waiting)
                if not writes:
                    health.succeeded()
                    return True
                args: list[Any] = [version or b"", self._expiry_ms]
                for field, value in writes:
                    args += [field, value]
                with Quiet():
                    written = self._cas(keys=[name], args=args)
                if int(written):
                    health.succeeded()
                    if self._on_reminder_outcome is not None:
                        for outcome in outcomes:
                            self._on_reminder_outcome(*outcome)
                    return True
            raise TimeoutError(f"{CAS_ATTEMPTS} conflicting writes in a row")
        except Exception as error:
            health.failed(operation, error)
            return False

    # -- lifecycle ----------------------------------------------------------------------------

    def forget(self, agent_id: str) -> None:
        """Drop the run's state in Redis (for every process) and here, recording its final run once."""
        if self._health.usable("forget"):
            try:
                tool, run, waiting, waiting_detectors = self._call(self._forget_script, agent_id)
            except Exception as error:
                self._health.failed("forget", error)
            else:
                self._health.succeeded()
                if int(run) > 1 and self._on_run_ended is not None:
                    self._on_run_ended(text_of(tool), int(run))
                if self._on_reminder_outcome is not None:
                    for kind, tier, _ in _waiting(waiting) + _waiting(waiting_detectors):
                        self._on_reminder_outcome("ended", kind, tier)
        self._raw_keys.pop(agent_id, None)
        super().forget(agent_id)
