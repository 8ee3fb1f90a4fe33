"""Parallel duplicates: a model that asks for the same call twice in one step gets it counted once."""

from __future__ import annotations

from collections import deque
from typing import Any

from otel_repeat_guard.core.detectors.base import Call

Seen = tuple[str, bytes, int, int, int]  # tool, key, parent span id, start, end


class ParallelCollapse:
    """Two identical calls whose tool spans have the same parent span and overlap in time are one call.

    The extra copy is counted by no detector (and gets its own event instead). A call with
    unknown arguments, or a tool span without a parent, is never parallel with anything.
    Remembers the run's last ``size`` counted calls.
    """

    __slots__ = ("_recent",)

    def __init__(self, size: int = 16) -> None:
        self._recent: deque[Seen] = deque(maxlen=size)

    def duplicate(self, call: Call, parent: int | None, start: int, end: int) -> bool:
        """Whether the call copies a counted one of the same step; if not, it is remembered as counted."""
        if call.key is None or parent is None:
            return False
        for tool, key, other_parent, other_start, other_end in self._recent:
            if (
                key == call.key
                and tool == call.tool
                and other_parent == parent
                and start < other_end
                and other_start < end
            ):
                return True
        self._recent.append((call.tool, call.key, parent, start, end))
        return False

    def state(self) -> list[Any]:
        """``[[tool, key, parent, start, end] per remembered call]``."""
        return [list(seen) for seen in self._recent]

    def restore(self, state: list[Any]) -> None:
        recent = [(str(tool), bytes(key), int(parent), int(start), int(end)) for tool, key, parent, start, end in state]
        self._recent.clear()
        self._recent.extend(recent)
