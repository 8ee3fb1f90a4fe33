"""Reminder outcomes as GenAI evaluations of the span of the call that showed the reminder.

The chains count what a reminder led to (``broken``, ``ignored`` or ``ended``: the
``repeat_tool_guard.reminder_outcomes`` metric) when the run's next call comes or the run ends, and tell it
without the run. :class:`ShownReminders` wraps that callback: the guard says which run it is settling
(:meth:`ShownReminders.settling`, on the thread that settles it), and each outcome is matched with the
reminder of that run, kind and tier that is waiting, whose span context was kept when it was shown
(:meth:`ShownReminders.shown`). Its evaluation goes to ``sink`` (the processor's log events). An outcome of
a run evicted by another's call (past ``max_agents``) matches no waiting reminder of the run being
settled: its metric counts it, no evaluation is made. With no sink, nothing is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from opentelemetry.trace import SpanContext
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.core.chains import ReminderOutcome
from otel_repeat_guard.decide.evaluations import (
    EVALUATION_EVENT,
    EVALUATION_NAME,
    EXPLANATION,
    SCORE_LABEL,
    SCORE_VALUE,
)
from otel_repeat_guard.spans.span_events import EventSpec

OUTCOME_EVALUATION: Final = "repeat_tool_guard.reminder_outcome"
_SAID: Final = {
    "broken": "the run's next call was different: the reminder broke the loop",
    "ignored": "the run's next call went on with the loop",
    "ended": "the run ended before another call",
}
Sink = Callable[[SpanContext, list[EventSpec]], None]
"""Emits events in a span's context (:meth:`otel_repeat_guard.decide.log_events.LogEvents.emit_in`)."""


class ShownReminders:
    """The reminders each run is waiting on, with the span that showed each, bounded to ``max_runs`` runs."""

    __slots__ = ("_local", "_lock", "_max_runs", "_shown", "sink")

    def __init__(self, max_runs: int) -> None:
        self.sink: Sink | None = None
        self._max_runs = max_runs
        self._shown: OrderedDict[str, list[tuple[str, str, SpanContext]]] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()

    def wrap(self, counted: ReminderOutcome) -> ReminderOutcome:
        """The chains' outcome callback: ``counted`` (the metric), then the evaluation."""

        def told(outcome: str, kind: str, tier: str) -> None:
            counted(outcome, kind, tier)
            if self.sink is not None:
                self._evaluate(outcome, kind, tier)

        return told

    def settling(self, run_key: str | None) -> None:
        """The run whose outcomes the chains are about to tell, on this thread (None: done)."""
        if self.sink is not None:
            self._local.run = run_key

    def shown(self, run_key: str, kind: str, tier: str, context: SpanContext | None) -> None:
        """A reminder of ``kind`` and ``tier`` shown at the call of span ``context``, now waiting for its outcome."""
        if self.sink is None or context is None:
            return
        with self._lock:
            waiting = self._shown.get(run_key)
            if waiting is None:
                waiting = self._shown[run_key] = []
                if len(self._shown) > self._max_runs:
                    self._shown.popitem(last=False)
            waiting.append((kind, tier, context))

    def _evaluate(self, outcome: str, kind: str, tier: str) -> None:
        run_key = getattr(self._local, "run", None)
        if run_key is None:
            return
        with self._lock:
            waiting = self._shown.get(run_key) or []
            found = next((entry for entry in waiting if entry[0] == kind and entry[1] == tier), None)
            if found is None:
                return
            waiting.remove(found)
            if not waiting:
                del self._shown[run_key]
        evaluation: dict[str, AttributeValue] = {
            EVALUATION_NAME: OUTCOME_EVALUATION,
            SCORE_VALUE: 1.0 if outcome == "broken" else 0.0,
            SCORE_LABEL: outcome,
            EXPLANATION: f"after the {tier} {kind.replace('_', '-')} reminder, {_SAID.get(outcome, outcome)}",
        }
        sink = self.sink
        if sink is not None:
            sink(found[2], [(EVALUATION_EVENT, evaluation)])

    def after_fork(self) -> None:
        """In a forked child: nothing shown there yet, a fresh lock."""
        self._shown.clear()
        self._lock = threading.Lock()
        self._local = threading.local()
