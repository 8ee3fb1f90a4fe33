"""Results that arrive with the next model request (``progress: results``): a tool span that records no result, in
a run whose model calls the guard reads, takes the result from the ``tool`` message the run's next request carries.

The tool span ends before that request is seen, so only the comparison of results is late. The call is counted when
its span ends, as if its result were the run's last known one (the previous call's): it extends the run when its tool
and arguments repeat the last call's. When the run's next model call ends, the tool message that answers the call
(by its call id; calls without one take the request's last tool messages, in order) gives its digest. If that
differs from the result assumed, the run restarts at the call (length 1, :meth:`~otel_repeat_guard.core.chains.ChainStore.rekey`)
before the run's next call is counted: the poll moved. A reminder already handed out stays handed out. A request
that carries no answer for the call makes it a ``no_result`` blind spot then (its event on that model call's span),
and so does a run that ends first (counted, no span left for an event). Only 16-byte digests are kept, never a result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.conventions import MISSING, EventLike, SpanRouter
from otel_repeat_guard.conventions.outcomes import outcome_digest, unwrap_envelope
from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.policy import with_result
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.decide.blind_spots import NO_RESULT
from otel_repeat_guard.decide.decision import CountedCall, Decision
from otel_repeat_guard.decide.progress import Results
from otel_repeat_guard.decide.reporting import BlindSpots
from otel_repeat_guard.spans import span_events as times
from otel_repeat_guard.spans.run import Run
from otel_repeat_guard.spans.span_events import EventSpec, scope_of

logger = logging.getLogger("otel_repeat_guard")

MAX_AWAITING: Final = 64
"""Calls of one run awaiting their results at most (a step that asks for more: the oldest are let go, unanswered)."""


class Awaiting:
    """A counted call whose result comes with the run's next request: the call (its ``key`` set once counted),
    the id its tool message answers, the result digest it was counted with, and how its arguments were seen."""

    __slots__ = ("assumed", "call", "call_id", "ended", "source")

    def __init__(self, call: CountedCall, call_id: str | None, assumed: bytes, source: str) -> None:
        self.call, self.call_id, self.assumed, self.source = call, call_id, assumed, source
        self.ended = 0 if call.span is None else times.end_ns(call.span)  # its tool span's end


class LateResults:
    """Each call's result digest under ``progress: results``, from its span or, late, from the run's next request."""

    __slots__ = ("_blind", "_chains", "_last", "_limit", "_router", "_waiting", "results")

    def __init__(self, results: Results, router: SpanRouter, chains: ChainStore, blind: BlindSpots, limit: int) -> None:
        self.results, self._router, self._chains, self._blind, self._limit = results, router, chains, blind, limit
        self._last: dict[str, bytes] = {}  # run key -> its last result's digest (runs whose calls awaited one)
        self._waiting: dict[str, list[Awaiting]] = {}  # run key -> its calls awaiting their results, in order

    def result_of(
        self, call: CountedCall, source: str, call_id: str | None, reads_requests: bool
    ) -> tuple[bytes | None, EventSpec | None]:
        """The digest to chain ``call`` by, if its tool compares results (the call is told to the audit as compared),
        and the ``no_result`` event when it has none. With none on its span and ``reads_requests`` (the guard read
        the model call that asked for it), the run's last known result, and the call awaits its own."""
        run, tool = call.run, call.tool
        if not self.results.compares(tool):
            self._blind.compared(call.span or "", tool, source, run.how)
            return None, None
        digest = self.results.digest(call)
        if digest is not None:
            self._blind.compared(call.span or "", tool, source, run.how)
            if self._last and run.key in self._last:  # kept only for runs whose calls awaited their results
                self._last[run.key] = digest
            return digest, None
        if not reads_requests:
            return None, self._blind.unguarded(NO_RESULT, tool, call.span, source, run.how)
        assumed = self._last.get(run.key)
        if assumed is None:  # the run's first call to await its result: no result known yet
            assumed = b""
            put_bounded(self._last, run.key, assumed, self._limit)
        waiting = self._waiting.get(run.key)
        if waiting is None:
            waiting = []
            evicted = put_bounded(self._waiting, run.key, waiting, self._limit)
            if evicted is not None:  # the least recent run's: let go
                self._last.pop(evicted[0], None)
                self._unanswered(evicted[1])
        elif len(waiting) >= MAX_AWAITING:
            self._unanswered([waiting.pop(0)])
        waiting.append(Awaiting(call, call_id, assumed, source))
        return assumed, None

    def any_run(self) -> bool:
        """Whether any run's calls await their results."""
        return bool(self._waiting)

    def awaits(self, run_key: str) -> bool:
        return run_key in self._waiting

    def answered(
        self,
        run: Run,
        mask: int,
        name: str,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        span: ReadableSpan,
    ) -> Decision:
        """The run's model call ``name`` (its ``span``) ended: the results its request carries back for the calls
        awaiting them whose tool spans ended before it started (a model call open while its tools ran answers
        none of them). The run restarts at its last call if that call's result is not the one it was counted
        with; a call the request does not answer is a ``no_result`` blind spot (its event for this span)."""
        decision = Decision([], [])
        started, scope = times.start_ns(span), scope_of(span)
        waiting = self._waiting.pop(run.key, None)
        if waiting and any(awaiting.ended > started for awaiting in waiting):  # ran while it was open: they wait on
            later = [awaiting for awaiting in waiting if awaiting.ended > started]
            put_bounded(self._waiting, run.key, later, self._limit)
            waiting = [awaiting for awaiting in waiting if awaiting.ended <= started]
        if not waiting:
            return decision
        try:
            responses = self._router.tool_responses(mask, name, attributes, events)
        except Exception:
            logger.warning("repeat guard could not read the tool results model call %r carries", name, exc_info=True)
            responses = {}
        digests = _digests(waiting, responses)
        for awaiting, digest in zip(waiting, digests, strict=True):
            tool = awaiting.call.tool
            if digest is None:
                decision.events.append(self._blind.unguarded(NO_RESULT, tool, scope, awaiting.source, run.how))
            else:
                self._blind.compared(scope, tool, awaiting.source, run.how)
        last, digest = waiting[-1], digests[-1]
        if digest is not None:
            put_bounded(self._last, run.key, digest, self._limit)
            key = last.call.key
            if key is not None and digest != last.assumed:  # the poll moved: the run restarts at this call
                self._chains.rekey(run.key, last.call.tool, with_result(key, last.assumed), with_result(key, digest))
        return decision

    def forget(self, run_key: str) -> None:
        """The run is over: its calls still awaiting their results never got them (``no_result``, counted)."""
        self._last.pop(run_key, None)
        waiting = self._waiting.pop(run_key, None)
        if waiting:
            self._unanswered(waiting)

    def _unanswered(self, waiting: list[Awaiting]) -> None:
        for awaiting in waiting:
            call = awaiting.call
            self._blind.unguarded(NO_RESULT, call.tool, call.span, awaiting.source, call.run.how)

    def after_fork(self) -> None:
        self._last.clear()
        self._waiting.clear()


def _digests(waiting: list[Awaiting], responses: Mapping[str, Any]) -> list[bytes | None]:
    """The result digest of each awaiting call, from the request's answers: by its call id; the calls without one
    take the answers no awaiting call's id claims, the last ones, in order. None where no answer (or no digest)."""
    claimed = {awaiting.call_id for awaiting in waiting if awaiting.call_id}
    rest = [value for call_id, value in responses.items() if call_id not in claimed]
    anonymous = sum(1 for awaiting in waiting if not awaiting.call_id)
    position = len(rest) - anonymous
    digests: list[bytes | None] = []
    for awaiting in waiting:
        value: Any = MISSING
        if awaiting.call_id:
            value = responses.get(awaiting.call_id, MISSING)
        else:
            if position >= 0:
                value = rest[position]
            position += 1
        digests.append(None if value is MISSING else outcome_digest(unwrap_envelope(value)))
    return digests
