"""Recorded spans play in the order the SDK saw them live, ties included: at one time, what ended goes before what
started. A tool call that starts the nanosecond its model call ends (a millisecond clock, the demo's own spans)
used to start inside that model call, which then looked open: doctor saw blind spots, and a replay charged no
wasted tokens. The oracle is the live guard: a replay of the demo's spans, recorded without the guard, gives the
live store's figures."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import scenario
from otel_repeat_guard.ingest import Ingest, IngestOptions
from otel_repeat_guard.spans.playback import play
from otel_repeat_guard.spans.span_events import replace_events
from tests.ingest.otlp import batches, otlp_json_line, write_lines


class Order(SpanProcessor):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen.append(f"+{span.name}")

    def on_end(self, span: ReadableSpan) -> None:
        self.seen.append(f"-{span.name}")


def recorded(*spans: tuple[str, str | None, int, int]) -> list[ReadableSpan]:
    """(name, parent name, start, end) each, in the order given, recorded by the SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    made: dict[str, Any] = {}
    for name, parent, start, _ in spans:
        context = set_span_in_context(made[parent]) if parent is not None else None
        made[name] = tracer.start_span(name, context=context, start_time=start)
    for name, _, _, end in sorted(spans, key=lambda span: span[3]):
        made[name].end(end_time=end)
    return list(reversed(exporter.get_finished_spans()))  # not in the order they happened


def order_of(spans: list[ReadableSpan]) -> list[str]:
    processor = Order()
    play(processor, spans)
    return processor.seen


def test_a_span_that_starts_when_another_ends_starts_after_it() -> None:
    spans = recorded(
        ("agent", None, 0, 20), ("chat", "agent", 0, 5), ("tool", "agent", 5, 8), ("chat2", "agent", 8, 20)
    )
    assert order_of(spans) == ["+agent", "+chat", "-chat", "+tool", "-tool", "+chat2", "-chat2", "-agent"]


def test_a_span_of_no_time_at_its_parents_end_starts_and_ends_inside_it() -> None:
    spans = recorded(("agent", None, 0, 10), ("step", "agent", 0, 10), ("tool", "step", 10, 10))
    assert order_of(spans) == ["+agent", "+step", "+tool", "-tool", "-step", "-agent"]


def test_children_that_start_with_their_parent_and_end_with_it_stay_inside_it() -> None:
    spans = recorded(("agent", None, 0, 10), ("step", "agent", 0, 10), ("tool", "step", 0, 10))
    assert order_of(spans) == ["+agent", "+step", "+tool", "-tool", "-step", "-agent"]


def _bare(span: ReadableSpan) -> ReadableSpan:
    """``span`` as an application without the guard records it: no guard event, no guard fact."""
    events = [e for e in span.events if not e.name.startswith("repeat_tool_guard.")]
    attributes = {k: v for k, v in (span.attributes or {}).items() if not k.startswith("repeat_tool_guard.")}
    return replace_events(span, events, attributes)


def figures(db: Path) -> tuple[Any, ...]:
    conn = sqlite3.connect(db)
    try:
        calls = conn.execute("SELECT count(*), sum(run_length > 1), sum(unguarded_reason IS NOT NULL) FROM tool_calls")
        wasted = conn.execute(
            "SELECT sum(input_tokens), sum(output_tokens) FROM model_calls WHERE wasted_tool IS NOT NULL"
        )
        return (*calls.fetchone(), *wasted.fetchone())
    finally:
        conn.close()


def test_a_replay_of_the_demos_spans_recorded_without_the_guard_gives_the_live_figures(
    tmp_path: Path, capsys: Any
) -> None:
    exporters: list[InMemorySpanExporter] = []

    def recording() -> list[InMemorySpanExporter]:
        exporters.append(InMemorySpanExporter())
        return exporters[-1:]

    live = tmp_path / "live.db"
    counts = run_scenario(scenario(8), live, extra_exporters=recording, meter_provider=NoOpMeterProvider())
    spans = [_bare(span) for exporter in exporters for span in exporter.get_finished_spans()]
    path = write_lines(tmp_path / "spans.jsonl", (otlp_json_line(batch) for batch in batches(spans, 50)))

    replayed = tmp_path / "replayed.db"
    Ingest(path, replayed, IngestOptions(replay=True), errors=io.StringIO()).run()
    live_figures = figures(live)
    assert live_figures[:2] == (counts.calls, counts.repeats) and live_figures[3] > 0
    assert figures(replayed) == live_figures

    assert main(["doctor", str(path)]) == 1  # the demo's http_get calls record no arguments, live and here
    said = capsys.readouterr().out
    assert f"{counts.calls - counts.excluded} tool calls recognised" in said
    assert "1 blind spot(s)" in said and "http_get: 2 calls, no_arguments" in said
