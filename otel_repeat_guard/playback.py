"""Playing recorded spans through a span processor in the order the SDK would have seen them live.

Used by ``ingest --replay`` and by ``doctor``: the guard then resolves runs through live
ancestors and counts calls in end order exactly as in the agent process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor


def play(processor: SpanProcessor, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Start and end ``spans`` on ``processor`` in the order the SDK would have seen them live:
    each span starts at its start time and ends at its end time (at equal times, parents start
    before children and children end before parents). A span given twice (a batch the Collector
    wrote again on a retry) plays once: played twice, its call would extend its run twice. Returns
    the copies left unplayed."""
    spans, again = _distinct(spans)
    depth = _depths(spans)
    steps: list[tuple[int, int, int, int, ReadableSpan]] = []
    for index, span in enumerate(spans):
        d = depth[index]
        start = span.start_time or 0
        steps.append((start, 0, d, index, span))  # starts: parents first
        steps.append((max(start, span.end_time or start), 1, -d, index, span))  # ends: children first
    steps.sort(key=lambda step: step[:4])
    for _, phase, _, _, span in steps:
        if phase == 0:
            processor.on_start(cast(Span, span))
        else:
            processor.on_end(span)
    return again


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


def _depths(spans: Sequence[ReadableSpan]) -> list[int]:
    """Each span's depth below its trace's top span among ``spans``."""
    parents: dict[tuple[int, int], tuple[int, int] | None] = {}
    for span in spans:
        context = span.context
        if context is None:  # pragma: no cover - filtered in add()
            continue
        parent = span.parent
        parents[(context.trace_id, context.span_id)] = (
            (context.trace_id, parent.span_id) if parent is not None else None
        )
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

    return [depth((s.context.trace_id, s.context.span_id)) if s.context is not None else 0 for s in spans]
