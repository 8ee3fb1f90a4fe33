"""Chains and reminders shared by processes, in Redis: for agent runs whose tool calls run in workers.

Selected by ``GuardConfig(chain_store="redis://...")`` (``OTEL_REPEAT_GUARD_STORE``); needs the
``redis`` package (``pip install 'otel-repeat-guard[redis]'``). See ``docs/distributed.md``.

- :class:`RedisChainStore` keeps each run's state in one hash, ``repeat_tool_guard:run:<run key>``.
  The exact-repeat chain (tool, arguments digest, run length) is updated by one server-side Lua
  script per call: compare, increment or restart, and return the run length, atomically, so
  concurrent workers never double-count or lose a call. The reminders waiting for the run's next
  call are taken by the same script. The opt-in detectors' state (cycle, no progress, parallel
  duplicates) is each detector's own ``state()`` (the ``Stateful`` protocol), serialized into the same hash
  and updated by compare-and-set on a version field: a new detector needs nothing here.
  Every write renews the key's idle expiry; ``reset`` and ``forget`` delete it, from any process.
- The connection and its failures (timeouts, the failure counter, the outage log) are
  :mod:`otel_repeat_guard.state.connection`'s, shared with
  :class:`~otel_repeat_guard.decide.inbox.RedisReminderInbox` (in ``inbox``) is a ``ReminderInbox`` whose boxes are
  Redis lists, so the agent process drains what its workers' guards raised; a drain is one script
  (read and delete), so each reminder is delivered once.

Neither ever blocks the agent or raises into it: each call to Redis has a short timeout
(``store_timeout_ms``, 50 ms by default); a failed call falls back to this process's own state for
that call (a :class:`~otel_repeat_guard.core.chains.ChainTracker` it wraps), is counted on ``repeat_tool_guard.store_failures`` and logged once
per outage; for a second after a failure calls go straight to the fallback, then Redis is tried
again, and state continues where Redis has it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.metrics import MeterProvider

from otel_repeat_guard.core.chains import ChainStore, ChainTracker, ReminderOutcome, RunEnded
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Call, Detection, Detector, ParallelCollapse
from otel_repeat_guard.core.detectors.repeat import key_if_same_raw
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.state.connection import RUN_PREFIX, StoreHealth, connect, reconnect, store_health, text_of, wire
from otel_repeat_guard.state.deadline import Deadline
from otel_repeat_guard.state.scripts import (
    COMPARE_AND_SET,
    FORGET,
    OBSERVE,
    REKEY,
    REMINDED,
    dump_state,
    load_state,
    waiting_entry,
    waiting_reminders,
)

logger = logging.getLogger("otel_repeat_guard")

CAS_ATTEMPTS = 8
"""Compare-and-set rounds for the detectors' state before the call falls back (a busy run's workers collide)."""
# -- the chain store -----------------------------------------------------------------------------


class RedisChainStore(ChainStore):
    """The guard's per-run state in Redis (see the module docstring). It wraps this process's own state, a
    :class:`~otel_repeat_guard.core.chains.ChainTracker` made with the same arguments, as the fallback for a call
    that cannot reach Redis; both are a :class:`~otel_repeat_guard.core.chains.ChainStore`."""

    __slots__ = (
        "_cas",
        "_client",
        "_detectors",
        "_expiry_ms",
        "_forget_script",
        "_health",
        "_local",
        "_max_raw",
        "_observe",
        "_on_reminder_outcome",
        "_on_run_ended",
        "_raw_keys",
        "_rekey",
        "_reminded",
        "_seconds",
        "_timeout_ms",
        "_url",
    )

    def __init__(  # noqa: PLR0913 - keyword options
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
        self._local = ChainTracker(
            max_agents, on_run_ended, detectors=detectors, on_reminder_outcome=on_reminder_outcome
        )
        self.pending = 1  # always ask settle: the fallback's reminders (Redis settles its own in its scripts)
        self._on_run_ended = on_run_ended
        self._detectors = detectors
        self._on_reminder_outcome = on_reminder_outcome
        self._url, self._timeout_ms = url, timeout_ms
        self._client = connect(url, timeout_ms)
        self._seconds = timeout_ms / 1000  # each call's deadline, all its commands and reads together
        self._health = store_health(url, meter_provider)
        self._expiry_ms = expiry_seconds * 1000
        self._scripts()
        self._raw_keys: OrderedDict[str, bytes] = OrderedDict()  # agent -> its last call's key + raw key
        self._max_raw = max_agents

    def _scripts(self) -> None:
        """The scripts, on the client."""
        self._observe = self._client.register_script(OBSERVE)
        self._reminded = self._client.register_script(REMINDED)
        self._rekey = self._client.register_script(REKEY)
        self._forget_script = self._client.register_script(FORGET)
        self._cas = self._client.register_script(COMPARE_AND_SET)

    def after_fork(self) -> None:
        """In a forked child: a client of its own (:func:`~otel_repeat_guard.state.connection.reconnect`), and no
        run of this process's (they were the parent's). What Redis holds stays: it is shared."""
        self._client = reconnect(self._client, self._url, self._timeout_ms)
        self._scripts()
        self._raw_keys.clear()
        self._local.after_fork()

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

    def waiting(self, agent_id: str) -> bool:
        return True  # Redis's reminders are settled by its scripts, the fallback's by settle: always ask

    def settle(self, agent_id: str, tool: str, key: bytes | None, call: Call) -> list[tuple[str, str, str]]:
        """The outcomes of reminders the fallback holds (Redis's are settled by its scripts)."""
        return self._local.settle(agent_id, tool, key, call)

    def __len__(self) -> int:
        return len(self._local)

    def _call(self, script: Any, run_key: str, *args: Any) -> Any:
        """Run a script on the run's key, by the deadline; raises on failure (the caller falls back)."""
        with Deadline(self._seconds):
            return script(keys=[wire(RUN_PREFIX + run_key)], args=args)

    # -- the exact-repeat chain ---------------------------------------------------------------

    def observe(self, agent_id: str, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        health = self._health
        if not health.usable("observe"):
            return self._local.observe(agent_id, tool, key, raw)
        try:
            run, ended_tool, ended_run, waiting = self._call(
                self._observe, agent_id, wire(tool), key or b"", self._expiry_ms
            )
        except Exception as error:
            health.failed("observe", error)
            return self._local.observe(agent_id, tool, key, raw)
        health.succeeded()
        if len(self._local):  # Redis is back: a run counted here during the outage ends, not to be mixed with it later
            self._local.forget(agent_id)
        run = int(run)
        if key is not None and raw is not None:
            self._remember_raw(agent_id, key + raw)
        if int(ended_run) > 1 and self._on_run_ended is not None:
            self._on_run_ended(text_of(ended_tool), int(ended_run))
        if waiting and self._on_reminder_outcome is not None:
            for kind, tier, _ in waiting_reminders(
                waiting
            ):  # a repeat reminder was ignored if this call went on with it
                self._on_reminder_outcome("ignored" if run > 1 else "broken", kind, tier)
        return run

    def rekey(self, agent_id: str, tool: str, key: bytes, result_key: bytes) -> None:
        health = self._health
        if not health.usable("rekey"):
            self._local.rekey(agent_id, tool, key, result_key)
            return
        try:
            ended = int(self._call(self._rekey, agent_id, wire(tool), key, result_key, self._expiry_ms))
        except Exception as error:
            health.failed("rekey", error)
            self._local.rekey(agent_id, tool, key, result_key)
            return
        health.succeeded()
        if ended > 1 and self._on_run_ended is not None:
            self._on_run_ended(tool, ended)

    def _remember_raw(self, agent_id: str, keyed_raw: bytes) -> None:
        put_bounded(self._raw_keys, agent_id, keyed_raw, self._max_raw)

    def key_if_same_raw(self, agent_id: str, raw: bytes) -> bytes | None:
        """As the memory store's, from this process's memory of the run's last call: a text received byte for byte
        as before has the same key, whichever process saw it first."""
        found = key_if_same_raw(self._raw_keys.get(agent_id), raw)
        return self._local.key_if_same_raw(agent_id, raw) if found is None else found

    def run_length(self, agent_id: str) -> int:
        if self._health.usable("run_length"):
            try:
                with Deadline(self._seconds):
                    found = self._client.hget(wire(RUN_PREFIX + agent_id), "n")
            except Exception as error:
                self._health.failed("run_length", error)
            else:
                self._health.succeeded()
                if found is None:
                    return 0
                if found.isdigit():
                    return int(found)
                logger.warning("repeat guard: the chain store holds run length %r for %r, not a count", found, agent_id)
        return self._local.run_length(agent_id)

    # -- reminders -------------------------------------------------------------------------------

    def reminded(self, agent_id: str, kind: str, tier: str, period: int = 1) -> None:
        entry = waiting_entry(kind, tier, period)
        if self._health.usable("reminded"):
            try:
                stored = self._call(self._reminded, agent_id, "p" if kind == "repeat" else "w", entry, self._expiry_ms)
            except Exception as error:
                self._health.failed("reminded", error)
            else:
                self._health.succeeded()
                if int(stored):
                    return
        self._local.reminded(agent_id, kind, tier, period)  # the call was counted here: so is its reminder

    # -- the opt-in detectors --------------------------------------------------------------------

    def detect(self, agent_id: str, call: Call) -> list[Detection]:
        make = self._detectors
        if make is None:
            return []
        found: list[Detection] = []

        def step(state: bytes | None, waiting: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]:
            detectors = make()
            load_state(state, detectors)
            outcomes = []
            for kind, tier, period in waiting_reminders(waiting or b""):
                ignored = any(d.kind == kind and d.continues(call, period) for d in detectors)
                outcomes.append(("ignored" if ignored else "broken", kind, tier))
            found[:] = [seen for detector in detectors if (seen := detector.observe(call)) is not None]
            return [("d", dump_state(detectors)), ("w", b"")], outcomes

        if not self._update("detect", agent_id, ("d", "w"), step):
            return self._local.detect(agent_id, call)
        return found

    def outcomes(self, agent_id: str, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        make = self._detectors
        if make is None:
            return []
        answered: list[tuple[Call, Detection]] = []

        def step(state: bytes | None, _: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]:
            detectors = make()
            load_state(state, detectors)
            answered[:] = [pair for detector in detectors for pair in detector.outcomes(found)]
            return [("d", dump_state(detectors))], []

        if not self._update("outcomes", agent_id, ("d", "w"), step):
            return self._local.outcomes(agent_id, found)
        return answered

    def parallel_duplicate(self, agent_id: str, call: Call, parent: int | None, start: int, end: int) -> bool:
        if call.key is None or parent is None:
            return False  # never parallel with anything: nothing to read or write
        duplicate = False

        def step(state: bytes | None, _: Any) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, str]]]:
            nonlocal duplicate
            window = ParallelCollapse()
            load_state(state, parallel=window)
            duplicate = window.duplicate(call, parent, start, end)
            return ([] if duplicate else [("c", dump_state(parallel=window))]), []

        if not self._update("parallel", agent_id, ("c", "w"), step):
            return self._local.parallel_duplicate(agent_id, call, parent, start, end)
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
        name = wire(RUN_PREFIX + agent_id)
        outcomes: list[tuple[str, str, str]] = []
        try:
            with Deadline(self._seconds):  # one deadline for every round
                for _ in range(CAS_ATTEMPTS):
                    version, state, waiting = self._client.hmget(name, "v", *fields)
                    writes, outcomes = step(state, waiting)
                    if not writes:
                        break
                    args: list[Any] = [version or b"", self._expiry_ms]
                    for field, value in writes:
                        args += [field, value]
                    if int(self._cas(keys=[name], args=args)):
                        break
                else:
                    raise TimeoutError(f"{CAS_ATTEMPTS} conflicting writes in a row")
        except Exception as error:
            health.failed(operation, error)
            return False
        health.succeeded()
        if self._on_reminder_outcome is not None:
            for outcome in outcomes:
                self._on_reminder_outcome(*outcome)
        return True

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
                    for kind, tier, _ in waiting_reminders(waiting) + waiting_reminders(waiting_detectors):
                        self._on_reminder_outcome("ended", kind, tier)
        self._raw_keys.pop(agent_id, None)
        self._local.forget(agent_id)
