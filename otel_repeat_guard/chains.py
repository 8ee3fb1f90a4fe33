"""Per-agent runs of identical tool calls: the guard's whole state, bounded and thread-safe."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

RunEnded = Callable[[str, int], None]
"""Called with (tool name, final run length) when a run of two or more calls ends."""


class _Chain:
    __slots__ = ("key", "keyed_raw", "run", "tool")

    def __init__(self, tool: str, key: bytes | None, raw: bytes | None) -> None:
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
    """

    __slots__ = ("_chains", "_lock", "_max_agents", "_on_run_ended")

    def __init__(self, max_agents: int, on_run_ended: RunEnded | None = None) -> None:
        self._chains: OrderedDict[str, _Chain] = OrderedDict()
        self._lock = threading.Lock()
        self._max_agents = max_agents
        self._on_run_ended = on_run_ended

    def observe(self, agent_id: str, tool: str, key: bytes | None, raw: bytes | None = None) -> int:
        """Record one tracked call and return the length of the run it belongs to.

        ``raw``, optional, keys the arguments exactly as received, for :meth:`key_if_same_raw`.
        """
        ended_tool, ended_run = tool, 0
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
                chain.restart(tool, key, raw)
        if ended_run > 1 and self._on_run_ended is not None:
            self._on_run_ended(ended_tool, ended_run)
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
        if chain is not None and chain.run > 1 and self._on_run_ended is not None:
            self._on_run_ended(chain.tool, chain.run)

    def __len__(self) -> int:
        return len(self._chains)
