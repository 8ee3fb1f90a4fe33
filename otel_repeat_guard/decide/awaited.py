"""Outcomes that come after their calls: the runs whose calls wait for the next model request to carry
their results back, and reading those results when it ends.

A tool span that records no result (MCP's server span, a subprocess's tools), or a call counted from
the model's request with no tool span at all (CrewAI and Haystack under OpenLLMetry), still has an
outcome: the runtime sends it to the model as a ``tool`` message of the next request. With no-progress
detection on, such a call waits in its run's detector under its call id (``Call.awaits``); the next model
call of the run to end reads its ``tool_call_response`` parts (:mod:`otel_repeat_guard.conventions.responses`)
and hands the detector their digests. What they extend is worded then, its events on that model call's
span: a reminder due then reaches the model one request later than one from a tool span's own result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import SpanContext

from otel_repeat_guard.conventions import MISSING, EventLike, SpanRouter
from otel_repeat_guard.conventions.outcomes import outcome_digest, unwrap_envelope
from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.decide.decision import CountedCall, Decision
from otel_repeat_guard.decide.recorder import Recorder
from otel_repeat_guard.spans.run import Run

logger = logging.getLogger("otel_repeat_guard")


class AwaitedOutcomes:
    """The runs whose calls await their outcome (a bounded set of chain keys), and their answering."""

    __slots__ = ("_chains", "_limit", "_recorder", "_router", "runs")

    def __init__(self, router: SpanRouter, chains: ChainStore, recorder: Recorder, limit: int) -> None:
        self.runs: dict[str, None] = {}
        """Chain keys of the runs with calls waiting (:meth:`any_run`, :meth:`awaits`)."""
        self._router, self._chains, self._recorder, self._limit = router, chains, recorder, limit

    def any_run(self) -> bool:
        """Whether any run's calls await their outcome."""
        return bool(self.runs)

    def awaits(self, run_key: str) -> bool:
        """Whether calls of the run ``run_key`` await their outcome from its next model request."""
        return run_key in self.runs

    def waits(self, run_key: str) -> None:
        """A call of the run awaits its outcome."""
        put_bounded(self.runs, run_key, None, self._limit)

    def answered(
        self,
        run: Run,
        mask: int,
        name: str,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        context: SpanContext,
    ) -> Decision:
        """The run's model call ``name`` ended: the outcomes its request carried back, and what the waiting
        calls extend with them (events for this span, and the reminders due)."""
        self.runs.pop(run.key, None)  # another thread's model call of the run may have answered it first
        try:
            responses = {
                call_id: unwrap_envelope(value)
                for call_id, value in self._router.tool_responses(mask, name, attributes, events).items()
            }
        except Exception:
            logger.warning("repeat guard could not read the tool results model call %r carries", name, exc_info=True)
            responses = {}
        digests = {call_id: digest for call_id, value in responses.items() if (digest := outcome_digest(value))}
        decision = Decision([], [])
        for call, found in self._chains.outcomes(run.key, digests):
            call_id = call.awaits or ""
            outcome = responses.get(call_id, MISSING)
            counted = CountedCall(run, call.tool, MISSING, call_id=call_id, context=context)
            decision.merge(self._recorder.detection(counted, found, outcome))
        for reminder in decision.reminders:
            self._chains.reminded(run.key, reminder.kind, reminder.tier, reminder.period)
        return decision

    def forget(self, run_key: str) -> None:
        self.runs.pop(run_key, None)

    def after_fork(self) -> None:
        self.runs.clear()
