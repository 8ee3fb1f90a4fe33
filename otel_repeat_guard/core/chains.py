"""Per-agent-run state: the exact-repeat chain, the opt-in detectors, and the reminders awaiting
an outcome. The guard's whole state, bounded and thread-safe."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from otel_repeat_guard.core.detectors import Call, Detection, Detector, ParallelCollapse, RepeatDetector
from otel_repeat_guard.core.detectors.repeat import key_if_same_raw
from otel_repeat_guard.core.rules import put_bounded, same_call

RunEnded = Callable[[str, int], None]
"""Called with (tool name, final run length) when a run of two or more calls ends."""
ReminderOutcome = Callable[[str, str, str], None]
"""Called with (outcome, kind, tier) when a reminder's outcome is known: ``broken`` (the run's next
tracked call left the loop), ``ignored`` (it went on with it) or ``ended`` (the run ended first)."""
Pending = tuple[str, str, int]
"""A reminder waiting for the run's next call: (kind, tier, period)."""


class _More:
    """What few runs have: the opt-in detectors, the parallel-duplicate window, reminders awaiting an outcome."""

    __slots__ = ("detectors", "parallel", "pending")

    def __init__(self) -> None:
        self.detectors: tuple[Detector, ...] | None = None  # made on the run's first detect
        self.parallel: ParallelCollapse | None = None
        self.pending: list[Pending] | None = None


class ChainStore(ABC):
    """What the guard asks of its per-run state, wherever it lives: :class:`ChainTracker` (this process)
    or :class:`~otel_repeat_guard.state.redis.RedisChainStore` (Redis, wrapping a ChainTracker as its
    fallback). The interface only: neither inherits the other's state or code (a base class, not a
    protocol, so that compiled callers call through a vtable)."""

    __slots__ = ("pending",)

    pending: int
    """Truthy when a reminder may be waiting for a run's next call: then :meth:`settle` is to be asked."""

    @abstractmethod
    def observe(self, agent_id: str, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        """Record one tracked call and return the length of the run it belongs to."""

    @abstractmethod
    def rekey(self, agent_id: str, tool: str, key: bytes, result_key: bytes) -> None:
        """Under ``progress: results``: the run's last call, counted as ``key`` before its result was seen,
        turned out to be ``result_key`` (its arguments with its result's digest). If it is still the run's
        last call and the two differ, the run restarts at it (length 1): the poll moved."""

    @abstractmethod
    def key_if_same_raw(self, agent_id: str, raw: bytes) -> bytes | None:
        """The arguments key of the run's last call, if that call's raw key was ``raw``."""

    @abstractmethod
    def detect(self, agent_id: str, call: Call) -> list[Detection]:
        """What the run's opt-in detectors say of a counted call."""

    @abstractmethod
    def outcomes(self, agent_id: str, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        """What the run's calls that awaited their outcome extend, now that ``found`` (by call id) arrived."""

    @abstractmethod
    def parallel_duplicate(self, agent_id: str, call: Call, parent: int | None, start: int, end: int) -> bool:
        """Whether the call copies a counted call of the same step."""

    @abstractmethod
    def reminded(self, agent_id: str, kind: str, tier: str, period: int = 1) -> None:
        """A reminder fired at the run's last call."""

    @abstractmethod
    def settle(self, agent_id: str, tool: str, key: bytes | None, call: Call) -> list[tuple[str, str, str]]:
        """The outcomes of the reminders waiting for this call."""

    @abstractmethod
    def waiting(self, agent_id: str) -> bool:
        """Whether a reminder of the run waits for its next call (``settle`` would have work)."""

    @abstractmethod
    def run_length(self, agent_id: str) -> int:
        """The run's current length, 0 if it has none."""

    @abstractmethod
    def forget(self, agent_id: str) -> None:
        """Drop the run's state, recording its final run."""

    @abstractmethod
    def __len__(self) -> int:
        """How many runs this process holds state for."""

    @abstractmethod
    def after_fork(self) -> None:
        """In a forked child (:mod:`otel_repeat_guard.forks`): fresh locks and connections, no run of the parent's."""

    def reset(self, agent_id: str) -> None:
        """End the agent's run, for example because a new user prompt arrived."""
        self.forget(agent_id)

    def chain_state(self, agent_id: str) -> list[Any] | None:
        """The run's chain as plain values, for a harness that keeps it between processes; None: a shared
        store keeps its own."""
        return None

    def restore_chain(self, agent_id: str, state: list[Any]) -> None:
        """Give the run what :meth:`chain_state` returned (a shared store keeps its own: nothing then)."""
        return None


class ChainTracker(ChainStore):
    """Counts, per agent, how many consecutive tracked calls had the same tool and arguments.

    A key of None means the arguments are unknown: such a call is distinct from every
    other, so it starts a new run and never extends one. Past ``max_agents`` the least
    recently active agent is evicted. ``on_run_ended`` sees every run of length >= 2 when
    it breaks, is reset, forgotten or evicted.

    Each run's chain is a :class:`~otel_repeat_guard.core.detectors.RepeatDetector` (four fields). The few
    runs that have more keep it in a second map: the opt-in detectors (``detectors`` makes them for a
    run), the parallel-duplicate window and the reminders waiting for the run's next call; reset, forget
    and eviction clear them all.
    """

    __slots__ = (
        "_acquire",
        "_chains",
        "_detectors",
        "_lock",
        "_max_agents",
        "_more",
        "_on_reminder_outcome",
        "_on_run_ended",
        "_release",
        "_to_end",
    )

    def __init__(
        self,
        max_agents: int,
        on_run_ended: RunEnded | None = None,
        *,
        detectors: Callable[[], tuple[Detector, ...]] | None = None,
        on_reminder_outcome: ReminderOutcome | None = None,
    ) -> None:
        self._chains: OrderedDict[str, RepeatDetector] = OrderedDict()  # least recently active first
        self._to_end = self._chains.move_to_end  # bound once: every call moves its run to the end
        self._more: dict[str, _More] = {}  # only runs that have more than a chain, each also in _chains
        self._new_lock()
        self._max_agents = max_agents
        self._on_run_ended = on_run_ended
        self._detectors = detectors
        self._on_reminder_outcome = on_reminder_outcome
        self.pending = 0
        """How many runs have a reminder waiting for their next call (0 on nearly every span)."""

    def observe(self, agent_id: str, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        """Record one tracked call and return the length of the run it belongs to.

        ``raw``, optional, keys the arguments exactly as received, for :meth:`key_if_same_raw`.
        """
        self._acquire()  # not `with`: the compiled build calls __enter__/__exit__ generically (see _new_lock)
        try:
            chain = self._chains.get(agent_id)
            if chain is not None:
                self._to_end(agent_id)
                ended_tool, ended_run = chain.tool, chain.run
                run = chain.count(tool, key, raw)
                if run > 1 or ended_run < 2:
                    return run
                evicted = None
            else:
                evicted = self._add(agent_id, RepeatDetector(tool, key, raw, 1))
                if evicted is None:
                    return 1
        finally:
            self._release()
        if evicted is not None:
            self._ended(*evicted)
        elif self._on_run_ended is not None:
            self._on_run_ended(ended_tool, ended_run)
        return 1

    def rekey(self, agent_id: str, tool: str, key: bytes, result_key: bytes) -> None:
        """See :meth:`ChainStore.rekey`; the run that ends there (two calls or more) is recorded as ended."""
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None or key == result_key or not same_call(tool, key, chain.tool, chain.key):
                return
            ended_run = chain.run
            chain.key, chain.run, chain.keyed_raw = result_key, 1, None
        if ended_run > 1 and self._on_run_ended is not None:
            self._on_run_ended(tool, ended_run)

    def _add(self, agent_id: str, chain: RepeatDetector) -> tuple[RepeatDetector, _More | None] | None:
        """A new run's chain (under the lock); past ``max_agents``, the evicted run's state."""
        evicted = put_bounded(self._chains, agent_id, chain, self._max_agents)
        if evicted is None:
            return None
        return evicted[1], self._more.pop(evicted[0], None) if self._more else None

    def key_if_same_raw(self, agent_id: str, raw: bytes) -> bytes | None:
        """The arguments key of the agent's last call, if that call's raw key was ``raw``.

        The key belongs to the arguments, so a caller that received them byte for byte as
        before can skip canonicalizing them again. Read without the lock (key and raw key
        are one bytes object); :meth:`observe` decides the run.
        """
        chain = self._chains.get(agent_id)
        return None if chain is None else key_if_same_raw(chain.keyed_raw, raw)

    # -- the opt-in detectors ----------------------------------------------------------

    def _more_of(self, agent_id: str) -> _More:
        """The run's extra state (under the lock; the run has a chain)."""
        more = self._more.get(agent_id)
        if more is None:
            more = self._more[agent_id] = _More()
        return more

    def detect(self, agent_id: str, call: Call) -> list[Detection]:
        """What the run's opt-in detectors say of a call :meth:`observe` has counted."""
        if self._detectors is None:
            return []
        with self._lock:
            if agent_id not in self._chains:  # pragma: no cover - observe made it; only an eviction between removes it
                return []
            more = self._more_of(agent_id)
            if more.detectors is None:
                more.detectors = self._detectors()
            return [found for detector in more.detectors if (found := detector.observe(call)) is not None]

    def outcomes(self, agent_id: str, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        with self._lock:
            more = self._more.get(agent_id) if self._more else None
            if more is None or more.detectors is None:
                return []
            return [pair for detector in more.detectors for pair in detector.outcomes(found)]

    def parallel_duplicate(self, agent_id: str, call: Call, parent: int | None, start: int, end: int) -> bool:
        """Whether the call copies one of the run's counted calls made in the same step (then it is not
        to be counted); otherwise it is remembered for the calls that follow."""
        evicted = None
        with self._lock:
            if agent_id not in self._chains:  # the run's first call: an empty chain (run 0) to remember it in
                evicted = self._add(agent_id, RepeatDetector(call.tool))
            more = self._more_of(agent_id)
            if more.parallel is None:
                more.parallel = ParallelCollapse()
            duplicate = more.parallel.duplicate(call, parent, start, end)
        if evicted is not None:
            self._ended(*evicted)
        return duplicate

    # -- reminders and their outcome ---------------------------------------------------------

    def reminded(self, agent_id: str, kind: str, tier: str, period: int = 1) -> None:
        """A reminder fired at the run's last call; its outcome is the run's next call."""
        with self._lock:
            if agent_id not in self._chains:  # pragma: no cover - the call that fired it made the chain
                return
            more = self._more_of(agent_id)
            if more.pending is None:
                more.pending = []
                self.pending += 1
            more.pending.append((kind, tier, period))

    def waiting(self, agent_id: str) -> bool:
        more = self._more.get(agent_id) if self._more else None
        return more is not None and more.pending is not None

    def settle(self, agent_id: str, tool: str, key: bytes | None, call: Call) -> list[tuple[str, str, str]]:
        """Before the run's next call (``call``, whose ``tool`` and ``key`` these are) is counted: the
        (outcome, kind, tier) of each reminder waiting for it. Ignored when the detector of its kind (the
        chain, for a repeat) says the call continues the loop. ``key`` is what the chain compares: the
        arguments' key, or under ``progress: results`` that with the result's digest."""
        with self._lock:
            more = self._more.get(agent_id)
            chain = self._chains.get(agent_id)
            if more is None or more.pending is None or chain is None:
                return []
            waiting, more.pending = more.pending, None
            self.pending -= 1
            detectors: tuple[Detector, ...] = more.detectors or ()
            outcomes = []
            for kind, tier, period in waiting:
                if kind == chain.kind:
                    ignored = same_call(tool, key, chain.tool, chain.key)
                else:
                    ignored = any(d.kind == kind and d.continues(call, period) for d in detectors)
                outcomes.append(("ignored" if ignored else "broken", kind, tier))
        if self._on_reminder_outcome is not None:
            for outcome in outcomes:
                self._on_reminder_outcome(*outcome)
        return outcomes

    # -- a chain carried between processes -----------------------------------------------------

    def chain_state(self, agent_id: str) -> list[Any] | None:
        """The run's exact-repeat chain and the reminders waiting for its next call, as plain values
        ``[tool, key, run, [[kind, tier, period], ...]]``, or None without one: for a harness whose process
        lives for one call (the Claude Code hook keeps it between calls, see :meth:`restore_chain`)."""
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None:
                return None
            more = self._more.get(agent_id) if self._more else None
            waiting = [] if more is None or more.pending is None else [list(entry) for entry in more.pending]
            return [chain.tool, chain.key, chain.run, waiting]

    def restore_chain(self, agent_id: str, state: list[Any]) -> None:
        """Give the run the chain :meth:`chain_state` returned (TypeError if ``state`` is no such value)."""
        tool, key, run, waiting = state
        chain = RepeatDetector()
        chain.restore([tool, key, run])
        pending: list[Pending] = [(str(kind), str(tier), int(period)) for kind, tier, period in waiting]
        with self._lock:
            evicted = self._add(agent_id, chain)
            self._more.pop(agent_id, None)
            if pending:
                self._more_of(agent_id).pending = pending
                self.pending += 1
        if evicted is not None:
            self._ended(*evicted)

    # -- lifecycle ------------------------------------------------------------------------

    def run_length(self, agent_id: str) -> int:
        """The current run length of ``agent_id``, 0 if it has no chain."""
        chain = self._chains.get(agent_id)
        return 0 if chain is None else chain.run

    def forget(self, agent_id: str) -> None:
        """Drop the agent's state, recording its final run."""
        with self._lock:
            chain = self._chains.pop(agent_id, None)
            more = self._more.pop(agent_id, None) if self._more else None
        if chain is not None:
            self._ended(chain, more)

    def _ended(self, chain: RepeatDetector, more: _More | None) -> None:
        """The run is over: its final run length, and the reminders still waiting for a next call never got one."""
        if chain.run > 1 and self._on_run_ended is not None:
            self._on_run_ended(chain.tool, chain.run)
        if more is None or more.pending is None:
            return
        with self._lock:
            self.pending -= 1
        if self._on_reminder_outcome is not None:
            for kind, tier, _ in more.pending:
                self._on_reminder_outcome("ended", kind, tier)

    def __len__(self) -> int:
        return len(self._chains)

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (another thread may have held this one), and no run: the runs in flight
        were the parent's, and the child counts its own spans."""
        self._new_lock()
        self._chains.clear()
        self._more.clear()
        self.pending = 0

    def _new_lock(self) -> None:
        """A lock, and its two methods bound once for :meth:`observe`, which every tracked call takes: a method
        called by name is looked up on each call in the compiled build (a third of what observe costs)."""
        self._lock = threading.Lock()
        self._acquire, self._release = self._lock.acquire, self._lock.release
