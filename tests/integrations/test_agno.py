"""Agno 3.1 with openinference-instrumentation-agno, its OpenAIChat model pointed at the fake OpenAI server.

The instrumentation marks the run ``<agent>.run`` as an AGENT span; each tool call is a TOOL
span under it with the arguments in ``input.value`` (re-serialized from the parsed call, so the
reordered call arrives reordered), and each model call an ``OpenAIChat.invoke`` LLM span with
the requested ``tool_calls`` (id, name, arguments) in ``llm.output_messages``. The tool span has
no ``tool_call.id``: nothing links it to the request but the run and the order. Agno turns a
tool's exception into a tool result for the model and marks the tool span ERROR.

The instrumentor patches Agno's module functions and reads its provider once, so it is
instrumented once per module onto a switchboard (as the LangChain suites do).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from .fake_openai import FakeOpenAI
from .scenario import (
    EXPECTED_RUNS,
    FINAL_ANSWER,
    SHORT_SCRIPT,
    Guarded,
    Switchboard,
    assert_interleaved,
    assert_no_event_on_non_tool_spans,
    assert_scenario_run,
    assert_separate_runs,
    lookup_result,
    make_guarded,
    require,
    run_lengths,
    tool_spans_by_run,
    tool_spans_by_trace,
)

os.environ["AGNO_TELEMETRY"] = "false"  # no usage upload: nothing may leave 127.0.0.1
os.environ.setdefault("OPENAI_API_KEY", "offline")
require("agno")
from agno.agent import Agent  # noqa: E402
from agno.models.openai import OpenAIChat  # noqa: E402
from openinference.instrumentation import TraceConfig  # noqa: E402
from openinference.instrumentation.agno import AgnoInstrumentor  # noqa: E402

SCOPE = "openinference.instrumentation.agno"
OUTER = "outer request"


def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


class Instrumented:
    """The module's provider (behind a switchboard) and its instrumentor, which a test may swap for another config."""

    def __init__(self) -> None:
        self.board = Switchboard()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.board)
        self.instrumentor = AgnoInstrumentor()
        self.instrumentor.instrument(tracer_provider=self.provider)

    def reinstrument(self, config: TraceConfig | None = None) -> None:
        self.instrumentor.uninstrument()
        self.instrumentor.instrument(tracer_provider=self.provider, config=config)


@pytest.fixture(scope="module")
def instrumented() -> Iterator[Instrumented]:
    it = Instrumented()
    yield it
    it.instrumentor.uninstrument()


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    guarded = make_guarded()
    instrumented.board.targets = guarded.processors
    yield guarded
    instrumented.board.targets = []


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def make_agent(server: FakeOpenAI, name: str = "weather_agent") -> Agent:
    model = OpenAIChat(id="gpt-4o-mini", base_url=server.base_url, api_key="offline")
    return Agent(name=name, model=model, tools=[lookup, broken_lookup], telemetry=False)


async def _both(*runs: Any) -> list[Any]:
    return list(await asyncio.gather(*runs))


def _check_outputs(outputs: list[Any]) -> None:
    assert [o.content for o in outputs] == [FINAL_ANSWER] * len(outputs)


def test_one_run(g: Guarded, server: FakeOpenAI) -> None:
    _check_outputs([make_agent(server).run("Weather in Paris?")])
    assert len(server.requests) == 9  # 8 tool calls, then the answer
    assert_separate_runs(g, 1)
    assert g.unguarded() == {}
    assert [r.agent_name for r in g.reminders] == ["weather_agent"] * 2  # the run span's agent.name
    spans = g.exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]
    (run,) = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "AGENT"]
    assert run.name == "weather_agent.run" and run.parent is None
    tools = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "TOOL"]
    models = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "LLM"]
    assert [s.name for s in tools] == ["lookup"] * 6 + ["broken_lookup"] * 2
    assert {s.name for s in models} == {"OpenAIChat.invoke"} and len(models) == 9
    assert {by_id[s.parent.span_id].name for s in tools + models} == {"weather_agent.run"}  # type: ignore[union-attr]
    # The model spans name the call ids; the tool spans do not carry them.
    key = "llm.output_messages.0.message.tool_calls.0.tool_call.id"
    assert all((m.attributes or {}).get(key) for m in models[:8]) and key not in (models[8].attributes or {})
    assert not any(k.endswith("call.id") or k.endswith("call_id") for s in tools for k in (s.attributes or {}))


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server:
        agent = make_agent(server)
        _check_outputs([agent.run("Weather in Paris?"), agent.run("And again?")])
    assert [run_lengths(spans) for spans in tool_spans_by_trace(g).values()] == [[1, 2], [1, 2]]
    assert_no_event_on_non_tool_spans(g)
    assert g.unguarded() == {}


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded, server: FakeOpenAI) -> None:
    runs = (make_agent(server, "weather_agent").arun("Paris?"), make_agent(server, "travel_agent").arun("Paris?"))
    _check_outputs(asyncio.run(_both(*runs)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)
    assert sorted(r.agent_name for r in g.reminders) == ["travel_agent"] * 2 + ["weather_agent"] * 2


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    agent = make_agent(server)
    _check_outputs(asyncio.run(_both(agent.arun("Paris?"), agent.arun("Paris?"))))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


# -- every run under one shared outer span (an HTTP request serving several runs) ---------------


def _assert_runs_under_outer(g: Guarded, runs: int) -> None:
    by_run = tool_spans_by_run(g, outer=OUTER)
    assert len(by_run) == runs
    assert len(tool_spans_by_trace(g)) == 1  # one trace: only the run spans keep the runs apart
    ids = [assert_scenario_run(g, spans) for spans in by_run.values()]
    assert len(set(ids)) == runs
    assert_no_event_on_non_tool_spans(g)
    assert g.unguarded() == {}


def test_under_one_outer_span_a_second_prompt_gets_a_fresh_chain(g: Guarded, instrumented: Instrumented) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server, instrumented.provider.get_tracer("test").start_as_current_span(OUTER):
        agent = make_agent(server)
        _check_outputs([agent.run("Weather in Paris?"), agent.run("And again?")])
    assert [run_lengths(spans) for spans in tool_spans_by_run(g, outer=OUTER).values()] == [[1, 2], [1, 2]]


def test_under_one_outer_span_two_concurrent_agents_have_their_own_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    async def both() -> list[Any]:
        with instrumented.provider.get_tracer("test").start_as_current_span(OUTER):
            return await _both(
                make_agent(server, "weather_agent").arun("Paris?"), make_agent(server, "travel_agent").arun("Paris?")
            )

    _check_outputs(asyncio.run(both()))
    _assert_runs_under_outer(g, 2)
    assert_interleaved_runs(g)


def test_under_one_outer_span_two_concurrent_runs_of_one_agent_have_separate_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    agent = make_agent(server)

    async def both() -> list[Any]:
        with instrumented.provider.get_tracer("test").start_as_current_span(OUTER):
            return await _both(agent.arun("Paris?"), agent.arun("Paris?"))

    _check_outputs(asyncio.run(both()))
    _assert_runs_under_outer(g, 2)
    assert_interleaved_runs(g)


def assert_interleaved_runs(g: Guarded) -> None:
    """As :func:`scenario.assert_interleaved`, for runs told apart by their run span (one trace)."""
    runs = tool_spans_by_run(g, outer=OUTER)
    run_of = {s.context.span_id: run for run, spans in runs.items() for s in spans}  # type: ignore[union-attr]
    order = [run_of[s.context.span_id] for s in g.exporter.get_finished_spans() if s.context.span_id in run_of]  # type: ignore[union-attr]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


# -- never silently blind ------------------------------------------------------------------------


def test_with_inputs_hidden_the_models_request_stands_in(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    """OPENINFERENCE_HIDE_INPUTS: the tool span's input.value is ``__REDACTED__`` and it has no call id, but
    the model's request (outputs are not hidden) names each call: matched by tool name."""
    instrumented.reinstrument(TraceConfig(hide_inputs=True))
    try:
        _check_outputs([make_agent(server).run("Weather in Paris?")])
    finally:
        instrumented.reinstrument()
    tools = [
        s for s in g.exporter.get_finished_spans() if (s.attributes or {}).get("openinference.span.kind") == "TOOL"
    ]
    assert {(s.attributes or {}).get("input.value") for s in tools} == {"__REDACTED__"}
    assert run_lengths(tools) == EXPECTED_RUNS
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert g.unguarded() == {}


def test_with_inputs_and_outputs_hidden_the_counter_and_doctor_report_the_blind_spot(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    """Inputs and outputs hidden: neither the tool span nor the model's request says the arguments, so every
    call is one the guard recognised but could not compare."""
    from otel_repeat_guard.cli.doctor import diagnose

    instrumented.reinstrument(TraceConfig(hide_inputs=True, hide_outputs=True))
    try:
        _check_outputs([make_agent(server).run("Weather in Paris?")])
    finally:
        instrumented.reinstrument()
    spans = g.exporter.get_finished_spans()
    tools = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "TOOL"]
    assert run_lengths(tools) == [1] * 8 and g.reminders == []
    assert g.unguarded() == {("no_arguments", "lookup"): 6, ("no_arguments", "broken_lookup"): 2}
    report = diagnose(spans)
    assert report.exit_code == 1
    spots = sorted((s.scope, s.tool, s.reason, s.calls) for s in report.blind_spots)
    assert spots == [(SCOPE, "broken_lookup", "no_arguments", 2), (SCOPE, "lookup", "no_arguments", 6)]
    assert all("OPENINFERENCE_HIDE_INPUTS" in s.fix for s in report.blind_spots)


def test_doctor_finds_no_blind_spot_in_a_plain_run(g: Guarded, server: FakeOpenAI) -> None:
    from otel_repeat_guard.cli.doctor import diagnose

    _check_outputs([make_agent(server).run("Weather in Paris?")])
    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])
