"""What the guard decides about one span (:class:`Decision`), and the call record its steps pass along
(:class:`CountedCall`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_repeat_guard.conventions.base import MISSING, EventLike
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.spans.run import Run
from otel_repeat_guard.spans.span_events import EventSpec


class Decision:
    """What the guard decided about one span: the events for it, the reminders for the harness, and the
    facts (:mod:`otel_repeat_guard.core.facts`) that the store, the dashboard and ``doctor`` read instead of deciding again.

    A plain class, not a named tuple: the compiled build makes it natively, where a named tuple's ``__new__``
    stays interpreted (a repeat makes one)."""

    __slots__ = ("events", "facts", "reminders")

    def __init__(self, events: list[EventSpec], reminders: list[Reminder], facts: dict[str, Any] | None = None) -> None:
        self.events = events
        self.reminders = reminders
        self.facts = facts

    def __repr__(self) -> str:
        return f"Decision(events={self.events!r}, reminders={self.reminders!r}, facts={self.facts!r})"

    def merge(self, more: Decision | None) -> None:
        """Add ``more``'s events and reminders to this one (whose facts stand); None adds nothing."""
        if more is not None:
            self.events.extend(more.events)
            self.reminders.extend(more.reminders)


_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


class CountedCall:
    """One tracked tool call as its run counts it: what keying it, the opt-in detectors and wording a repeat
    need of it. ``span`` is its own tool span, None for a call counted from its model's request (its events
    go on the span ``context`` names: the request's); ``key`` is its arguments' key once counted (None: its
    arguments are unknown or not JSON-like, never identical to others); ``facts`` what is recorded of it."""

    __slots__ = (
        "arguments",
        "attributes",
        "call_id",
        "context",
        "error",
        "events",
        "facts",
        "key",
        "quote",
        "run",
        "span",
        "tool",
    )

    def __init__(  # noqa: PLR0913 - the record's own fields
        self,
        run: Run,
        tool: str,
        arguments: Any,
        span: ReadableSpan | None = None,
        attributes: Mapping[str, Any] = _NOTHING,
        events: Sequence[EventLike] = (),
        *,
        key: bytes | None = None,
        error: bool = False,
        call_id: str | None = None,
        context: SpanContext | None = None,
        facts: dict[str, Any] | None = None,
        quote: Any = MISSING,
    ) -> None:
        self.run, self.tool, self.arguments, self.key = run, tool, arguments, key
        self.span, self.attributes, self.events = span, attributes, events
        self.error, self.call_id, self.context, self.facts = error, call_id, context, facts
        self.quote = quote  # the arguments as the model's request sent them, where read: what a reminder quotes
