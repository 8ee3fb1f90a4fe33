"""No progress: calls to one tool with changing arguments that keep getting the same outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_repeat_guard.core.detectors.base import Call, Detection

MAX_AWAITING: Final = 64
"""Calls of one run that may wait for their outcome at once (one model step's calls); past it the oldest
is taken as having none."""


class NoProgressDetector:
    """A call is compared with the run's previous tracked call only.

    The same tool, different (or unknown) arguments and the same outcome extend the run; the
    same arguments end it (that call belongs to the repeat chain, and may start a new run); a
    call with no recorded outcome ends it. The outcome is the result text, or the error (type
    and message) when there is one, unwrapped and canonicalized before it is digested.

    A call whose outcome its span did not record but the run's next model request will carry back
    (``Call.awaits``, its call id) waits, with the calls after it, until :meth:`outcomes` brings the
    outcomes of that request; the calls are then compared in their order. A call that does not wait
    while others do ends their wait: they had no outcome.
    """

    __slots__ = ("_awaiting", "_previous", "_run", "_thresholds")
    kind = "no_progress"

    def __init__(self, thresholds: tuple[int, ...]) -> None:
        self._thresholds = frozenset(thresholds)
        self._previous: Call | None = None
        self._run = 0
        self._awaiting: list[Call] = []

    def observe(self, call: Call) -> Detection | None:
        if call.outcome is None and call.awaits is not None:
            self._awaiting.append(call)
            if len(self._awaiting) > MAX_AWAITING:
                del self._awaiting[0]
                self._previous, self._run = None, 0  # the oldest had no outcome after all
            return None
        if self._awaiting:
            self._awaiting.clear()
            self._previous, self._run = None, 0
        return self._compare(call)

    def outcomes(self, found: Mapping[str, bytes]) -> list[tuple[Call, Detection]]:
        """The waiting calls, each with the outcome ``found`` holds for its call id (none: it ends the run);
        a call returned keeps its call id in ``awaits``."""
        waiting, self._awaiting = self._awaiting, []
        out = []
        for call in waiting:
            answered = Call(call.tool, call.key, found.get(call.awaits or ""), call.awaits)
            detection = self._compare(answered)
            if detection is not None:
                out.append((answered, detection))
        return out

    def _compare(self, call: Call) -> Detection | None:
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
        """``[[tool, key, outcome] of the previous call or None, the run length]``, and while calls await
        their outcome ``[[tool, key, call id] of each]`` (only then: a process of an earlier version reads the rest)."""
        previous = self._previous
        state: list[Any] = [None if previous is None else [previous.tool, previous.key, previous.outcome], self._run]
        if self._awaiting:
            state.append([[call.tool, call.key, call.awaits] for call in self._awaiting])
        return state

    def restore(self, state: list[Any]) -> None:
        last, run, *rest = state  # a state written before calls could wait has two fields
        previous = None if last is None else Call(str(last[0]), last[1], last[2])
        awaiting = [Call(str(tool), key, None, str(call_id)) for tool, key, call_id in (rest[0] if rest else ())]
        self._previous, self._run, self._awaiting = previous, int(run), awaiting
