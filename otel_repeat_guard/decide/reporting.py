"""What the guard says of the tool calls it recognises: how each was seen, to ``audit=`` (``otel-repeat-guard
doctor``); and each it cannot compare, counted on the metric, said on its span and warned of once per scope with
the setting that fixes it (:mod:`otel_repeat_guard.decide.blind_spots` has the reasons and their fixes)."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.decide.blind_spots import CallAudit, WarnOnce, tell
from otel_repeat_guard.decide.recorder import UNGUARDED_EVENT
from otel_repeat_guard.spans.span_events import EventSpec, scope_of


class BlindSpots:
    """The guard's blind spots, reported: ``on_unguarded(reason, tool)`` counts one, ``audit`` hears of every call."""

    __slots__ = ("_audit", "_on_unguarded", "warn")

    def __init__(
        self, on_unguarded: Callable[[str, str], None], audit: Callable[[CallAudit], None] | None, warn: WarnOnce
    ) -> None:
        self._on_unguarded, self._audit, self.warn = on_unguarded, audit, warn

    def compared(self, where: ReadableSpan | str, tool: str, source: str, how: str) -> None:
        """A call compared as ``source`` says, in a run found as ``how`` says; ``where``: its span, or its scope."""
        if self._audit is not None:
            scope = where if isinstance(where, str) else scope_of(where)
            tell(self._audit, CallAudit(scope, tool, source, how, None))

    def unguarded(self, reason: str, tool: str, where: ReadableSpan | str | None, source: str, how: str) -> EventSpec:
        """A recognised call the guard cannot compare: counted, told, warned of once per scope; its span's event."""
        self._on_unguarded(reason, tool)
        scope = where if isinstance(where, str) else scope_of(where)
        if self._audit is not None:
            tell(self._audit, CallAudit(scope, tool, source, how, reason))
        self.warn(reason, scope, tool)
        return UNGUARDED_EVENT, {"repeat_tool_guard.reason": reason, "gen_ai.tool.name": tool}
