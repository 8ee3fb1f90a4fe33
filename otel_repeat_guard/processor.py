"""The span processor: the SDK's hooks, and nothing the guard decides (:mod:`otel_repeat_guard.decide.guard` does).

``on_start`` and ``on_end`` tell the run resolver of every span; where an ending span is decided and its events go
is the processor's way, picked once (:mod:`otel_repeat_guard.decide.span_ends`): on the span as it ends, or, with
``downstream``, on a copy handed to the processors it wraps (logfire's shape)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.blind_spots import CallAudit
from otel_repeat_guard.decide.decision import Decision
from otel_repeat_guard.decide.delivery import watched_inbox
from otel_repeat_guard.decide.guard import Guard, GuardOptions
from otel_repeat_guard.decide.harness import HarnessQuestions
from otel_repeat_guard.decide.log_events import LogEvents
from otel_repeat_guard.decide.recorder import REDACTION_FAILED, REMINDER_EVENT, REPEAT_EVENT, UNGUARDED_EVENT
from otel_repeat_guard.decide.span_ends import InPlace, Outlets, ReminderCallback, Wrapping
from otel_repeat_guard.forks import ForkHandle
from otel_repeat_guard.inputs import checked_processor_options, flush_timeout, shown_name
from otel_repeat_guard.spans.baggage import run_in
from otel_repeat_guard.spans.span_events import ended_id, start_of

logger = logging.getLogger("otel_repeat_guard")

__all__ = ["REDACTION_FAILED", "REMINDER_EVENT", "REPEAT_EVENT", "UNGUARDED_EVENT", "Decision", "ReminderCallback"]
__all__ += ["RepeatGuardSpanProcessor"]


class RepeatGuardSpanProcessor(HarnessQuestions):
    """Reminds agents that repeat the same tool call; advisory only: it never blocks, delays or rewrites a call.

    Reminders go to ``on_reminder`` on the thread that ends the tool span, events on the tool span; with
    ``downstream`` it wraps those processors and hands them a copy of each span with the events added.
    ``redact`` rewrites the arguments text a reminder quotes (detection compares the real ones).
    ``fast_path=False`` sends every tool call through the general body of ``Guard.tool_call`` (its plain case's reference).
    It puts what it decided on the spans (:mod:`otel_repeat_guard.core.facts`); ``record_facts=False`` adds its events
    only (docs/semantics.md says what that costs). ``logger_provider`` takes the events also emitted as log events
    (default: the global one; :mod:`otel_repeat_guard.decide.log_events`)."""

    def __init__(  # noqa: PLR0913 - the public constructor: keyword options, as the SDK's
        self,
        config: GuardConfig | None = None,
        on_reminder: ReminderCallback | None = None,
        *,
        meter_provider: MeterProvider | None = None,
        max_agents: object = 100_000,  # options the application sets take any value: checked inside (inputs.py)
        max_live_spans: object = 100_000,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
        downstream: Sequence[SpanProcessor] = (),
        redact: Callable[[str], str] | None = None,
        audit: Callable[[CallAudit], None] | None = None,
        fast_path: object = True,
        record_facts: object = True,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        conventions, downstream = checked_processor_options(on_reminder, conventions, downstream, meter_provider)
        options = GuardOptions(
            meter_provider, max_agents, max_live_spans, conventions, redact, audit, bool(fast_path), bool(record_facts)
        )
        self._guard = guard = Guard(GuardConfig() if config is None else config, options)  # checks the other options
        # the run resolver the hooks tell of every span, and the chains (tests read them)
        self._runs, self._chains = guard.runs, guard.chains
        inbox = watched_inbox(on_reminder)  # an inbox's put: whether adapters take its reminders is watched
        if inbox is not None:
            guard.deliveries.watch(inbox)
        logs = LogEvents.made(guard.config, logger_provider)  # None: log events are off
        if logs is not None:  # reminder outcomes as evaluations too (decide/shown.py)
            guard.shown.sink = logs.emit_in
        self._outlets = outlets = Outlets(guard, on_reminder, logs)
        self._ends = Wrapping(guard, outlets, downstream) if downstream else InPlace(guard, outlets)
        self._follow_remote = guard.config.follows_remote_runs  # a span under a remote parent: the baggage's run
        self._fork = ForkHandle(self._ends.after_fork, guard.after_fork)  # a forked child starts afresh

    def after_fork(self) -> None:  # in a forked child (forks.py): nothing in flight, the configuration stays
        self._fork.after_fork()

    # -- SpanProcessor -------------------------------------------------------------

    def on_start(self, span: Span, parent_context: object = None) -> None:
        try:
            span_id, name, attributes, kept = start_of(span)
            if self._follow_remote:
                parent = span.parent
                if parent is not None and parent.is_remote and (run_key := run_in(parent_context)) is not None:
                    self._runs.remote_child(span, parent, run_key, attributes)
            self._runs.opened(span_id, kept)
            decision = self._guard.started(span, name, attributes) if attributes else None  # most have none yet
            if decision is not None:
                self._record_open(span, span_id, decision)
        except Exception:
            logger.exception("repeat guard failed in on_start; the span is unaffected")
        self._ends.started(span, parent_context)

    def _on_ending(self, span: Span) -> None:
        self._ends.ending(span)  # on its own, the guard decides here; wrapping, this hook is passed on

    def on_end(self, span: ReadableSpan) -> None:
        self._ends.ended(span)  # wrapping, the guard decides here and hands on the copy
        try:
            span_id = ended_id(span)
            if span_id is not None:  # stop tracking it; if it stood for a run, the run's chain ends
                self._runs.closed(span_id)
        except Exception:
            logger.exception("repeat guard failed in on_end for span %r; the span is unaffected", shown_name(span))

    def shutdown(self) -> None:
        self._ends.shutdown()

    def force_flush(self, timeout_millis: object = 30000) -> bool:  # a float too, as the SDK's processors take
        return self._ends.force_flush(flush_timeout(timeout_millis))
