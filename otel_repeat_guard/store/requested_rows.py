"""The rows of the calls the guard counted from a model's request (they have no tool span of their own).

Each is a ``repeat_tool_guard.call`` event on whatever span the guard put it (the model call that
followed, or the span a harness asked from, often the agent run's), keyed ``<span id>/<index>`` in that
span. A call's outcome may arrive later, with the next model request: its no-progress event is then
on that model call's span, naming the call by its id. :class:`LateDetections` holds such events by
(trace, call id) until the call's row is made, before or after them in the export order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.conventions.base import str_or_none
from otel_repeat_guard.core.facts import CALL_EVENT, ISSUER, RUN, RUN_NAME, VARIANT, WASTED
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.decide.recorder import CYCLE_EVENT, NO_PROGRESS_EVENT, REMINDER_EVENT
from otel_repeat_guard.spans.span_events import contents_of, start_ns
from otel_repeat_guard.store.records import REPEAT, DetectionRow, GuardEvents, ToolCallRow, service_name
from otel_repeat_guard.store.storable import int_or_none

_MAX_HELD = 4096


class LateDetections:
    """Cycle and no-progress events (and their reminders) on spans that are not tool spans, by the trace and
    call id they name, until a call row of that id takes them. Bounded: past ``limit`` calls the oldest go."""

    __slots__ = ("_held", "_limit", "_lock")

    def __init__(self, limit: int = _MAX_HELD) -> None:
        self._held: OrderedDict[tuple[str, str], list[Any]] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def hold(self, trace_id: str, events: Sequence[Any]) -> None:
        for event in events:
            attributes = event.attributes or {}
            call_id = str_or_none(attributes.get("gen_ai.tool.call.id"))
            if call_id is None:
                continue
            if event.name in (CYCLE_EVENT, NO_PROGRESS_EVENT) or (
                event.name == REMINDER_EVENT and attributes.get("repeat_tool_guard.kind", REPEAT) != REPEAT
            ):
                with self._lock:
                    self._held.setdefault((trace_id, call_id), []).append(event)
                    if len(self._held) > self._limit:
                        self._held.popitem(last=False)

    def take(self, trace_id: str, call_id: str | None) -> tuple[DetectionRow, ...]:
        if call_id is None or not self._held:
            return ()
        with self._lock:
            events = self._held.pop((trace_id, call_id), None)
        return GuardEvents(events).rows(None) if events else ()


def requested_call_rows(span: ReadableSpan, tracked: ToolFilter, late: LateDetections) -> list[ToolCallRow]:
    """The rows of the calls the guard counted from a model's request: one per ``repeat_tool_guard.call``
    event, with the detections ``late`` holds for its call id (this span's own included)."""
    context = span.context
    events = contents_of(span)[2]
    if context is None or not len(events):
        return []
    trace_id = format_trace_id(context.trace_id)
    late.hold(trace_id, events)
    rows: list[ToolCallRow] = []
    at = start_ns(span)
    for index, event in enumerate(events):
        attributes = event.attributes or {}
        tool, run = str_or_none(attributes.get("gen_ai.tool.name")), str_or_none(attributes.get(RUN))
        if event.name != CALL_EVENT or tool is None or run is None:
            continue
        length = int_or_none(attributes.get("repeat_tool_guard.run_length"))
        tier = str_or_none(attributes.get("repeat_tool_guard.tier"))
        threshold = int_or_none(attributes.get("repeat_tool_guard.threshold"))
        repeat = (
            (DetectionRow(REPEAT, length, reminder_tier=tier, reminder_threshold=threshold),)
            if length is not None and length >= 2
            else ()
        )
        rows.append(
            ToolCallRow(
                start_ns=event.timestamp or at,
                end_ns=event.timestamp or at,
                service_name=service_name(span),
                trace_id=trace_id,
                span_id=f"{format_span_id(context.span_id)}/{index}",
                parent_span_id=format_span_id(context.span_id),
                agent_key=run,
                agent_name=str_or_none(attributes.get(RUN_NAME)),
                agent_known=True,
                tool_name=tool,
                tracked=tracked[tool],
                arguments_digest=str_or_none(attributes.get("repeat_tool_guard.arguments_digest")),
                arguments_preview=None,
                error=False,
                run_length=length,
                reminder_tier=tier,
                reminder_threshold=threshold,
                detections=repeat + late.take(trace_id, str_or_none(attributes.get("gen_ai.tool.call.id"))),
                issuer_span_id=str_or_none(attributes.get(ISSUER)),
                charges_issuer=attributes.get(WASTED) is True,
                decided=True,
                reminder_variant=None if tier is None else str_or_none(attributes.get(VARIANT)),
            ).storable()
        )
    return rows
