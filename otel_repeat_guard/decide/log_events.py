"""The guard's span events, also as OpenTelemetry log events (the Logs API), with the span's context.

OpenTelemetry deprecated the Span Event API (OTEP 4430): events go through the Logs API, carrying the span's
trace and span ids, and backends read them there. So each event the guard puts on a span is also emitted as a
log event of the same name and attributes, and each loop as a ``gen_ai.evaluation.result``
(:mod:`otel_repeat_guard.decide.evaluations`). The span events stay as they are.

They go to the ``LoggerProvider`` given to the processor (``logger_provider=``), else the global one. With
none configured (the API's proxy or no-op provider) nothing is made at all: the provider is looked at once
per :data:`LOOK_AGAIN_S` at most, and only when there is an event to emit; once a real one is found its
logger is kept. ``GuardConfig.log_events=False`` (``OTEL_REPEAT_GUARD_LOG_EVENTS=false``) turns them off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

from opentelemetry import trace
from opentelemetry._logs import Logger, LoggerProvider, NoOpLogger, NoOpLoggerProvider, get_logger_provider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.evaluations import Evaluations
from otel_repeat_guard.spans.span_events import EventSpec, context_of, end_ns
from otel_repeat_guard.version import __version__

logger = logging.getLogger("otel_repeat_guard")

SCOPE: Final = "otel_repeat_guard"
"""The instrumentation scope the log events carry."""
LOOK_AGAIN_S: Final = 1.0
"""How long, with no ``LoggerProvider`` configured, before the guard looks for one again."""


def is_real(provider: object) -> bool:
    """Whether ``provider`` makes log records: not the API's no-op provider, nor its proxy (what the global one is
    until an SDK ``LoggerProvider`` is set; it is known by its class's name, which the API does not export)."""
    return not isinstance(provider, NoOpLoggerProvider) and type(provider).__name__ != "ProxyLoggerProvider"


class LogEvents:
    """Emits a decision's events, and its loops as evaluations, as log events in a span's context."""

    __slots__ = ("_clock", "_evaluations", "_given", "_logger", "_next_look")

    def __init__(
        self, config: GuardConfig, provider: LoggerProvider | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._given = provider
        self._clock = clock
        self._evaluations = Evaluations(config)
        self._logger: Logger | None = None
        self._next_look = 0.0

    @staticmethod
    def made(config: GuardConfig, provider: object) -> LogEvents | None:
        """The processor's log events: None when ``config.log_events`` is off. ``provider`` is checked: None or
        an object with ``get_logger`` (a ValueError naming ``logger_provider`` otherwise)."""
        if provider is not None and not callable(getattr(provider, "get_logger", None)):
            raise ValueError(f"logger_provider must be an OpenTelemetry LoggerProvider or None, got {provider!r}")
        if not config.log_events:
            return None
        return LogEvents(config, provider)  # type: ignore[arg-type]  # checked above

    def _found(self) -> Logger | None:
        """The logger to emit with, or None while no real provider is configured (looked for once a second)."""
        now = self._clock()
        if now < self._next_look:
            return None
        self._next_look = now + LOOK_AGAIN_S
        provider = get_logger_provider() if self._given is None else self._given
        if not is_real(provider):
            return None
        found = provider.get_logger(SCOPE, __version__)
        if isinstance(found, NoOpLogger):  # the SDK's provider when OTEL_SDK_DISABLED is true
            return None
        self._logger = found
        return found

    def emit_in(self, context: SpanContext, events: list[EventSpec]) -> None:
        """``events`` as they are (a reminder's outcome, :mod:`otel_repeat_guard.decide.shown`), now, in ``context``."""
        found = self._logger or self._found()
        if found is not None:
            self._emitted(found, context, events, time.time_ns())

    def emit(self, context: SpanContext | None, events: Sequence[EventSpec], timestamp: int | None) -> None:
        """``events`` (a decision's, already on the span) as log events in the span's ``context``, and their
        loops as evaluations; at ``timestamp`` (nanoseconds; None: now). Never raises."""
        found = self._logger
        if found is None:
            found = self._found()
            if found is None or context is None:
                return
        elif context is None:
            return
        self._emitted(found, context, [*events, *self._evaluations.of(events)], timestamp or time.time_ns())

    def emit_ended(self, span: ReadableSpan, events: Sequence[EventSpec]) -> None:
        """:meth:`emit` for a span that ends, in its context at its end: read only when there is a logger to emit
        with (most processes configure none)."""
        if self._logger is not None or self._found() is not None:
            self.emit(context_of(span), events, end_ns(span))

    @staticmethod
    def _emitted(found: Logger, context: SpanContext, events: Sequence[EventSpec], timestamp: int) -> None:
        try:
            within = trace.set_span_in_context(NonRecordingSpan(context))
            for name, attributes in events:
                found.emit(timestamp=timestamp, context=within, event_name=name, attributes=dict(attributes))
        except Exception:
            logger.exception("repeat guard failed to emit its log events; the span events stand")
