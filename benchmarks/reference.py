"""The comparison anchor: a straightforward port of the reference design, kept only for benchmarking.

``json.dumps(sort_keys=True)`` on every call, a plain dict of agents, and events added by
wrapping the downstream processor with a copy of each repeated span.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor

from otel_repeat_guard import REPEAT_EVENT
from otel_repeat_guard.spans.span_events import replace_events


class ReferenceGuard(SpanProcessor):
    def __init__(self, downstream: Sequence[SpanProcessor] = (), keep: bool = False) -> None:
        self._downstream = tuple(downstream)
        self._last: dict[str, tuple[str, str, int]] = {}
        self._spans: dict[int, Span] = {}
        self._keep = keep
        self.exported: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._spans[span.context.span_id] = span
        for processor in self._downstream:
            processor.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self._spans.pop(span.context.span_id, None)
        attributes = span.attributes or {}
        if attributes.get("gen_ai.operation.name") == "execute_tool":
            agent = self._agent(span)
            if agent is not None:
                span = self._observe(span, agent, attributes)
        if self._keep:
            self.exported.append(span)
        for processor in self._downstream:
            processor.on_end(span)

    def _agent(self, span: ReadableSpan) -> str | None:
        parent = span.parent
        while parent is not None:
            ancestor = self._spans.get(parent.span_id)
            if ancestor is None:
                return None
            if (ancestor.attributes or {}).get("gen_ai.operation.name") == "invoke_agent":
                return f"{(ancestor.attributes or {}).get('gen_ai.agent.name')}#{parent.span_id:016x}"
            parent = ancestor.parent
        return None

    def _observe(self, span: ReadableSpan, agent: str, attributes: object) -> ReadableSpan:
        tool = str(span.attributes.get("gen_ai.tool.name"))  # type: ignore[union-attr]
        raw = span.attributes.get("gen_ai.tool.call.arguments")  # type: ignore[union-attr]
        try:
            canonical = json.dumps(json.loads(str(raw)), sort_keys=True)
        except ValueError:
            canonical = str(raw)
        previous = self._last.get(agent)
        run = previous[2] + 1 if previous and previous[0] == tool and previous[1] == canonical else 1
        self._last[agent] = (tool, canonical, run)
        if run < 2:
            return span
        event = Event(REPEAT_EVENT, {"repeat_tool_guard.run_length": run, "gen_ai.tool.name": tool})
        return replace_events(span, (*span.events, event))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all([p.force_flush(timeout_millis) for p in self._downstream])
