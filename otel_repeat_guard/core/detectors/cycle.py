"""Cycles: the run's last p x k calls are k copies of one sequence of p calls (2 <= p <= max period)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from otel_repeat_guard.core.detectors.base import Call, Detection


def _primitive(unit: list[Any]) -> bool:
    """Whether ``unit`` is no repetition of a shorter unit (``A A`` and ``A B A B`` are)."""
    size = len(unit)
    for period in range(1, size // 2 + 1):
        if size % period == 0 and all(unit[i] == unit[i + period] for i in range(size - period)):
            return False
    return True


class CycleDetector:
    """Counts, for each period p, how many calls in a row equal the call p before them.

    Once that count is a multiple of p, the call completes a copy: the last p x k calls are
    k copies of one unit, k = count / p + 1. A unit that repeats a shorter one (``A A``) is
    left to the shorter period or to the repeat chain. Any call that breaks the pattern ends
    the cycle. When several periods complete a copy at one call, the shortest that reaches a
    threshold speaks, else the shortest.
    State: the last ``max_period`` calls and one counter per period.
    """

    __slots__ = ("_history", "_matched", "_max_period", "_thresholds")
    kind = "cycle"

    def __init__(self, thresholds: tuple[int, ...], max_period: int) -> None:
        self._thresholds = frozenset(thresholds)
        self._max_period = max_period
        self._history: deque[Any] = deque(maxlen=max_period)
        self._matched = [0] * (max_period + 1)

    def observe(self, call: Call) -> Detection | None:
        identity: Any = (call.tool, call.key) if call.key is not None else object()  # unknown: equal to nothing
        history, matched = self._history, self._matched
        for period in range(2, self._max_period + 1):
            matched[period] = matched[period] + 1 if len(history) >= period and history[-period][0] == identity else 0
        history.append((identity, call.tool))
        if len(history) < 2:
            return None
        completed: Detection | None = None
        for period in range(2, self._max_period + 1):
            count = matched[period]
            if count and count % period == 0:
                unit = list(history)[-period:]
                if _primitive([identity_ for identity_, _ in unit]):
                    repetitions = count // period + 1
                    found = Detection(
                        "cycle",
                        run_length=period * repetitions,
                        threshold=repetitions,
                        fires=repetitions in self._thresholds,
                        period=period,
                        tools=tuple(tool for _, tool in unit),
                    )
                    if found.fires:
                        return found  # the shortest period whose repetitions reach a threshold here
                    completed = completed or found
        return completed  # else the shortest period that completed a copy here: an event, no reminder

    def continues(self, call: Call, period: int) -> bool:
        """Whether ``call`` would go on with the cycle of ``period`` (it equals the call ``period`` back)."""
        if call.key is None or len(self._history) < period:
            return False
        return bool(self._history[-period][0] == (call.tool, call.key))

    def outcomes(self, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        return []  # a cycle is of calls, not outcomes

    def state(self) -> list[Any]:
        """``[[tool, key or None] per remembered call, the per-period counters]``."""
        history = [[tool, identity[1] if type(identity) is tuple else None] for identity, tool in self._history]
        return [history, list(self._matched)]

    def restore(self, state: list[Any]) -> None:
        history, matched = state
        counts = [int(n) for n in matched]
        if len(counts) != len(self._matched):  # another max_cycle_period
            raise ValueError(f"{len(counts) - 1} periods, not {self._max_period}")
        calls = [(str(tool), None if key is None else bytes(key)) for tool, key in history]
        self._history.clear()
        for tool, key in calls:
            identity: Any = (tool, key) if key is not None else object()  # unknown: equal to nothing
            self._history.append((identity, tool))
        self._matched = counts
