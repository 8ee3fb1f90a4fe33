"""Where ``ingest`` gets its spans, besides files: anything that yields :class:`SpanBatch` es (a
:class:`SpanSource`), such as the Collector's ClickHouse table (``otel_repeat_guard/clickhouse/spans.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan


@dataclass(frozen=True, slots=True)
class SpanBatch:
    """The spans decoded by one step of a source, the records they came from, and the records skipped.

    ``problems`` holds one ``(where, why)`` per record that could not be a span (``where``: ``PATH:LINE``, or
    a table's row); ``offset`` and ``size`` say how far reading stands, for progress. ``idle`` marks a step
    that found nothing new while following (time-based work may run).
    """

    spans: list[ReadableSpan]
    records: int
    problems: list[tuple[str, str]] = field(default_factory=list)
    offset: int = 0
    size: int = 0
    idle: bool = False


class SpanSource(Protocol):
    """A source of spans for ``ingest``: ``name`` says where they come from in every message."""

    @property
    def name(self) -> str: ...

    def batches(self) -> Iterator[SpanBatch]: ...
