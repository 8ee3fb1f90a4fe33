"""``--replay``: run the guard's own chain logic over spans recorded without the guard.

Spans are held per trace until the trace is complete (its root span arrived), has been
idle for a while (``--follow``), or the input ended. Then they are played through a real
:class:`RepeatGuardSpanProcessor` in wrapping mode, in the order the SDK would have seen
them live: each span starts at its start time and ends at its end time (at equal times, what
ended before what started, parents start before children and children end before parents;
:func:`otel_repeat_guard.spans.playback.play`). The guard resolves each
tool call's agent through its live ancestors exactly as in the agent process, counts runs
per agent in end order, and hands back copies of the tool spans with its
``repeat_tool_guard.repeat`` events, which the store reads like any other.

Two deliberate differences from a live guard:

- no reminder was ever delivered for a replayed run, so replay keeps the repeat events
  (run lengths) and drops the reminder events: the dashboard's loop figures include the
  replayed runs, its reminder figures stay the reminders agents actually received;
- a trace that already carries guard events was recorded with the guard: it is passed
  through untouched, never counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.processor import REMINDER_EVENT, RepeatGuardSpanProcessor
from otel_repeat_guard.spans.playback import play
from otel_repeat_guard.spans.span_events import replace_events

_GUARD_EVENT_PREFIX = "repeat_tool_guard."


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def _guarded(spans: Iterable[ReadableSpan]) -> bool:
    return any(event.name.startswith(_GUARD_EVENT_PREFIX) for span in spans for event in span.events)


def _without_reminders(span: ReadableSpan) -> ReadableSpan:
    if not any(event.name == REMINDER_EVENT for event in span.events):
        return span
    return replace_events(span, tuple(event for event in span.events if event.name != REMINDER_EVENT))


class Replayer:
    """Buffers spans per trace and replays finished traces through the guard's chain logic."""

    def __init__(
        self,
        config: GuardConfig | None = None,
        *,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
        idle_seconds: float = 30.0,
        max_spans: int = 1_000_000,
    ) -> None:
        self._collect = _Collect()
        self._guard = RepeatGuardSpanProcessor(
            config,
            None,
            meter_provider=NoOpMeterProvider(),
            conventions=conventions,
            downstream=[self._collect],
            record_facts=True,
        )
        self._traces: dict[int, list[ReadableSpan]] = {}
        self._touched: dict[int, float] = {}
        self._held = 0
        self._idle_seconds = idle_seconds
        self._max_spans = max_spans
        self.replayed_traces = 0
        self.guarded_traces = 0

    @property
    def held(self) -> int:
        """Spans waiting for their trace to finish."""
        return self._held

    def add(self, spans: Iterable[ReadableSpan], now: float | None = None) -> list[ReadableSpan]:
        """Take spans; return the spans of traces that are now complete, replayed."""
        now = time.monotonic() if now is None else now
        complete: list[int] = []
        for span in spans:
            context = span.context
            if context is None:
                continue
            trace = self._traces.setdefault(context.trace_id, [])
            trace.append(span)
            self._touched[context.trace_id] = now
            self._held += 1
            if span.parent is None:
                complete.append(context.trace_id)
        if self._held > self._max_spans:  # bounded memory: the oldest traces go now
            complete.extend(list(self._touched)[: max(1, len(self._touched) // 2)])
        return self._replay(complete)

    def flush_idle(self, now: float | None = None) -> list[ReadableSpan]:
        """Replay traces that got no span for ``idle_seconds`` (their root may never come)."""
        now = time.monotonic() if now is None else now
        return self._replay([t for t, seen in self._touched.items() if now - seen >= self._idle_seconds])

    def flush(self) -> list[ReadableSpan]:
        """Replay everything still held (the input has ended)."""
        return self._replay(list(self._traces))

    def _replay(self, trace_ids: Iterable[int]) -> list[ReadableSpan]:
        passed: list[ReadableSpan] = []
        replay: list[ReadableSpan] = []
        for trace_id in dict.fromkeys(trace_ids):
            spans = self._traces.pop(trace_id, None)
            self._touched.pop(trace_id, None)
            if spans is None:
                continue
            self._held -= len(spans)
            if _guarded(spans):
                self.guarded_traces += 1
                passed.extend(spans)
            else:
                self.replayed_traces += 1
                replay.extend(spans)
        return passed + self._play(replay)

    def _play(self, spans: list[ReadableSpan]) -> list[ReadableSpan]:
        """The spans played through the guard; a second copy of a span is handed on as it came (the store counts
        it as already stored), never played again."""
        if not spans:
            return []
        again = play(self._guard, spans)
        ended, self._collect.ended = self._collect.ended, []
        return [_without_reminders(span) for span in ended] + again
