"""LlamaIndex 0.14 FunctionAgent and ReActAgent with openinference-instrumentation-llama-index, the
llama-index-llms-openai OpenAI LLM pointed at the fake OpenAI server.

The instrumentation turns LlamaIndex's own dispatcher spans into OpenInference spans and marks
**no span as an agent run**: the run is a CHAIN span ``FunctionAgent.run`` / ``ReActAgent.run``
(the agent's name appears nowhere in its name). Under it each workflow step is a CHAIN span:
``BaseWorkflowAgent.run_agent_step`` holds the model calls (``OpenAI._prepare_chat_with_tools`` and
``OpenAI.astream_chat``, both LLM; the FunctionAgent's requested ``tool_calls`` are in
``llm.output_messages``, the ReActAgent's requests are text), and ``BaseWorkflowAgent.call_tool`` holds
the tool call (``FunctionTool.acall``, TOOL, ``tool.name``, the call in ``input.value`` as
``{"kwargs": {...}}``, no call id). So the model calls and the tool calls are cousins; their nearest
common ancestor is the run span. A tool's exception marks its span ERROR and goes back to the model
as the tool's result.

The instrumentor registers a handler on LlamaIndex's root dispatcher and reads its provider once, so
it is instrumented once per module onto a switchboard (as the LangChain suites do).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .oi_cases import (
    OUTERS,
    Instrumented,
    assert_interleaved_runs,
    assert_run_lengths,
    assert_runs,
    guarded,
    instrumented_fixture,
    kind,
    runs,
)
from .scenario import EXPECTED_RUNS, FINAL_ANSWER, SCRIPT, SHORT_SCRIPT, Guarded, lookup_result, require, run_lengths

os.environ.setdefault("OPENAI_API_KEY", "offline")
require("llama_index.core")
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.core.workflow import Context  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402
from openinference.instrumentation import TraceConfig  # noqa: E402
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402

SCOPE = "openinference.instrumentation.llama_index"
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # pydantic v1 API use inside LlamaIndex
    pytest.mark.filterwarnings("ignore:Skipping serialization of known unserializable key"),  # Context(agent)
]


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded(instrumented)


instrumented = instrumented_fixture(LlamaIndexInstrumentor)


def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


TOOLS = [FunctionTool.from_defaults(lookup), FunctionTool.from_defaults(broken_lookup)]


class ReActFakeOpenAI(FakeOpenAI):
    """The ReActAgent's model answers in text (``Thought / Action / Action Input``, then ``Answer``), and
    the agent sends each tool result back as a user message ``Observation: …``."""

    def tool_results(self, body: dict[str, Any]) -> int:
        results = 0
        for message in body.get("messages") or []:
            text = str(message.get("content"))
            if message.get("role") == "user":
                if text.startswith("Observation:"):
                    results += 1
                elif "<system-reminder>" not in text:
                    results = 0
        return results

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        completion = super().completion(body)
        message = completion["choices"][0]["message"]
        if message.get("tool_calls"):
            (call,) = message.pop("tool_calls")
            function = call["function"]
            message["content"] = (
                "Thought: I need to use a tool to help me answer the question.\n"
                f"Action: {function['name']}\nAction Input: {function['arguments']}"
            )
        else:
            message["content"] = f"Thought: I can answer without using any more tools.\nAnswer: {message['content']}"
        completion["choices"][0]["finish_reason"] = "stop"
        return completion


KINDS = pytest.mark.parametrize("agent_kind", ["function", "react"])
RUN_SPAN = {"function": "FunctionAgent.run", "react": "ReActAgent.run"}


def fake(agent_kind: str, script: Any = SCRIPT) -> FakeOpenAI:
    return ReActFakeOpenAI(script) if agent_kind == "react" else FakeOpenAI(script)


@pytest.fixture
def server(agent_kind: str) -> Iterator[FakeOpenAI]:
    with fake(agent_kind) as it:
        yield it


def make_agent(agent_kind: str, server: FakeOpenAI, name: str = "weather_agent") -> Any:
    llm = OpenAI(model="gpt-4o-mini", api_base=server.base_url, api_key="offline")
    cls = ReActAgent if agent_kind == "react" else FunctionAgent
    return cls(name=name, description="Weather", tools=TOOLS, llm=llm)


def answers(outputs: list[Any]) -> list[str]:
    return [str(o).strip() for o in outputs]


def run_once(agent: Any, prompt: str = "Weather in Paris?") -> Any:
    async def once() -> Any:
        return await agent.run(prompt)  # a workflow handler is made inside the running loop

    return asyncio.run(once())


@KINDS
@OUTERS
def test_one_run(g: Guarded, server: FakeOpenAI, instrumented: Instrumented, agent_kind: str, outer: bool) -> None:
    async def one() -> Any:
        with instrumented.around(outer):
            return await make_agent(agent_kind, server).run("Weather in Paris?")

    assert answers([asyncio.run(one())]) == [FINAL_ANSWER]
    assert len(server.requests) == 9  # 8 tool calls, then the answer
    assert_runs(g, 1, outer)
    spans = g.exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]
    assert not [s for s in spans if kind(s) == "AGENT"]  # no span marks the run as an agent's
    (run,) = [s for s in spans if s.name == RUN_SPAN[agent_kind]]
    assert kind(run) == "CHAIN" and (run.parent is None) == (not outer)
    assert {r.agent_name for r in g.reminders} == {RUN_SPAN[agent_kind]}
    tools = [s for s in spans if kind(s) == "TOOL"]
    models = [s for s in spans if kind(s) == "LLM" and s.name == "OpenAI.astream_chat"]
    assert [s.name for s in tools] == ["FunctionTool.acall"] * 8
    assert [(s.attributes or {}).get("tool.name") for s in tools] == ["lookup"] * 6 + ["broken_lookup"] * 2
    assert len(models) == 9
    parent = {s.context.span_id: by_id[s.parent.span_id] for s in tools + models}  # type: ignore[union-attr]
    assert {parent[s.context.span_id].name for s in tools} == {"BaseWorkflowAgent.call_tool"}  # type: ignore[union-attr]
    assert {parent[s.context.span_id].name for s in models} == {"BaseWorkflowAgent.run_agent_step"}  # type: ignore[union-attr]
    assert {by_id[p.parent.span_id].name for p in parent.values()} == {RUN_SPAN[agent_kind]}  # type: ignore[union-attr]
    assert json.loads(str((tools[0].attributes or {})["input.value"])) == {
        "kwargs": {"city": "Paris", "units": "metric"}
    }
    assert not any(k.endswith("call.id") or k.endswith("call_id") for s in tools for k in (s.attributes or {}))
    requested = [
        (m.attributes or {}).get("llm.output_messages.0.message.tool_calls.0.tool_call.function.name") for m in models
    ]
    expected = [name for name, _ in SCRIPT] + [None] if agent_kind == "function" else [None] * 9
    assert requested == expected
    # the no-progress detector's outcome: the ToolOutput envelope (it echoes raw_input) unwrapped to the text
    from otel_repeat_guard.conventions.outcomes import outcome_of

    outcomes = [outcome_of(s.attributes or {}, s.events, False, None) for s in tools[:6]]
    assert outcomes == [(lookup_result("Paris", "metric"), False)] * 6


@KINDS
@OUTERS
def test_a_second_prompt_gets_a_fresh_chain(
    g: Guarded, instrumented: Instrumented, agent_kind: str, outer: bool
) -> None:
    async def two() -> list[Any]:
        with fake(agent_kind, SHORT_SCRIPT) as server, instrumented.around(outer):
            agent = make_agent(agent_kind, server)
            ctx = Context(agent)  # the conversation carries over from the first prompt to the second
            return [await agent.run("Weather in Paris?", ctx=ctx), await agent.run("And again?", ctx=ctx)]

    assert answers(asyncio.run(two())) == [FINAL_ANSWER] * 2
    assert_run_lengths(g, outer, [[1, 2], [1, 2]])


@KINDS
@OUTERS
def test_a_second_agent_running_concurrently_has_its_own_chain(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented, agent_kind: str, outer: bool
) -> None:
    a, b = make_agent(agent_kind, server, "weather_agent"), make_agent(agent_kind, server, "travel_agent")

    async def both() -> list[Any]:
        with instrumented.around(outer):
            return list(await asyncio.gather(a.run("Paris?"), b.run("Paris?")))

    assert answers(asyncio.run(both())) == [FINAL_ANSWER] * 2
    assert_runs(g, 2, outer)
    assert_interleaved_runs(g, outer)


@KINDS
@OUTERS
def test_two_concurrent_runs_of_one_agent_have_separate_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented, agent_kind: str, outer: bool
) -> None:
    agent = make_agent(agent_kind, server)

    async def both() -> list[Any]:
        with instrumented.around(outer):
            return list(await asyncio.gather(agent.run("Paris?"), agent.run("Paris?")))

    assert answers(asyncio.run(both())) == [FINAL_ANSWER] * 2
    assert_runs(g, 2, outer)
    assert_interleaved_runs(g, outer)


# -- never silently blind ------------------------------------------------------------------------


@pytest.mark.parametrize("agent_kind", ["function"])
def test_with_inputs_hidden_a_function_agents_model_request_stands_in(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented, agent_kind: str
) -> None:
    """OPENINFERENCE_HIDE_INPUTS: the tool span's input.value is ``__REDACTED__`` and it has no call id, but
    the FunctionAgent's model request (outputs are not hidden) names each call, in the same run: matched
    by tool name, the guard sees the whole scenario, and nothing is left unguarded."""
    instrumented.reinstrument(TraceConfig(hide_inputs=True))
    try:
        assert answers([run_once(make_agent(agent_kind, server))]) == [FINAL_ANSWER]
    finally:
        instrumented.reinstrument()
    spans = g.exporter.get_finished_spans()
    tools = [s for s in spans if kind(s) == "TOOL"]
    assert {(s.attributes or {}).get("input.value") for s in tools} == {"__REDACTED__"}
    assert run_lengths(tools) == EXPECTED_RUNS
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert g.unguarded() == {}
    from otel_repeat_guard.cli.doctor import diagnose

    report = diagnose(spans)
    assert report.exit_code == 0
    assert {t.tool: dict(t.arguments_from) for t in report.tools} == {
        "lookup": {"model_request": 6},
        "broken_lookup": {"model_request": 2},
    }


@pytest.mark.parametrize("agent_kind", ["react"])
def test_with_inputs_hidden_the_counter_and_doctor_report_a_react_agents_blind_spot(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented, agent_kind: str
) -> None:
    """OPENINFERENCE_HIDE_INPUTS: the tool span's input.value is ``__REDACTED__``; the ReActAgent's model request
    is text, with no structured call to stand in, so every call is one the guard recognised but could not compare."""
    instrumented.reinstrument(TraceConfig(hide_inputs=True))
    try:
        assert answers([run_once(make_agent(agent_kind, server))]) == [FINAL_ANSWER]
    finally:
        instrumented.reinstrument()
    spans = g.exporter.get_finished_spans()
    tools = [s for s in spans if kind(s) == "TOOL"]
    assert {(s.attributes or {}).get("input.value") for s in tools} == {"__REDACTED__"}
    assert run_lengths(tools) == [1] * 8 and g.reminders == []
    assert g.unguarded() == {("no_arguments", "lookup"): 6, ("no_arguments", "broken_lookup"): 2}
    from otel_repeat_guard.cli.doctor import diagnose

    report = diagnose(spans)
    assert report.exit_code == 1
    spots = sorted((s.scope, s.tool, s.reason, s.calls) for s in report.blind_spots)
    assert spots == [(SCOPE, "broken_lookup", "no_arguments", 2), (SCOPE, "lookup", "no_arguments", 6)]
    assert all("OPENINFERENCE_HIDE_INPUTS" in s.fix for s in report.blind_spots)


@KINDS
def test_doctor_finds_no_blind_spot_in_a_plain_run(g: Guarded, server: FakeOpenAI, agent_kind: str) -> None:
    assert answers([run_once(make_agent(agent_kind, server))]) == [FINAL_ANSWER]
    assert len(runs(g, False)) == 1
    from otel_repeat_guard.cli.doctor import diagnose

    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])
