"""Playing recorded spans through a span processor in the order the SDK would have seen them live.

Used by ``ingest --replay`` and by ``doctor``: the guard then resolves runs through live
ancestors and counts calls in end order exactly as in the agent process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_repeat_guard.spans.span_events import end_ns, start_ns


def play(processor: SpanProcessor, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Start and end ``spans`` on ``processor`` in the order the SDK would have seen them live: each span starts at
    its start time and ends at its end time. At equal times (a millisecond clock, a step stamped where the last
    one ended), what ended goes before what started, as one thing after another happens: a tool call that starts
    the moment its model call ends finds that model call ended. Parents start before children and children end
    before parents; a span ends after its own start, and after the start of anything under it at that time. A
    span given twice (a batch the Collector wrote again on a retry) plays once: played twice, its call would
    extend its run twice. Returns the copies left unplayed."""
    spans, again = _distinct(spans)
    depth, late = _shape(spans)
    steps: list[tuple[int, int, int, int, ReadableSpan]] = []
    for index, span in enumerate(spans):
        d = depth[index]
        start = start_ns(span)
        end = max(start, end_ns(span) or start)
        steps.append((start, _START, d, index, span))  # parents first
        steps.append((end, _LATE_END if end == start or index in late else _END, -d, index, span))  # children first
    steps.sort(key=lambda step: step[:4])
    for _, phase, _, _, span in steps:
        if phase == _START:
            processor.on_start(cast(Span, span))
        else:
            processor.on_end(span)
    return again


_END, _START, _LATE_END = 0, 1, 2
"""The order of what happens at one time: ends, then starts, then the ends that must follow a start then."""


def _distinct(spans: Sequence[ReadableSpan]) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """``spans`` split into the first copy of each span (by trace and span id) and the copies after it."""
    seen: set[tuple[int, int]] = set()
    first: list[ReadableSpan] = []
    again: list[ReadableSpan] = []
    for span in spans:
        context = span.context
        if context is not None:
            key = (context.trace_id, context.span_id)
            if key in seen:
                again.append(span)
                continue
            seen.add(key)
        first.append(span)
    return first, again


def _shape(spans: Sequence[ReadableSpan]) -> tuple[list[int], set[int]]:
    """Each span's depth below its trace's top span among ``spans``, and the spans (by index) that end when a span
    under them starts: their ends must wait for that start."""
    parents: dict[tuple[int, int], tuple[int, int] | None] = {}
    index_of: dict[tuple[int, int], int] = {}
    for index, span in enumerate(spans):
        context = span.context
        if context is None:  # pragma: no cover - filtered in add()
            continue
        parent = span.parent
        key = (context.trace_id, context.span_id)
        parents[key] = (context.trace_id, parent.span_id) if parent is not None else None
        index_of[key] = index
    cache: dict[tuple[int, int], int] = {}

    def depth(key: tuple[int, int]) -> int:
        chain: list[tuple[int, int]] = []
        current: tuple[int, int] | None = key
        while current is not None and current in parents and current not in cache and len(chain) <= len(parents):
            chain.append(current)
            current = parents[current]
        base = cache.get(current, -1) if current is not None else -1
        for item in reversed(chain):
            base += 1
            cache[item] = base
        return cache[key]

    depths = [depth((s.context.trace_id, s.context.span_id)) if s.context is not None else 0 for s in spans]
    late: set[int] = set()
    for span in spans:
        context, start = span.context, start_ns(span)
        above = parents.get((context.trace_id, context.span_id)) if context is not None else None
        for _ in range(len(parents)):  # up its ancestors among ``spans`` (bounded: a cycle of bad ids ends)
            if above is None or above not in index_of:
                break
            ancestor = spans[index_of[above]]
            if end_ns(ancestor) == start:
                late.add(index_of[above])
            above = parents[above]
    return depths, late
