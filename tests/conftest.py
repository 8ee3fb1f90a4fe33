"""Checks that run under every test suite: the routing fast path agrees with the full reader on every span."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, ToolCall, find_tool_call, tool_call_reader

_fast_read = tool_call_reader(DEFAULT_CONVENTIONS)


def assert_fast_path_agrees(spans: Sequence[ReadableSpan]) -> None:
    """The router, built from the conventions' declared marks, reads each span exactly as asking
    every convention in turn does."""
    for span in spans:
        attributes = span.attributes or {}
        name = span.name if isinstance(span.name, str) else ""  # as the guard reads a name that is no string
        fast = _fast_read(name, attributes, span.events)
        full = find_tool_call(DEFAULT_CONVENTIONS, name, attributes, span.events)
        assert (None if fast is None else ToolCall(*fast)) == full, (span.name, dict(attributes))


@pytest.fixture(autouse=True)
def _fast_path_agrees_with_full_reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every span any test exports to an in-memory exporter goes through the check."""
    export = InMemorySpanExporter.export

    def checked_export(self: InMemorySpanExporter, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        assert_fast_path_agrees(spans)
        return export(self, spans)

    monkeypatch.setattr(InMemorySpanExporter, "export", checked_export)
    yield
