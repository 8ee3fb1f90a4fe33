"""The plain case of ``Guard.tool_call`` (nothing pending, the span straight under its run's span) against its
general body.

Two guards see the same spans, one with the plain case switched off (``fast_path=False``); every span's events and
every reminder must be the same. The spans mix what the plain case takes with everything it leaves to the body:
explicit agents, call ids, long and non-JSON arguments, missing arguments, failures, OpenLLMetry marks and
wrappers, OpenInference call wrappers and redactions,
pydantic-ai's span name, tools under a nested span, and model calls that ask for tools.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor, build_mode
from otel_repeat_guard.core.canonical import RAW_KEY_MIN_CHARS

from .conftest import reminder_outcomes

LONG = '{"q": "' + "x" * RAW_KEY_MIN_CHARS + '"}'
ARGUMENTS = ['{"q": 1}', '{ "q" : 1 }', '{"q": 2}', LONG, "not json", None]
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "coder"}
VOCABULARIES = {
    "openinference": (("openinference.span.kind", "TOOL"), "tool.name", "input.value", "ARGS"),
    "openinference_kwargs": (("openinference.span.kind", "TOOL"), "tool.name", "input.value", '{"kwargs": ARGS}'),
    "openllmetry": (("traceloop.span.kind", "tool"), "traceloop.entity.name", "traceloop.entity.input", "ARGS"),
    "openllmetry_langchain": (
        ("traceloop.span.kind", "tool"),
        "traceloop.entity.name",
        "traceloop.entity.input",
        '{"input_str": "x", "inputs": ARGS, "metadata": {}}',
    ),
    "openllmetry_mcp": (
        ("traceloop.span.kind", "tool"),
        "traceloop.entity.name",
        "traceloop.entity.input",
        '{"tool_name": "TOOL", "arguments": ARGS}',
    ),
    "openllmetry_escaped": (
        ("traceloop.span.kind", "tool"),
        "tool.name",
        "gen_ai.tool.call.arguments",
        '["\\u0041", ARGS]',
    ),
    "openllmetry_escaped_wrapper": (  # the wrapper's key spelt with an escape: unwrapped all the same
        ("traceloop.span.kind", "tool"),
        "traceloop.entity.name",
        "traceloop.entity.input",
        '{"\\u0069nput_str": "x", "inputs": ARGS, "metadata": {}}',
    ),
    "openllmetry_nan_wrapper": (  # a wrapper only the reader's parser reads (NaN is no JSON for msgspec)
        ("traceloop.span.kind", "tool"),
        "traceloop.entity.name",
        "traceloop.entity.input",
        '{"input_str": NaN, "inputs": ARGS, "metadata": {}}',
    ),
    "openllmetry_nested_key": (  # a wrapper's key below the top: no wrapper
        ("traceloop.span.kind", "tool"),
        "traceloop.entity.name",
        "traceloop.entity.input",
        '{"args": [], "kwargs": {"input_str": ARGS, "tool_name": "\\u00e9"}}',
    ),
    "openinference_redacted": (("openinference.span.kind", "TOOL"), "tool.name", "input.value", "__REDACTED__"),
    "openllmetry_own_agent": (("traceloop.span.kind", "tool"), "gen_ai.tool.name", "traceloop.entity.input", "ARGS"),
}
VARIANTS = (
    "plain",
    "agent_id",
    "own_agent",
    "call_id",
    *VOCABULARIES,
    "traceloop",
    "pydantic_name",
    "failed",
    "nested",
    "untracked",
)

tool_step = st.tuples(
    st.just("tool"),
    st.sampled_from(["grep", "read", "shell"]),
    st.sampled_from(ARGUMENTS),
    st.sampled_from(VARIANTS),
)
step = st.one_of(
    tool_step,
    tool_step.map(lambda call: [call] * 3),  # a run of the same call: its reminders quote the arguments as read
    st.tuples(st.just("model"), st.booleans(), st.just(None), st.just("")),
    st.tuples(st.just("new_run"), st.just(""), st.just(None), st.just("")),
)
steps_of = st.lists(step, max_size=20).map(
    lambda drawn: [call for item in drawn for call in (item if isinstance(item, list) else [item])]
)


class _Counting(IdGenerator):
    """Ids 1, 2, 3...: both guards' spans get the same ids, so their events and reminders compare equal."""

    def __init__(self) -> None:
        self._next = 0

    def generate_span_id(self) -> int:
        self._next += 1
        return self._next

    def generate_trace_id(self) -> int:
        self._next += 1
        return self._next


def _run(
    steps: list[tuple[str, Any, Any, str]], plain: bool, facts: bool = False, progress: str = "none"
) -> tuple[list[Any], list[Reminder]]:
    reminders: list[Reminder] = []
    config = GuardConfig(thresholds=(2, 3), exclude=("shell",), progress=progress)
    guard = RepeatGuardSpanProcessor(config, reminders.append, fast_path=plain, record_facts=facts)
    provider = TracerProvider(id_generator=_Counting())
    exporter = InMemorySpanExporter()
    provider.add_span_processor(guard)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("plain-path")
    agent = tracer.start_span("invoke_agent coder", attributes=AGENT)
    for i, (kind, first, arguments, variant) in enumerate(steps):
        context = set_span_in_context(agent)
        if kind == "new_run":
            agent.end()
            agent = tracer.start_span("invoke_agent coder", attributes=AGENT)
        elif kind == "model":
            attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10}
            if first:
                attributes["gen_ai.response.finish_reasons"] = ("tool_calls",)
            tracer.start_span("chat", context=context, attributes=attributes).end()
        else:
            if variant == "nested":
                context = set_span_in_context(tracer.start_span("step", context=context))
            name = "running tool" if variant == "pydantic_name" else f"execute_tool {first}"
            span = tracer.start_span(name, context=context)
            tool = "shell" if variant == "untracked" else first
            if variant in VOCABULARIES:  # another vocabulary's tool span, read by its convention
                mark, tool_key, arguments_key, wrap = VOCABULARIES[variant]
                span.set_attributes({mark[0]: mark[1], tool_key: tool})
                if arguments is not None:
                    span.set_attribute(arguments_key, wrap.replace("ARGS", arguments).replace("TOOL", tool))
                if variant == "openllmetry_own_agent":
                    span.set_attribute("gen_ai.agent.id", "coder")
            else:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", tool)
            if arguments is not None and variant not in VOCABULARIES:
                span.set_attribute("gen_ai.tool.call.arguments", arguments)
            if variant == "agent_id":
                span.set_attribute("gen_ai.agent.id", "explicit")
            elif variant == "own_agent":  # the agent whose run encloses it
                span.set_attribute("gen_ai.agent.id", "coder")
            elif variant == "call_id":
                span.set_attribute("gen_ai.tool.call.id", f"call_{i}")
            elif variant == "traceloop":
                span.set_attribute("traceloop.span.kind", "tool")
            elif variant == "failed":
                span.set_status(Status(StatusCode.ERROR, "denied"))
            if progress == "results" and i % 4:  # every fourth call records no result; the others' move now and then
                span.set_attribute("gen_ai.tool.call.result", "done" if i % 3 else f"{i}% done")
            span.end()
    agent.end()
    seen = [
        (s.name, [(e.name, dict(e.attributes or {})) for e in s.events], dict(s.attributes or {}))
        for s in exporter.get_finished_spans()
    ]
    return seen, reminders


@settings(max_examples=150, deadline=None)
@given(steps_of)
def test_the_plain_case_decides_exactly_as_the_general_body_does(steps: list[tuple[str, Any, Any, str]]) -> None:
    assert _run(steps, plain=True) == _run(steps, plain=False)


@settings(max_examples=100, deadline=None)
@given(steps_of)
def test_under_progress_results_the_plain_case_decides_exactly_as_the_general_body_does(
    steps: list[tuple[str, Any, Any, str]],
) -> None:
    assert _run(steps, plain=True, facts=True, progress="results") == _run(
        steps, plain=False, facts=True, progress="results"
    )


@settings(max_examples=100, deadline=None)
@given(steps_of)
def test_the_plain_case_records_the_same_facts_as_the_general_body(steps: list[tuple[str, Any, Any, str]]) -> None:
    assert _run(steps, plain=True, facts=True) == _run(steps, plain=False, facts=True)


def test_a_plain_run_of_repeats_is_reminded() -> None:
    steps = [("tool", "grep", '{"q": 1}', "plain")] * 3
    seen, reminders = _run(steps, plain=True)
    assert [r.run_length for r in reminders] == [2, 3]
    assert [len(events) for name, events, _ in seen if name.startswith("execute_tool")] == [0, 2, 2]


def _outcomes_and_general_calls(
    plain: bool, count_general: bool = False
) -> tuple[dict[tuple[str, str, str], int], int]:
    """Two runs of one agent interleaved, each reminded at 2 and then breaking or keeping its loop: the
    reminder outcomes the guard counts, and (``count_general``, interpreted build only: a compiled class's
    methods cannot be wrapped) how many tool calls went through the general body of ``Guard.tool_call``."""
    reader = InMemoryMetricReader()
    guard = RepeatGuardSpanProcessor(
        GuardConfig(thresholds=(2,)), fast_path=plain, meter_provider=MeterProvider(metric_readers=[reader])
    )
    general = 0
    if count_general:
        inner = guard._guard._count  # how the general body counts a call; the plain case counts it itself

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal general
            general += 1
            return inner(*args, **kwargs)

        guard._guard._count = counted  # type: ignore[method-assign]
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("settle")
    runs = [tracer.start_span("invoke_agent coder", attributes=AGENT) for _ in range(2)]
    calls = {0: ['{"q": 1}'] * 2 + ['{"q": 2}'], 1: ['{"q": 1}'] * 3}  # run 0 breaks its loop, run 1 keeps it
    for i in range(3):
        for run, arguments in calls.items():
            span = tracer.start_span("execute_tool grep", context=set_span_in_context(runs[run]))
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"})
            span.set_attribute("gen_ai.tool.call.arguments", arguments[i])
            span.end()
    for run in runs:
        run.end()
    return reminder_outcomes(reader), general


def test_the_call_after_a_reminder_settles_it_in_the_plain_case_as_the_general_body_does() -> None:
    outcomes, _ = _outcomes_and_general_calls(plain=True)
    assert outcomes == {("broken", "repeat", "gentle"): 1, ("ignored", "repeat", "gentle"): 1}
    assert outcomes == _outcomes_and_general_calls(plain=False)[0]


@pytest.mark.skipif(build_mode() == "compiled", reason="a compiled class's methods cannot be wrapped from Python")
def test_only_the_calls_after_a_reminder_take_the_general_body_and_fast_path_off_sends_every_call() -> None:
    assert _outcomes_and_general_calls(plain=True, count_general=True)[1] == 2  # it settles the two reminders
    assert _outcomes_and_general_calls(plain=False, count_general=True)[1] == 6  # the control: every call
