"""Shared by the smolagents and LlamaIndex suites (group ``oi``: both traced by OpenInference).

Each suite instruments its framework once per module onto a switchboard (:class:`Instrumented`),
and runs the scenario plainly and with every run under one shared outer span (:data:`OUTER`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from .scenario import (
    Guarded,
    Switchboard,
    assert_no_event_on_non_tool_spans,
    assert_scenario_run,
    make_guarded,
    run_lengths,
    tool_spans_by_run,
    tool_spans_by_trace,
)

OUTER = "outer request"


class Instrumented:
    """The module's provider (behind a switchboard) and its instrumentor, which a test may swap for another config."""

    def __init__(self, instrumentor: Any) -> None:
        self.board = Switchboard()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.board)
        self.instrumentor = instrumentor
        self.instrumentor.instrument(tracer_provider=self.provider)

    def reinstrument(self, config: Any = None) -> None:
        self.instrumentor.uninstrument()
        self.instrumentor.instrument(tracer_provider=self.provider, config=config)

    def around(self, outer: bool) -> Any:
        """``with instrumented.around(True):`` one span around the runs (an HTTP request serving them); else nothing."""
        return self.provider.get_tracer("test").start_as_current_span(OUTER) if outer else contextlib.nullcontext()


def instrumented_fixture(make_instrumentor: Callable[[], Any]) -> Any:
    @pytest.fixture(scope="module")
    def instrumented() -> Iterator[Instrumented]:
        it = Instrumented(make_instrumentor())
        yield it
        it.instrumentor.uninstrument()

    return instrumented


def guarded(instrumented: Instrumented) -> Iterator[Guarded]:
    """The body of each module's ``g`` fixture: a fresh guard behind the module's switchboard."""
    guarded = make_guarded()
    instrumented.board.targets = guarded.processors
    yield guarded
    instrumented.board.targets = []


def kind(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get("openinference.span.kind")


def runs(g: Guarded, outer: bool, skip: Sequence[str] = ()) -> list[list[ReadableSpan]]:
    """The tool spans of each run, in the order they ended, leaving out the tools named in ``skip``.

    Plain runs are one trace each; under the outer span a run is each child of it.
    """
    grouped = tool_spans_by_run(g, outer=OUTER) if outer else tool_spans_by_trace(g)
    if outer:
        assert len(tool_spans_by_trace(g)) == 1  # one trace: only the spans under it keep the runs apart
    return [[s for s in spans if (s.attributes or {}).get("tool.name") not in skip] for spans in grouped.values()]


def assert_runs(g: Guarded, count: int, outer: bool, skip: Sequence[str] = ()) -> list[str]:
    """``count`` runs each followed SCRIPT in a chain of its own, and nothing was unguarded."""
    by_run = runs(g, outer, skip)
    assert len(by_run) == count
    ids = [assert_scenario_run(g, spans) for spans in by_run]
    assert len(set(ids)) == count
    assert_no_event_on_non_tool_spans(g)
    assert g.unguarded() == {}
    return ids


def assert_run_lengths(g: Guarded, outer: bool, expected: list[list[int]], skip: Sequence[str] = ()) -> None:
    assert [run_lengths(spans) for spans in runs(g, outer, skip)] == expected
    assert_no_event_on_non_tool_spans(g)
    assert g.unguarded() == {}


def assert_interleaved_runs(g: Guarded, outer: bool) -> None:
    """The tool spans of the runs really alternated in time (ended in a mixed order)."""
    by_run = runs(g, outer)
    run_of = {s.context.span_id: i for i, spans in enumerate(by_run) for s in spans}  # type: ignore[union-attr]
    order = [run_of[s.context.span_id] for s in g.exporter.get_finished_spans() if s.context.span_id in run_of]  # type: ignore[union-attr]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


OUTERS = pytest.mark.parametrize("outer", [False, True], ids=["plain", "under-one-outer-span"])
