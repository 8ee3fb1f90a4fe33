"""The minimal sketch the performance issue measures goals against, inside the benchmark only.

orjson canonical form, a 128-bit digest, a plain dict of agent state, a live-span map and
one event on repeats: GenAI tool spans only, the agent is the parent span, no conventions,
no tool filter, no failure signals, no metrics, no reminders. It shows what the goal asks
of the guard's hot path, and what the guard's own features cost on top of it.
"""

from __future__ import annotations

import threading
from types import MappingProxyType

import orjson
import xxhash
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor

from otel_repeat_guard import REPEAT_EVENT
from otel_repeat_guard.spans.span_events import attributes_of


class MinimalSketch(SpanProcessor):
    def __init__(self) -> None:
        self._live: dict[int, Span] = {}
        self._state: dict[int, tuple[bytes, int]] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._live[span.context.span_id] = span

    def _on_ending(self, span: Span) -> None:
        attributes = attributes_of(span)  # the guard's cheap reader, for a fair floor
        if attributes.get("gen_ai.operation.name") != "execute_tool" or span.parent is None:
            return
        agent = span.parent.span_id
        text = str(attributes.get("gen_ai.tool.call.arguments"))
        key = xxhash.xxh3_128_digest(orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS))
        with self._lock:
            previous = self._state.get(agent)
            run = previous[1] + 1 if previous is not None and previous[0] == key else 1
            self._state[agent] = (key, run)
        if run > 1:
            event = Event(REPEAT_EVENT, MappingProxyType({"repeat_tool_guard.run_length": run}), span.end_time)
            span._events.append(event)  # type: ignore[attr-defined]  # the bounded list, as the guard does

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None:
            self._live.pop(span.context.span_id, None)
