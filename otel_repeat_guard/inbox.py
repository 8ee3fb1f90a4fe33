"""A thread-safe mailbox for harnesses that pull reminders instead of being called."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from otel_repeat_guard.reminders import Reminder


class ReminderInbox:
    """Holds reminders per agent until the harness drains them before its next model request.

    Bounded: at most ``per_agent`` reminders per agent (oldest dropped) and ``max_agents``
    agents (least recently written dropped), so an agent nobody drains cannot grow it.
    """

    __slots__ = ("_boxes", "_lock", "_max_agents", "_per_agent")

    def __init__(self, *, per_agent: int = 16, max_agents: int = 10_000) -> None:
        for name, value in (("per_agent", per_agent), ("max_agents", max_agents)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self._lock = threading.Lock()
        self._boxes: OrderedDict[str, deque[Reminder]] = OrderedDict()
        self._per_agent = per_agent
        self._max_agents = max_agents

    def put(self, reminder: Reminder) -> None:
        """Store a reminder; usable directly as ``on_reminder``."""
        with self._lock:
            box = self._boxes.get(reminder.agent_id)
            if box is None:
                box = self._boxes[reminder.agent_id] = deque(maxlen=self._per_agent)
                if len(self._boxes) > self._max_agents:
                    self._boxes.popitem(last=False)
            else:
                self._boxes.move_to_end(reminder.agent_id)
            box.append(reminder)

    def drain(self, agent_id: str) -> list[Reminder]:
        """Take and return the agent's pending reminders, oldest first."""
        with self._lock:
            box = self._boxes.pop(agent_id, None)
        return list(box) if box else []

    def peek(self, agent_id: str) -> list[Reminder]:
        """The agent's pending reminders, oldest first, left in place."""
        with self._lock:
            box = self._boxes.get(agent_id)
            return list(box) if box else []

    def pending(self) -> list[str]:
        """The agent ids that have reminders waiting."""
        with self._lock:
            return list(self._boxes)
