"""No progress: calls to one tool with changing arguments that keep getting the same outcome."""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.detectors.base import Call, Detection


class NoProgressDetector:
    """A call is compared with the run's previous tracked call only.

    The same tool, different (or unknown) arguments and the same outcome extend the run; the
    same arguments end it (that call belongs to the repeat chain, and may start a new run); a
    call with no recorded outcome ends it. The outcome is the result text, or the error (type
    and message) when there is one, unwrapped and canonicalized before it is digested.
    """

    __slots__ = ("_previous", "_run", "_thresholds")
    kind = "no_progress"

    def __init__(self, thresholds: tuple[int, ...]) -> None:
        self._thresholds = frozenset(thresholds)
        self._previous: Call | None = None
        self._run = 0

    def observe(self, call: Call) -> Detection | None:
        if call.outcome is None:
            self._previous, self._run = None, 0
            return None
        if self.continues(call):
            self._run += 1
        else:
            self._run = 1
        self._previous = call
        run = self._run
        if run < 2:
            return None
        return Detection(
            "no_progress", run_length=run, threshold=run, fires=run in self._thresholds, outcome=call.outcome
        )

    def continues(self, call: Call, period: int = 1) -> bool:
        """Whether ``call`` would extend the run: same tool and outcome, different arguments."""
        previous = self._previous
        return (
            previous is not None
            and call.outcome is not None
            and call.tool == previous.tool
            and call.outcome == previous.outcome
            and (call.key is None or call.key != previous.key)
        )

    def state(self) -> list[Any]:
        """``[[tool, key, outcome] of the previous call or None, the run length]``."""
        previous = self._previous
        return [None if previous is None else [previous.tool, previous.key, previous.outcome], self._run]

    def restore(self, state: list[Any]) -> None:
        last, run = state
        previous = None if last is None else Call(str(last[0]), last[1], last[2])
        self._previous, self._run = previous, int(run)
