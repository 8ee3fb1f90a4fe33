"""Runtimes that tool spans alone hide: arguments from the model's request, tools without spans,
runs without agent spans, one agent object's concurrent runs, and calls the guard cannot compare.

Spans here copy the shapes the real runtimes emit (see tests/integrations/ for the frameworks).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import Span

from otel_repeat_guard.conventions import RequestedCall
from otel_repeat_guard.conventions.requests import (
    gen_ai_choice_events,
    gen_ai_output_messages,
    openinference_output_messages,
    traceloop_completions,
)

from .conftest import Harness, make_harness

PARIS = {"city": "Paris", "units": "metric"}
SCRIPT = [("lookup", PARIS)] * 5 + [("lookup", {"units": "metric", "city": "Paris"}), ("other", {"q": 1})]
EXPECTED = [1, 2, 3, 4, 5, 6, 1]


def _output_messages(calls: list[tuple[str, str, dict[str, Any]]]) -> str:
    parts = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}])


def _model_call(h: Harness, calls: list[tuple[str, str, dict[str, Any]]], vocabulary: str = "genai") -> None:
    """A chat span that records the tool calls the model asked for when it ends."""
    start = (
        {"gen_ai.operation.name": "chat"}
        if vocabulary == "genai"
        else {"openinference.span.kind": "LLM"}
        if vocabulary == "openinference"
        else {"llm.request.type": "chat"}
    )
    with h.tracer.start_as_current_span("chat gpt-4o", attributes=start) as span:
        if vocabulary == "genai":
            span.set_attribute("gen_ai.output.messages", _output_messages(calls))
        for j, (call_id, name, arguments) in enumerate(calls):
            if vocabulary == "openinference":
                prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
                span.set_attribute(prefix + "id", call_id)
                span.set_attribute(prefix + "function.name", name)
                span.set_attribute(prefix + "function.arguments", json.dumps(arguments))
            elif vocabulary == "traceloop":
                prefix = f"gen_ai.completion.0.tool_calls.{j}."
                span.set_attribute(prefix + "id", call_id)
                span.set_attribute(prefix + "name", name)
                span.set_attribute(prefix + "arguments", json.dumps(arguments))


def _bare_tool(h: Harness, name: str, call_id: str | None) -> None:
    """A tool span with the tool's name and the call id, but no arguments (AutoGen, Semantic Kernel, MCP)."""
    with h.tracer.start_as_current_span(f"execute_tool {name}") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", name)
        if call_id is not None:
            span.set_attribute("gen_ai.tool.call.id", call_id)


@contextmanager
def _span(h: Harness, name: str, **attributes: Any) -> Iterator[Span]:
    with h.tracer.start_as_current_span(name, attributes=attributes or None) as span:
        yield span


def _events(h: Harness, name: str = "repeat_tool_guard.repeat") -> list[tuple[str, dict[str, Any]]]:
    return [
        (s.name, dict(e.attributes or {})) for s in h.exporter.get_finished_spans() for e in s.events if e.name == name
    ]


def _metered() -> tuple[Harness, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return make_harness(meter_provider=MeterProvider(metric_readers=[reader])), reader


def _unguarded(reader: InMemoryMetricReader) -> dict[tuple[str, str], int]:
    data = reader.get_metrics_data()
    return {
        (str(p.attributes["reason"]), str(p.attributes["gen_ai.tool.name"])): int(p.value)
        for r in (data.resource_metrics if data else ())
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "repeat_tool_guard.unguarded_calls"
        for p in m.data.data_points
    }


# -- 1. arguments from the model's request ---------------------------------------------------


@pytest.mark.parametrize("vocabulary", ["genai", "openinference", "traceloop"])
def test_a_tool_span_without_arguments_takes_them_from_the_request_with_its_call_id(vocabulary: str) -> None:
    """AutoGen's shape: the model span is a sibling of the tool spans, under the run span, and ends first."""
    h, reader = _metered()
    with _span(h, "invoke_agent assistant", **{"gen_ai.operation.name": "invoke_agent"}):
        for i, (tool, arguments) in enumerate(SCRIPT):
            _model_call(h, [(f"call_{i}", tool, arguments)], vocabulary)
            _bare_tool(h, tool, f"call_{i}")
    assert h.run_lengths() == EXPECTED
    assert [(r.tool_name, r.run_length, r.tier) for r in h.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert h.reminders[1].arguments_preview == '{"city":"Paris","units":"metric"}'
    assert _unguarded(reader) == {}


def test_without_the_model_span_or_its_content_the_call_is_counted_unguarded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h, reader = _metered()
    with caplog.at_level(logging.WARNING, "otel_repeat_guard"), _span(h, "invoke_agent a"):
        for i in range(4):
            with _span(h, "chat gpt-4o", **{"gen_ai.operation.name": "chat"}):
                pass  # content capture off: no output messages
            _bare_tool(h, "lookup", f"call_{i}")
    assert h.run_lengths() == [1, 1, 1, 1]  # unknown arguments are never identical
    assert _unguarded(reader) == {("no_arguments", "lookup"): 4}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per instrumentation scope and reason
    assert "'tests'" in warnings[0] and "no_arguments" in warnings[0] and "gen_ai.tool.call.arguments" in warnings[0]


def test_a_call_id_requested_in_another_run_is_not_joined() -> None:
    h = make_harness()
    with _span(h, "invoke_agent a"):
        _model_call(h, [("call_1", "lookup", PARIS)])
    with _span(h, "invoke_agent b"):
        for _ in range(3):
            _bare_tool(h, "lookup", "call_1")
    assert h.run_lengths() == [1, 1, 1]


# -- 2. calls with no tool span ------------------------------------------------------------------


def test_requested_calls_without_tool_spans_count_before_the_next_model_call() -> None:
    """CrewAI under OpenLLMetry, Haystack: tools run inside the agent span, only the model says what ran."""
    h = make_harness()
    with _span(h, "crew_agent", **{"traceloop.span.kind": "agent"}) as run:
        for i, (tool, arguments) in enumerate(SCRIPT):
            _model_call(h, [(f"call_{i}", tool, arguments)], "traceloop")
            if i == 3:  # the third call was counted as the fourth model call started: before the model was asked
                assert [r.run_length for r in h.reminders] == [3]
        _model_call(h, [])  # the final answer
    repeats = _events(h)
    assert [e["repeat_tool_guard.run_length"] for _, e in repeats] == [2, 3, 4, 5, 6]
    assert [e["gen_ai.tool.call.id"] for _, e in repeats] == ["call_1", "call_2", "call_3", "call_4", "call_5"]
    assert {span for span, _ in repeats} == {"chat gpt-4o"}  # on the next model span, live when counted
    assert [(r.run_length, r.tier, r.agent_id) for r in h.reminders] == [
        (3, "gentle", f"crew_agent#{run.get_span_context().span_id:016x}"),
        (5, "detailed", f"crew_agent#{run.get_span_context().span_id:016x}"),
    ]
    assert h.reminders[0].span_id == f"{_finished(h, 'chat gpt-4o')[2].context.span_id:016x}"  # the requesting span


def _finished(h: Harness, name: str) -> list[Any]:
    return [s for s in h.exporter.get_finished_spans() if s.name == name]


def test_requested_calls_still_pending_when_the_run_ends_are_counted_on_the_run_span() -> None:
    h = make_harness()
    with _span(h, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}):
        for i in range(3):
            _model_call(h, [(f"call_{i}", "lookup", PARIS)])
    assert [(span, e["repeat_tool_guard.run_length"]) for span, e in _events(h)] == [
        ("chat gpt-4o", 2),
        ("invoke_agent a", 3),
    ]
    assert [r.run_length for r in h.reminders] == [3]


def test_a_runtime_with_tool_spans_is_counted_from_them_only() -> None:
    """Requests answered by tool spans (with or without call ids) are never counted again."""
    h = make_harness()
    with _span(h, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}):
        for i in range(4):
            _model_call(h, [(f"call_{i}", "lookup", PARIS)])
            h.call("lookup", PARIS)  # a tool span without a call id
    assert h.run_lengths() == [1, 2, 3, 4]
    assert [span for span, _ in _events(h)] == ["execute_tool lookup"] * 3


def test_a_late_tool_span_for_a_counted_request_is_not_counted_twice() -> None:
    h = make_harness()
    with _span(h, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}):
        _model_call(h, [("call_0", "lookup", PARIS)])
        _model_call(h, [("call_1", "lookup", PARIS)])  # call_0 counted here: no tool span came
        _bare_tool(h, "lookup", "call_0")  # ...then its tool span ends after all
        _model_call(h, [])
    assert h.guard.run_length("x") == 0
    assert [e["repeat_tool_guard.run_length"] for _, e in _events(h)] == [2]


# -- 3. one chain per run ----------------------------------------------------------------------


def test_concurrent_runs_of_one_agent_object_have_their_own_chains() -> None:
    """Semantic Kernel: gen_ai.agent.id is the agent object's id, the same for every run."""
    h = make_harness()
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "agent-object-1"}
    tracer = h.tracer
    a = tracer.start_span("invoke_agent helper", attributes=attributes)
    b = tracer.start_span("invoke_agent helper", attributes=attributes)
    for _ in range(3):
        for run in (a, b):
            with trace.use_span(run, end_on_exit=False):
                h.call("lookup", PARIS)
    assert h.run_lengths() == [1, 1, 2, 2, 3, 3]
    keys = [r.agent_id for r in h.reminders]
    assert keys == [f"agent-object-1#{s.get_span_context().span_id:016x}" for s in (a, b)]
    h.guard.reset("agent-object-1")  # the agent id still resets all its open runs
    with trace.use_span(a, end_on_exit=False):
        h.call("lookup", PARIS)
    assert h.run_lengths()[-1] == 1
    a.end()
    b.end()


def test_an_explicit_agent_id_under_its_agents_run_is_counted_in_that_run() -> None:
    h = make_harness()
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "coder"}
    with _span(h, "invoke_agent a", **agent) as run:
        for _ in range(3):
            h.call("lookup", PARIS, agent_id="coder")
        assert h.guard.current_agent_id() == f"coder#{run.get_span_context().span_id:016x}"
    assert [r.agent_id for r in h.reminders] == ["coder"]  # addressed as the harness tagged the calls
    assert h.guard.run_length("coder") == 3  # the id's questions reach the run, which outlives its span


def test_concurrent_runs_of_one_agent_id_never_share_a_chain() -> None:
    """``gen_ai.agent.id`` names an agent, not a run: two open runs of it, their calls tagged with it."""
    h = make_harness()
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "coder"}
    a = h.tracer.start_span("invoke_agent a", attributes=agent)
    b = h.tracer.start_span("invoke_agent a", attributes=agent)
    for _ in range(2):
        for run in (a, b):
            with trace.use_span(run, end_on_exit=False):
                h.call("lookup", PARIS, agent_id="coder")
    assert h.run_lengths() == [1, 1, 2, 2]
    h.guard.reset("coder")  # the id resets every open run of the agent
    with trace.use_span(b, end_on_exit=False):
        h.call("lookup", PARIS, agent_id="coder")
    assert h.run_lengths()[-1] == 1
    a.end()
    b.end()


def test_a_nested_invocation_of_an_agent_is_no_new_prompt_for_it() -> None:
    """``gen_ai.invocation.is_nested``: invoked from inside another invocation, so the agent's chain goes on."""
    h = make_harness()
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "coder"}
    for _ in range(2):
        h.call("lookup", PARIS, agent_id="coder")
    with _span(h, "invoke_agent coder", **agent, **{"gen_ai.invocation.is_nested": True}):
        pass
    assert h.guard.run_length("coder") == 2
    with _span(h, "invoke_agent coder", **agent, **{"gen_ai.invocation.is_nested": False}):
        pass
    assert h.guard.run_length("coder") == 0  # the next user prompt


def test_an_explicit_agent_id_with_no_run_of_that_agent_around_it_is_the_whole_key() -> None:
    h = make_harness()
    with _span(h, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "planner"}):
        for _ in range(3):
            h.call("lookup", PARIS, agent_id="coder")
    assert [r.agent_id for r in h.reminders] == ["coder"]


# -- 4. runs apart without agent spans -------------------------------------------------------------


@pytest.mark.parametrize("model_nested", [False, True], ids=["model-sibling", "model-under-a-step"])
def test_two_runs_under_one_outer_span_get_two_chains(model_nested: bool) -> None:
    """LlamaIndex, an MCP client under a host span: no span is marked as an agent run."""
    h = make_harness()
    tracer = h.tracer
    from opentelemetry import trace

    with _span(h, "POST /chat"):
        runs = [tracer.start_span("workflow run") for _ in range(2)]
        for i in range(5):
            for n, run in enumerate(runs):
                with trace.use_span(run, end_on_exit=False):
                    if model_nested:
                        with _span(h, "agent step"):
                            _model_call(h, [(f"c{n}{i}", "lookup", PARIS)])
                    else:
                        _model_call(h, [(f"c{n}{i}", "lookup", PARIS)])
                    h.call("lookup", PARIS)
        for run in runs:
            run.end()
    assert h.run_lengths() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [(r.run_length, r.agent_name) for r in h.reminders] == [(3, "workflow run")] * 2 + [(5, "workflow run")] * 2
    assert len({r.agent_id for r in h.reminders}) == 2


def test_without_model_calls_the_local_root_still_stands_for_the_run() -> None:
    h = make_harness()
    with _span(h, "root"), _span(h, "step"):
        for _ in range(3):
            h.call("lookup", PARIS)
    assert h.run_lengths() == [1, 2, 3]
    assert h.reminders[0].agent_name == "root"


# -- 5. never silently blind ----------------------------------------------------------------------


def test_a_tool_span_with_no_parent_is_counted_unguarded(caplog: pytest.LogCaptureFixture) -> None:
    h, reader = _metered()
    with caplog.at_level(logging.WARNING, "otel_repeat_guard"):
        for _ in range(3):
            h.call("lookup", PARIS)
    assert h.run_lengths() == [1, 1, 1]
    assert _unguarded(reader) == {("no_agent", "lookup"): 3}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "no_agent" in warning and "wrap your agent loop in a span" in warning


def test_excluded_tools_are_never_reported_unguarded() -> None:
    from otel_repeat_guard import GuardConfig

    reader = InMemoryMetricReader()
    h = make_harness(GuardConfig(exclude=("todo_*",)), meter_provider=MeterProvider(metric_readers=[reader]))
    h.call("todo_write", {"x": 1})
    assert _unguarded(reader) == {}


# -- the readers ---------------------------------------------------------------------------------


def test_request_readers_for_each_vocabulary() -> None:
    expected = [RequestedCall("c1", "lookup", '{"city": "Paris"}'), RequestedCall("c2", "grep", '{"q": "x"}')]
    assert (
        openinference_output_messages(
            {
                "llm.output_messages.0.message.tool_calls.1.tool_call.id": "c2",
                "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "grep",
                "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": '{"q": "x"}',
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
                "llm.output_messages.0.message.role": "assistant",
            }
        )
        == expected
    )
    assert (
        traceloop_completions(
            {
                "gen_ai.completion.0.tool_calls.0.id": "c1",
                "gen_ai.completion.0.tool_calls.0.name": "lookup",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
                "gen_ai.completion.0.tool_calls.1.id": "c2",
                "gen_ai.completion.0.tool_calls.1.name": "grep",
                "gen_ai.completion.0.tool_calls.1.arguments": '{"q": "x"}',
            }
        )
        == expected
    )
    messages = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "let me look"},
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"city": "Paris"}},
            ],
        }
    ]
    assert gen_ai_output_messages({"gen_ai.output.messages": json.dumps(messages)}) == [
        RequestedCall("c1", "lookup", {"city": "Paris"})
    ]
    assert gen_ai_output_messages({"gen_ai.output.messages": "not json"}) == []

    class Event:
        name = "gen_ai.choice"
        attributes: ClassVar[dict[str, Any]] = {
            "index": 0,
            "message": json.dumps(
                {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
            ),
        }

    assert gen_ai_choice_events([Event()]) == [RequestedCall("c1", "lookup", "{}")]


def test_an_adapter_gets_the_reminder_of_a_call_without_tool_span_before_the_next_request() -> None:
    """An adapter drains the inbox before the model span starts: ``model_call_due`` counts the run's
    unanswered requests first, so the reminder for the third call goes out with the fourth request."""
    h = make_harness()
    with _span(h, "crew_agent", **{"traceloop.span.kind": "agent"}) as run:
        for i in range(3):
            _model_call(h, [(f"call_{i}", "lookup", PARIS)], "traceloop")
        assert h.reminders == []
        key = h.guard.model_call_due()  # the adapter, just before the fourth request
        assert key == f"crew_agent#{run.get_span_context().span_id:016x}"
        assert [(r.run_length, r.tier) for r in h.reminders] == [(3, "gentle")]
        _model_call(h, [])  # the fourth request: nothing left to count
    assert [(span, e["repeat_tool_guard.run_length"]) for span, e in _events(h)] == [
        ("chat gpt-4o", 2),
        ("crew_agent", 3),
    ]
