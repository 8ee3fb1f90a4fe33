"""AutoGen AgentChat with its built-in tracing, and the OpenAI client instrumented three ways.

AutoGen's ``execute_tool`` spans carry ``gen_ai.tool.name`` and ``gen_ai.tool.call.id`` but never
the arguments. They and the model-client spans are siblings under the run's ``invoke_agent
<name>`` span (no ``gen_ai.agent.id``), and each model span ends before the tool spans it asked
for start: the guard takes the arguments from the model span's requested tool calls, joined by
call id. An ``AssistantAgent`` holds one conversation (its model context), so concurrent runs use
two instances of the same agent, as in the strands suite. AutoGen has no reminder adapter here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from opentelemetry import trace

from .fake_openai import FakeOpenAI
from .msft_cases import (
    CONTENT_OFF,
    CONTENT_SETTING,
    INSTRUMENTATIONS,
    OUTER,
    assert_arguments_not_on_tool_spans,
    assert_blind,
    assert_fully_guarded,
    assert_runs,
    assert_runs_interleaved,
    guarded_board,
    instrumented,
)
from .scenario import (
    FINAL_ANSWER,
    SCRIPT,
    SHORT_SCRIPT,
    Guarded,
    lookup_result,
    make_guarded,
    require,
    run_lengths,
    tool_spans_by_run,
)

require("autogen_agentchat")
require("autogen_ext.models.openai")
from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402

T = TypeVar("T")
MODEL = "gpt-4o-mini-2024-07-18"  # the name AutoGen resolves gpt-4o-mini to (else it warns on every call)
BLIND = {("no_arguments", "lookup"): 6, ("no_arguments", "broken_lookup"): 2}
CLIENT_INSTRUMENTATIONS = (
    "opentelemetry-instrumentation-openai-v2",
    "openinference-instrumentation-openai",
    "TRACELOOP_TRACE_CONTENT",
)


async def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


async def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


CLIENTS: list[OpenAIChatCompletionClient] = []


def make_agent(server: FakeOpenAI, name: str = "weather_agent") -> AssistantAgent:
    client = OpenAIChatCompletionClient(model=MODEL, base_url=server.base_url, api_key="offline")
    CLIENTS.append(client)
    return AssistantAgent(name, model_client=client, tools=[lookup, broken_lookup], max_tool_iterations=len(SCRIPT) + 2)


def run(main: Awaitable[T]) -> T:
    """``asyncio.run``, closing the model clients inside the loop (else httpx closes them after it)."""

    async def closing() -> T:
        try:
            return await main
        finally:
            while CLIENTS:
                await CLIENTS.pop().close()

    return asyncio.run(closing())


def final_text(result: Any) -> str:
    return str(result.messages[-1].content)


@pytest.fixture(params=INSTRUMENTATIONS)
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    with guarded_board(make_guarded()) as guarded, instrumented(request.param, monkeypatch):
        yield guarded


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_one_run(g: Guarded, server: FakeOpenAI) -> None:
    result = run(make_agent(server).run(task="Weather in Paris?"))
    assert final_text(result) == FINAL_ANSWER
    assert len(server.requests) == len(SCRIPT) + 1
    assert_arguments_not_on_tool_spans(g)
    assert_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {"weather_agent"}
    assert_fully_guarded(g)


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    async def both_prompts(agent: AssistantAgent) -> None:
        await agent.run(task="Weather in Paris?")
        await agent.run(task="And again?")

    with FakeOpenAI(SHORT_SCRIPT) as server:
        run(both_prompts(make_agent(server)))
    assert [run_lengths(spans) for spans in tool_spans_by_run(g).values()] == [[1, 2], [1, 2]]


def test_two_concurrent_runs_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_agent(server), make_agent(server)  # the same agent, twice: each instance holds one conversation

    async def both() -> None:
        await asyncio.gather(a.run(task="Paris?"), b.run(task="Paris?"))

    run(both())
    assert_runs(g, 2)
    assert_runs_interleaved(g)
    assert_fully_guarded(g)


def test_two_concurrent_runs_under_one_outer_span(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_agent(server), make_agent(server, "travel_agent")

    async def both() -> None:
        with trace.get_tracer("test").start_as_current_span(OUTER):
            await asyncio.gather(a.run(task="Paris?"), b.run(task="Paris?"))

    run(both())
    assert_runs(g, 2, outer=OUTER)
    assert_runs_interleaved(g, outer=OUTER)
    assert {r.agent_name for r in g.reminders} == {"weather_agent", "travel_agent"}
    assert_fully_guarded(g)


def test_two_concurrent_runs_of_one_agent_name_under_one_outer_span(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_agent(server), make_agent(server)

    async def both() -> None:
        with trace.get_tracer("test").start_as_current_span(OUTER):
            await asyncio.gather(a.run(task="Paris?"), b.run(task="Paris?"))

    run(both())
    assert_runs(g, 2, outer=OUTER)
    assert_runs_interleaved(g, outer=OUTER)


def test_a_second_prompt_under_one_outer_span_gets_a_fresh_chain(g: Guarded) -> None:
    async def both_prompts(agent: AssistantAgent) -> None:
        with trace.get_tracer("test").start_as_current_span(OUTER):
            await agent.run(task="Weather in Paris?")
            await agent.run(task="And again?")

    with FakeOpenAI(SHORT_SCRIPT) as server:
        run(both_prompts(make_agent(server)))
    assert [run_lengths(spans) for spans in tool_spans_by_run(g, outer=OUTER).values()] == [[1, 2], [1, 2]]


@pytest.mark.parametrize("off", list(CONTENT_OFF))
def test_content_capture_off_is_reported(off: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    with guarded_board(make_guarded()) as g, instrumented(off, monkeypatch, content=False):
        result = run(make_agent(server).run(task="Weather in Paris?"))
    assert final_text(result) == FINAL_ANSWER
    assert_blind(g, "autogen-core", BLIND, fixes=(CONTENT_SETTING[off],))


def test_without_model_client_instrumentation_is_reported(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    with guarded_board(make_guarded()) as g, instrumented(None, monkeypatch):
        run(make_agent(server).run(task="Weather in Paris?"))
    assert_blind(g, "autogen-core", BLIND, fixes=CLIENT_INSTRUMENTATIONS)
