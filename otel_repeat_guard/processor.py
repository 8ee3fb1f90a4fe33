"""The span processor: the SDK's hooks, and nothing the guard decides (:mod:`otel_repeat_guard.guard` does).

``on_start`` keeps the live-span map inline; ``_on_ending`` asks the guard what an ending span means and records
its events and facts on the span, its reminders for the harness; with ``downstream`` it wraps those (logfire's shape)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor

from otel_repeat_guard.baggage import run_in
from otel_repeat_guard.blind_spots import CallAudit
from otel_repeat_guard.chains import ChainTracker
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention
from otel_repeat_guard.forks import ForkHandle
from otel_repeat_guard.guard import Guard
from otel_repeat_guard.inputs import chain_key, checked_processor_options, context_or_none, flush_timeout, shown_name
from otel_repeat_guard.recorder import REDACTION_FAILED, REMINDER_EVENT, REPEAT_EVENT, UNGUARDED_EVENT, Decision
from otel_repeat_guard.reminders import Reminder
from otel_repeat_guard.rules import evict_oldest
from otel_repeat_guard.span_events import EventSpec, copy_with_events, record_on_ending_span, start_of

logger = logging.getLogger("otel_repeat_guard")

ReminderCallback = Callable[[Reminder], None]
__all__ = ["REDACTION_FAILED", "REMINDER_EVENT", "REPEAT_EVENT", "UNGUARDED_EVENT", "Decision", "ReminderCallback"]
__all__ += ["RepeatGuardSpanProcessor"]


class RepeatGuardSpanProcessor(SpanProcessor):
    """Reminds agents that repeat the same tool call; advisory only: it never blocks, delays or rewrites a call.

    Reminders go to ``on_reminder`` on the thread that ends the tool span, events on the tool span; with
    ``downstream`` it wraps those processors and hands them a copy of each span with the events added.
    ``redact`` rewrites the arguments text a reminder quotes (detection compares the real ones).
    ``fast_path=False`` reads every span the general way (the fast path's reference). ``record_facts=True``
    (``configure()`` sets it) puts what the guard decided on the spans (:mod:`otel_repeat_guard.facts`)."""

    def __init__(
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
        record_facts: object = False,
    ) -> None:
        conventions, downstream = checked_processor_options(on_reminder, conventions, downstream, meter_provider)
        self._guard = guard = Guard(  # checks the other options
            GuardConfig() if config is None else config,
            meter_provider=meter_provider,
            max_agents=max_agents,
            max_live_spans=max_live_spans,
            conventions=conventions,
            redact=redact,
            audit=audit,
            fast_path=bool(fast_path),
            record_facts=bool(record_facts),
        )
        self._runs, self._chains = guard.runs, guard.chains  # the state the hooks keep inline (and tests read)
        self._on_reminder, self._downstream = on_reminder, downstream
        self._wrapping, self._limits = bool(downstream), SpanLimits()
        self._wrapped_events: dict[int, list[EventSpec]] = {}  # wrapping mode: events for spans still open
        self._follow_remote = guard.config.follows_remote_runs  # a span under a remote parent: the baggage's run
        self._fork = ForkHandle(self._wrapped_events.clear, guard.after_fork)  # a forked child starts afresh

    def after_fork(self) -> None:  # in a forked child (forks.py): nothing in flight, the configuration stays
        self._fork.after_fork()

    @property
    def config(self) -> GuardConfig:
        return self._guard.config

    def reset(self, agent_id: object) -> None:
        """A user prompt was submitted: start the agent's chain afresh. ``agent_id`` is a chain key (``Reminder.agent_id``)
        or a ``gen_ai.agent.id`` (each open run of it too); not a string (None: no span), it is ignored, as by all three."""
        if (key := chain_key(agent_id)) is not None:
            self._guard.harness("reset", key)

    def forget(self, agent_id: object) -> None:
        """The agent is disposed: drop its state (a chain key, or a ``gen_ai.agent.id`` and its open runs)."""
        if (key := chain_key(agent_id)) is not None:
            self._guard.harness("forget", key)

    def run_length(self, agent_id: object) -> int:
        """The agent's current consecutive count, 0 if none."""
        return 0 if (key := chain_key(agent_id)) is None else self._guard.run_length(key)

    def chain_state(self, agent_id: str) -> list[Any] | None:
        """The chain key's repeat chain as plain values, for a harness that keeps it between processes; None without."""
        return self._chains.chain_state(agent_id) if isinstance(self._chains, ChainTracker) else None

    def restore_chain(self, agent_id: str, state: list[Any]) -> None:
        """Give the chain key what :meth:`chain_state` returned (a shared chain store keeps its own: nothing then)."""
        if isinstance(self._chains, ChainTracker):
            self._chains.restore_chain(agent_id, state)

    def current_agent_id(self, context: object = None) -> str | None:
        """The chain key of the current span's agent run (of ``context``), resolved as for a tool span started
        right here (``inbox.drain(guard.current_agent_id())``); None with no current span of this process."""
        return self._guard.current_run(trace.get_current_span(context_or_none(context)))

    def model_call_due(self, context: object = None) -> str | None:
        """A model request is about to go out from the current span (of ``context``): count now what the run's last
        model call requested that no tool span answered, so their reminders are in the inbox before this request
        (their events on the current span); returns the run's chain key."""
        try:
            current = trace.get_current_span(context_or_none(context))
            key, decision = self._guard.model_call_due(current)
            if decision is not None:
                if current.is_recording():
                    for name, attributes in decision.events:
                        current.add_event(name, attributes)
                self._deliver(decision.reminders)
        except Exception:
            logger.exception("repeat guard failed to prepare the next model call")
            return None
        return key

    # -- SpanProcessor -------------------------------------------------------------

    def on_start(self, span: Span, parent_context: object = None) -> None:
        try:
            span_id, name, attributes, kept = start_of(span)
            if self._follow_remote:
                parent = span.parent
                if parent is not None and parent.is_remote and (run_key := run_in(parent_context)) is not None:
                    self._runs.remote_child(span, parent, run_key, attributes)
            runs = self._runs  # the live-span map, written here without a call (every span)
            live = runs.live
            live[span_id] = kept  # what resolving a run needs of it, not the span (span_events.LiveSpan)
            if len(live) > runs.max_live_spans:
                evict_oldest(live)
            decision = self._guard.started(span, name, attributes) if attributes else None  # most have none yet
            if decision is not None:
                if decision.events and self._wrapping:
                    self._wrapped_events[span_id] = decision.events  # added to the copy handed on at its end
                else:
                    for event, event_attributes in decision.events:
                        span.add_event(event, event_attributes)  # the span is open: the public API works
                self._deliver(decision.reminders)
        except Exception:
            logger.exception("repeat guard failed in on_start; the span is unaffected")
        for processor in self._downstream:
            processor.on_start(span, parent_context=context_or_none(parent_context))

    def _decide(self, span: ReadableSpan) -> Decision | None:
        return self._guard.ended(span)

    def _on_ending(self, span: Span) -> None:
        if self._wrapping:  # the guard decides in on_end and hands on copies; the hook itself is passed on
            for processor in self._downstream:
                processor._on_ending(span)  # noqa: SLF001 - the SDK's end-of-span hook, as the provider calls it
            return
        try:
            decision = self._decide(span)
            if decision is not None:
                record_on_ending_span(span, decision.events, decision.facts)
                self._deliver(decision.reminders)
        except Exception:
            logger.exception("repeat guard failed at the end of span %r; the span is unaffected", shown_name(span))

    def on_end(self, span: ReadableSpan) -> None:
        forwarded = span
        try:
            context = span.context
            if self._wrapping:
                decision = self._decide(span)
                earlier = self._wrapped_events.pop(context.span_id, None) if self._wrapped_events and context else None
                if decision is not None or earlier:
                    events, reminders, facts = decision or ([], [], None)
                    forwarded = copy_with_events(span, (earlier or []) + events, self._limits, facts)
                    self._deliver(reminders)
            if context is not None:  # stop tracking it; if it stood for a run, the run's chain ends
                runs, span_id = self._runs, context.span_id
                runs.live.pop(span_id, None)
                if span_id in runs.owned or span_id in runs.marked:
                    runs.ended(span_id)
        except Exception:
            logger.exception("repeat guard failed in on_end for span %r; the span is unaffected", shown_name(span))
        for processor in self._downstream:
            processor.on_end(forwarded)

    def shutdown(self) -> None:
        for processor in self._downstream:
            processor.shutdown()

    def force_flush(self, timeout_millis: object = 30000) -> bool:  # a float too, as the SDK's processors take
        return all([processor.force_flush(flush_timeout(timeout_millis)) for processor in self._downstream])

    def _deliver(self, reminders: list[Reminder]) -> None:
        if self._on_reminder is None:
            return
        for reminder in reminders:
            try:
                self._on_reminder(reminder)
            except Exception:
                logger.exception("on_reminder callback raised for agent %r; the guard carries on", reminder.agent_id)
