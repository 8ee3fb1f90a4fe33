"""Where the guard decides what an ending span means, and where its events go: the processor's two ways.

On its own (:class:`InPlace`) the guard decides in the SDK's end-of-span hook (``_on_ending``) and writes its events
and facts on the ending span itself, before any other processor sees it. With ``downstream=[...]`` it is a wrapper
processor (:class:`Wrapping`, logfire's ``WrapperSpanProcessor`` shape): it decides in ``on_end`` and hands each
wrapped processor a copy of the span with the events added, every other hook passed on as the provider would call
it. The processor picks one at construction and calls it from every hook, never asking which it has."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor

from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.decide.decision import Decision
from otel_repeat_guard.decide.guard import Guard
from otel_repeat_guard.decide.log_events import LogEvents
from otel_repeat_guard.inputs import context_or_none, shown_name
from otel_repeat_guard.spans.span_events import EventSpec, copy_with_events, ended_id, record_on_ending_span

logger = logging.getLogger("otel_repeat_guard")

ReminderCallback = Callable[[Reminder], None]


class Outlets:
    """Where a decision goes besides its span: its reminders to the harness's ``on_reminder`` (watched until an
    adapter takes them, :mod:`otel_repeat_guard.decide.delivery`), its events as log events too (when on)."""

    def __init__(self, guard: Guard, on_reminder: ReminderCallback | None, logs: LogEvents | None) -> None:
        self._guard, self._on_reminder, self._logs = guard, on_reminder, logs

    def ended(self, span: ReadableSpan, decision: Decision) -> None:
        """A decision about an ending span, its events recorded (on it, or on the copy handed on)."""
        if self._logs is not None and decision.events:
            self._logs.emit_ended(span, decision.events)
        self.deliver(decision.reminders)

    def opened(self, span: Span, decision: Decision) -> None:
        """A decision about a span still open (at its start, or before a model request goes out from it)."""
        if self._logs is not None and decision.events:
            self._logs.emit(span.get_span_context(), decision.events, None)
        self.deliver(decision.reminders)

    def deliver(self, reminders: list[Reminder]) -> None:
        if self._on_reminder is None:
            return
        for reminder in reminders:
            try:
                self._on_reminder(reminder)
            except Exception:
                logger.exception("on_reminder callback raised for agent %r; the guard carries on", reminder.agent_id)
            else:
                self._guard.deliveries.handed(reminder)


class InPlace:
    """The guard on its own: it decides as the span ends and writes on the span itself."""

    def __init__(self, guard: Guard, outlets: Outlets) -> None:
        self._guard, self._outlets = guard, outlets

    def started(self, span: Span, parent_context: object) -> None:
        """A span started (the guard has read it): nothing to pass on."""

    def ending(self, span: Span) -> None:
        try:
            decision = self._guard.ended(span)
            if decision is not None:
                record_on_ending_span(span, decision.events, decision.facts)
                if decision.events or decision.reminders:  # nearly every decision is its facts alone
                    self._outlets.ended(span, decision)
        except Exception:
            logger.exception("repeat guard failed at the end of span %r; the span is unaffected", shown_name(span))

    def ended(self, span: ReadableSpan) -> None:
        """A span ended: decided already, as it ended."""

    def open_events(self, span: Span, span_id: int | None, events: list[EventSpec]) -> None:
        """Events about a span still open (``span_id`` None: not one the provider started here)."""
        if span.is_recording():
            for event, attributes in events:
                span.add_event(event, attributes)

    def after_fork(self) -> None:
        """In a forked child: nothing held for spans in flight."""

    def shutdown(self) -> None:
        """Nothing wrapped to shut down."""

    def force_flush(self, timeout_millis: int) -> bool:
        return True


class Wrapping(InPlace):
    """A wrapper processor over ``downstream``: the guard decides in ``on_end`` and hands each processor a copy of
    the span with its events (and facts) added, within the span's limits; every other hook is passed on."""

    def __init__(self, guard: Guard, outlets: Outlets, downstream: Sequence[SpanProcessor]) -> None:
        super().__init__(guard, outlets)
        self._downstream, self._limits = downstream, SpanLimits()
        self._held: dict[int, list[EventSpec]] = {}  # events for spans still open, added to their copies

    def started(self, span: Span, parent_context: object) -> None:
        for processor in self._downstream:
            _pass_on(processor, "on_start", span, context_or_none(parent_context))

    def ending(self, span: Span) -> None:
        for processor in self._downstream:
            _pass_on(processor, "_on_ending", span)  # the SDK's end-of-span hook, as the provider calls it

    def ended(self, span: ReadableSpan) -> None:
        forwarded = span
        try:
            decision = self._guard.ended(span)
            held = self._held
            earlier = held.pop(span_id, None) if held and (span_id := ended_id(span)) is not None else None
            if decision is not None:
                forwarded = copy_with_events(span, (earlier or []) + decision.events, self._limits, decision.facts)
                self._outlets.ended(span, decision)
            elif earlier:
                forwarded = copy_with_events(span, earlier, self._limits, None)
        except Exception:
            logger.exception("repeat guard failed in on_end for span %r; the span is unaffected", shown_name(span))
        for processor in self._downstream:
            _pass_on(processor, "on_end", forwarded)

    def open_events(self, span: Span, span_id: int | None, events: list[EventSpec]) -> None:
        if span_id is None:  # not started here: it is handed on by no one, so the events go on it
            super().open_events(span, span_id, events)
        else:
            self._held[span_id] = events

    def after_fork(self) -> None:
        self._held.clear()

    def shutdown(self) -> None:
        for processor in self._downstream:
            _pass_on(processor, "shutdown")

    def force_flush(self, timeout_millis: int) -> bool:
        return all([_pass_on(processor, "force_flush", timeout_millis) for processor in self._downstream])


def _pass_on(processor: SpanProcessor, hook: str, *arguments: object) -> object:
    """A wrapped processor's hook, as the provider would call it; one that raises (the SDK catches nothing a
    processor raises) is logged, and the application, the guard and the other processors carry on."""
    try:
        return getattr(processor, hook)(*arguments)
    except Exception:
        logger.exception(
            "span processor %s failed in %s; the guard and the other processors carry on",
            type(processor).__name__,
            hook,
        )
        return None
