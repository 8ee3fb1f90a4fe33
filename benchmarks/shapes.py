"""The span shapes of the span-shape matrix: how each vocabulary's tool spans really sit in a trace.

Every shape is a workload of many agent runs served round-robin (one tool call of each run in
turn, as concurrent agents interleave), about 200 B of JSON arguments per call and about 20% of
each run's calls repeating its previous one. The runs' spans start before the timed loop and end
after it; what is timed is each tool span's lifecycle (with its per-step span, for the shapes
that have one), the same code with and without the guard.

Each run has its own arguments (its own seed), so a guard that merged runs, or that missed the
run of a span, would count other repeats than :func:`expected` says: the matrix checks that count
on every shape before it times anything.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import set_span_in_context

from benchmarks import workloads as w

RUNS = 64
"""Agent runs served round-robin in every shape."""
TOOL = "read_file"
ARGUMENT_BYTES = 200
REPEAT_SHARE = 0.2

Attributes = Mapping[str, Any]


@dataclass(frozen=True)
class Shape:
    """Where a tool span sits and what it says. ``tool_attributes`` are the call's own; the arguments
    go under ``arguments_key`` (wrapped by ``wrap``), the run's agent id under ``agent_id_key`` if set."""

    label: str
    tool_span: str
    tool_attributes: Attributes
    arguments_key: str
    run_span: str | None  # None: bare tool spans, their agent id their only key
    run_attributes: Attributes = field(
        default_factory=dict
    )  # set at the run span's start; "{agent}" in a value is the run's agent id
    step_span: str | None = None  # a per-step child of the run span between it and the tool span
    step_attributes: Attributes = field(default_factory=dict)
    agent_id_key: str | None = None
    at_start: bool = False  # the tool span's attributes at start, else set one by one after it
    wrap: str = "{}"  # how the vocabulary records the arguments text
    result_key: str | None = None  # where the call's result goes (a text of the arguments' size), if recorded


_GENAI_RUN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}
_GENAI_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
_GENAI_RUN_WITH_ID = {**_GENAI_RUN, "gen_ai.agent.id": "{agent}"}
_OI_TOOL = {"openinference.span.kind": "TOOL", "tool.name": TOOL}
_TRACELOOP_TOOL = {"traceloop.span.kind": "tool", "traceloop.entity.name": TOOL}
_TRACELOOP_RUN = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "coder"}

_STEP = ", timed with the step span"
_GENAI = Shape(
    "GenAI, no agent id, under its run, attributes before end",
    f"execute_tool {TOOL}",
    _GENAI_TOOL,
    "gen_ai.tool.call.arguments",
    "invoke_agent coder",
    _GENAI_RUN,
)
_OWN_ID = replace(
    _GENAI,
    label="GenAI, own gen_ai.agent.id, under its run, attributes before end",
    run_attributes=_GENAI_RUN_WITH_ID,
    agent_id_key="gen_ai.agent.id",
)
_OPENINFERENCE = Shape(
    "OpenInference TOOL under its AGENT span",
    TOOL,
    _OI_TOOL,
    "input.value",
    "coder",
    {"openinference.span.kind": "AGENT", "agent.name": "coder"},
)
_OPENLLMETRY = Shape(
    "OpenLLMetry tool under its workflow span",
    f"{TOOL}.tool",
    _TRACELOOP_TOOL,
    "traceloop.entity.input",
    "coder.workflow",
    _TRACELOOP_RUN,
    wrap='{{"args": [], "kwargs": {}}}',
)

TOOL_SHAPES: tuple[Shape, ...] = (
    _GENAI,
    replace(_GENAI, label="GenAI, no agent id, under its run, attributes at start", at_start=True),
    _OWN_ID,
    replace(_OWN_ID, label="GenAI, own gen_ai.agent.id, under its run, attributes at start", at_start=True),
    replace(  # a harness tagging bare tool spans with its agent's id
        _OWN_ID,
        label="GenAI, own gen_ai.agent.id, no run span, attributes before end",
        run_span=None,
        run_attributes={},
    ),
    replace(
        _GENAI,
        label="GenAI, under a per-step span of its run (pydantic-ai's `running tools`)" + _STEP,
        step_span="running tools",
        step_attributes={"tools": (TOOL,)},
    ),
    _OPENINFERENCE,
    replace(
        _OPENINFERENCE,
        label="OpenInference TOOL under a CHAIN step of its AGENT span (LangGraph node)" + _STEP,
        step_span="tools",
        step_attributes={"openinference.span.kind": "CHAIN"},
    ),
    _OPENLLMETRY,
    replace(
        _OPENLLMETRY,
        label="OpenLLMetry tool under a task step of its workflow span" + _STEP,
        step_span="tools.task",
        step_attributes={"traceloop.span.kind": "task", "traceloop.entity.name": "tools"},
    ),
)


WITH_RESULT = replace(
    _GENAI,
    label="GenAI, under its run, attributes before end, its result recorded (gen_ai.tool.call.result)",
    result_key="gen_ai.tool.call.result",
)
"""A tool span that records its result (issue 39): timed under the defaults and under ``progress: results``."""


@dataclass(frozen=True)
class Plan:
    """One segment's spans, in the order they are made: (run index, the tool span's attributes)."""

    shape: Shape
    runs: int
    spans: list[tuple[int, dict[str, Any]]]
    calls: list[list[str]] = field(repr=False)  # each run's arguments texts, in order

    @property
    def expected_repeats(self) -> int:
        return sum(w.expected_repeats(calls) for calls in self.calls)


def agent_id(run: int) -> str:
    """The ``gen_ai.agent.id`` of run ``run``, in the shapes that carry one."""
    return f"agent-{run:03d}"


def plan(shape: Shape, segment: int, runs: int = RUNS) -> Plan:
    """``segment`` tool spans (rounded down to whole rounds) over ``runs`` runs, round-robin."""
    per_run = max(2, segment // runs)
    calls = [w.tool_arguments(ARGUMENT_BYTES, per_run, REPEAT_SHARE, seed=1_000 + run) for run in range(runs)]
    spans: list[tuple[int, dict[str, Any]]] = []
    for i in range(per_run):
        for run in range(runs):
            attributes = {**shape.tool_attributes, shape.arguments_key: shape.wrap.format(calls[run][i])}
            if shape.agent_id_key is not None:
                attributes[shape.agent_id_key] = agent_id(run)
            if shape.result_key is not None:  # the same call, the same result: the repeats stay the plan's
                attributes[shape.result_key] = calls[run][i][::-1]
            spans.append((run, attributes))
    return Plan(shape, runs, spans, calls)


def _run_attributes(shape: Shape, agent: str) -> dict[str, Any]:
    return {
        key: value.format(agent=agent) if isinstance(value, str) else value
        for key, value in shape.run_attributes.items()
    }


def segment(p: w.Pipeline, work: Plan) -> float:
    """Makes ``work``'s spans in ``p``; seconds per tool span (its step span included, if the shape has one)."""
    shape, tracer = work.shape, p.tracer
    runs: list[trace.Span] = []
    contexts: list[Context | None] = []
    for run in range(work.runs):
        if shape.run_span is None:
            contexts.append(None)
            continue
        span = tracer.start_span(shape.run_span, attributes=_run_attributes(shape, agent_id(run)))
        runs.append(span)
        contexts.append(set_span_in_context(span))
    name, step_name, step_attributes = shape.tool_span, shape.step_span, dict(shape.step_attributes)
    start = time.perf_counter()
    for run, attributes in work.spans:
        context = contexts[run]
        step = None
        if step_name is not None:
            step = tracer.start_span(step_name, context=context, attributes=step_attributes)
            context = set_span_in_context(step)
        if shape.at_start:
            span = tracer.start_span(name, context=context, attributes=attributes)
        else:
            span = tracer.start_span(name, context=context)
            for key, value in attributes.items():
                span.set_attribute(key, value)
        span.end()
        if step is not None:
            step.end()
    elapsed = time.perf_counter() - start
    for span in runs:
        span.end()
    return elapsed / len(work.spans)


# -- non-tool spans ----------------------------------------------------------------------------

_CHAT = (
    "chat gpt-5",
    (("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "gpt-5"), ("gen_ai.usage.input_tokens", 1200)),
)
_HTTP = (
    "POST",
    (
        ("http.request.method", "POST"),
        ("url.full", "https://api.example.com/v1/responses"),
        ("http.response.status_code", 200),
    ),
)


def non_tool_segment(
    p: w.Pipeline, count: int, runs: int = RUNS, run_spans: Sequence[trace.Span] | None = None
) -> float:
    """Chat and HTTP spans, alternately, in ``runs`` agent runs served round-robin; seconds per span.
    ``run_spans``: make them in these open runs instead of fresh ones (left open)."""
    tracer = p.tracer
    own = run_spans is None
    spans = [tracer.start_span("invoke_agent coder", attributes=_GENAI_RUN) for _ in range(runs)] if own else []
    spans += run_spans or ()
    contexts = [set_span_in_context(span) for span in spans]
    order = [(contexts[i % len(contexts)], _CHAT if (i // len(contexts)) % 2 else _HTTP) for i in range(count)]
    start = time.perf_counter()
    for context, (name, attributes) in order:
        span = tracer.start_span(name, context=context)
        for key, value in attributes:
            span.set_attribute(key, value)
        span.end()
    elapsed = time.perf_counter() - start
    if own:
        for span in spans:
            span.end()
    return elapsed / count


class LiveSpanFloor(SpanProcessor):
    """The live-span floor: a processor that keeps only the live-span map the guard keeps (every open
    span by span id, inserted at start, bounded by ``max_live_spans`` with the oldest dropped, removed
    at end) and does nothing else. Any guard pays this to find a tool span's run among its ancestors;
    what the guard costs on a non-tool span beyond it is what deciding the span is not a tool call
    costs. Interpreted Python in both builds, so on the compiled build it is a generous floor."""

    def __init__(self, max_live_spans: int = 100_000) -> None:
        self._live: dict[int, Span] = {}
        self._max = max_live_spans

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        live = self._live
        live[span.context.span_id] = span
        if len(live) > self._max:
            del live[next(iter(live))]

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is not None:
            self._live.pop(context.span_id, None)
