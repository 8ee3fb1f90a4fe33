"""Per-agent runs of identical tool calls: the guard's whole state, bounded and thread-safe."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

RunEnded = Callable[[str, int], None]
"""Called with (tool name, final run length) when a run of two or more calls ends."""


class _Chain:
    __slots__ = ("key", "run", "tool")

    def __init__(self, tool: str, key: bytes | None) -> None:
        self.tool = tool
        self.key = key
        self.run = 1


class ChainTracker:
    """Counts, per agent, how many consecutive tracked calls had the same tool and arguments.

    A key of None means the arguments are unknown: such a call is distinct from every
    other, so it starts a new run and never extends one. Past ``max_agents`` the least
    recently active agent is evicted. ``on_run_ended`` sees every run of length >= 2 when
    it breaks, is reset, forgotten or evicted.
    """

    __slots__ = ("_chains", "_lock", "_max_agents", "_on_run_ended")

    def __init__(self, max_agents: int, on_run_ended: RunEnded | None = None) -> None:
        self._chains: OrderedDict[str, _Chain] = OrderedDict()
        self._lock = threading.Lock()
        self._max_agents = max_agents
        self._on_run_ended = on_run_ended

    def observe(self, agent_id: str, tool: str, key: bytes | None) -> int:
        """Record one tracked call and return the length of the run it belongs to."""
        ended: tuple[str, int] | None = None
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None:
                self._chains[agent_id] = _Chain(tool, key)
                if len(self._chains) > self._max_agents:
                    evicted = self._chains.popitem(last=False)[1]
                    ended = (evicted.tool, evicted.run)
                run = 1
            else:
                self._chains.move_to_end(agent_id)
                if key is not None and chain.key == key and chain.tool == tool:
                    chain.run += 1
                else:
                    ended = (chain.tool, chain.run)
                    chain.tool, chain.key, chain.run = tool, key, 1
                run = chain.run
        if ended is not None:
            self._ended(*ended)
        return run

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
        if chain is not None:
            self._ended(chain.tool, chain.run)

    def __len__(self) -> int:
        return len(self._chains)

    def _ended(self, tool: str, run: int) -> None:
        if run > 1 and self._on_run_ended is not None:
            self._on_run_ended(tool, run)
