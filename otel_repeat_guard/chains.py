"""Per-agent-run state: the exact-repeat chain, the opt-in detectors, and the reminders awaiting
an outcome. The guard's whole state, bounded and thread-safe."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from otel_repeat_guard.detectors import Call, Detection, Detector, ParallelCollapse

RunEnded = Callable[[str, int], None]
"""Called with (tool name, final run length) when a run of two or more calls ends."""
ReminderOutcome = Callable[[str, str, str], None]
"""Called with (outcome, kind, tier) when a reminder's outcome is known: ``broken`` (the run's next
tracked call left the loop), ``ignored`` (it went on with it) or ``ended`` (the run ended first)."""
Pending = tuple[str, str, int]
"""A reminder waiting for the run's next call: (kind, tier, period)."""


class _Chain:
    __slots__ = ("key", "keyed_raw", "more", "parallel", "pending", "run", "tool")

    def __init__(self, tool: str, key: bytes | None, raw: bytes | None) -> None:
        self.more: tuple[Detector, ...] | None = None  # the opt-in detectors, made on first use
        self.parallel: ParallelCollapse | None = None
        self.pending: list[Pending] | None = None
        self.restart(tool, key, raw)

    def restart(self, tool: str, key: bytes | None, raw: bytes | None) -> None:
        """A new run of one call."""
        self.tool = tool
        self.key = key
        # the last raw key that came with a key, as key + raw in one object: read atomically, without the lock
        self.keyed_raw = None if key is None or raw is None else key + raw
        self.run = 1


class ChainTracker:
    """Counts, per agent, how many consecutive tracked calls had the same tool and arguments.

    A key of None means the arguments are unknown: such a call is distinct from every
    other, so it starts a new run and never extends one. Past ``max_agents`` the least
    recently active agent is evicted. ``on_run_ended`` sees every run of length >= 2 when
    it breaks, is reset, forgotten or evicted.

    The same per-run state holds the opt-in detectors (``detectors`` makes them for a run) and
    the reminders waiting for the run's next call; reset, forget and eviction clear them all.
    """

    __slots__ = (
        "_chains",
        "_detectors",
        "_lock",
        "_max_agents",
        "_on_reminder_outcome",
        "_on_run_ended",
        "pending",
    )

    def __init__(
        self,
        max_agents: int,
        on_run_ended: RunEnded | None = None,
        *,
        detectors: Callable[[], tuple[Detector, ...]] | None = None,
        on_reminder_outcome: ReminderOutcome | None = None,
    ) -> None:
        self._chains: OrderedDict[str, _Chain] = OrderedDict()
        self._lock = threading.Lock()
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
        ended_tool, ended_run = tool, 0
        evicted: _Chain | None = None
        with self._lock:
            chains = self._chains
            chain = chains.get(agent_id)
            if chain is None:
                chains[agent_id] = _Chain(tool, key, raw)
                if len(chains) > self._max_agents:
                    evicted = chains.popitem(last=False)[1]
                    ended_tool, ended_run = evicted.tool, evicted.run
            else:
                chains.move_to_end(agent_id)
                if key is not None and chain.key == key and chain.tool == tool:
                    chain.run += 1
                    if raw is not None:
                        chain.keyed_raw = key + raw
                    return chain.run
                ended_tool, ended_run = chain.tool, chain.run
                chain.tool, chain.key, chain.run = tool, key, 1  # chain.restart, inlined: most calls come here
                chain.keyed_raw = None if key is None or raw is None else key + raw
        if ended_run > 1 and self._on_run_ended is not None:
            self._on_run_ended(ended_tool, ended_run)
        if evicted is not None:
            self._ended(evicted)
        return 1

    def key_if_same_raw(self, agent_id: str, raw: bytes) -> bytes | None:
        """The arguments key of the agent's last call, if that call's raw key was ``raw``.

        The key belongs to the arguments, so a caller that received them byte for byte as
        before can skip canonicalizing them again. Read without the lock (key and raw key
        are one bytes object); :meth:`observe` decides the run.
        """
        chain = self._chains.get(agent_id)
        keyed_raw = None if chain is None else chain.keyed_raw
        if keyed_raw is None or keyed_raw[-len(raw) :] != raw:
            return None
        return keyed_raw[: -len(raw)]

    # -- the opt-in detectors ----------------------------------------------------------

    def detect(self, agent_id: str, call: Call) -> list[Detection]:
        """What the run's opt-in detectors say of a call :meth:`observe` has counted."""
        if self._detectors is None:
            return []
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None:  # pragma: no cover - observe made it, and only eviction between the two removes it
                return []
            if chain.more is None:
                chain.more = self._detectors()
            return [found for detector in chain.more if (found := detector.observe(call)) is not None]

    def parallel_duplicate(self, agent_id: str, call: Call, parent: int | None, start: int, end: int) -> bool:
        """Whether the call copies one of the run's counted calls made in the same step (then it is not
        to be counted); otherwise it is remembered for the calls that follow."""
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None:  # the run's first call: an empty chain to remember it in
                chain = self._chains[agent_id] = _Chain(call.tool, None, None)
                chain.run = 0
            if chain.parallel is None:
                chain.parallel = ParallelCollapse()
            return chain.parallel.duplicate(call, parent, start, end)

    # -- reminders and their outcome ---------------------------------------------------------

    def reminded(self, agent_id: str, kind: str, tier: str, period: int = 1) -> None:
        """A reminder fired at the run's last call; its outcome is the run's next call."""
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None:  # pragma: no cover - the call that fired it made the chain
                return
            if chain.pending is None:
                chain.pending = []
                self.pending += 1
            chain.pending.append((kind, tier, period))

    def settle(self, agent_id: str, tool: str, key: bytes | None, call: Call) -> list[tuple[str, str, str]]:
        """Before the run's next call is counted: the (outcome, kind, tier) of each reminder waiting for it."""
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None or chain.pending is None:
                return []
            waiting, chain.pending = chain.pending, None
            self.pending -= 1
            outcomes = []
            for kind, tier, period in waiting:
                if kind == "repeat":
                    ignored = key is not None and chain.key == key and chain.tool == tool
                else:
                    ignored = any(d.kind == kind and d.continues(call, period) for d in chain.more or ())
                outcomes.append(("ignored" if ignored else "broken", kind, tier))
        if self._on_reminder_outcome is not None:
            for outcome in outcomes:
                self._on_reminder_outcome(*outcome)
        return outcomes

    # -- lifecycle ------------------------------------------------------------------------

    def run_length(self, agent_id: str) -> int:
        """The current run length of ``agent_id``, 0 if it has no chain."""
        chain = self._chains.get(agent_id)
        return 0 if chain is None else chain.run

    def reset(self, agent_id: str) -> None:
        """End the agent's run, for example because a new user prompt arrived."""
        self.forget(agent_id)

    def forget(self, agent_id: str) -> None:
        """Drop the agent's state, recording its final run."""
        with self._lock:
            chain = self._chains.pop(agent_id, None)
        if chain is None:
            return
        if chain.run > 1 and self._on_run_ended is not None:
            self._on_run_ended(chain.tool, chain.run)
        self._ended(chain)

    def _ended(self, chain: _Chain) -> None:
        """The run is over: reminders still waiting for a next call never got one."""
        if chain.pending is None:
            return
        with self._lock:
            self.pending -= 1
        if self._on_reminder_outcome is not None:
            for kind, tier, _ in chain.pending:
                self._on_reminder_outcome("ended", kind, tier)

    def __len__(self) -> int:
        return len(self._chains)
