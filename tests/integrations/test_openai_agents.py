"""OpenAI Agents SDK with openinference-instrumentation-openai-agents, a scripted Model, and the input filter."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fake_openai import FakeOpenAI, responses_messages
from .scenario import (
    FINAL_ANSWER,
    LOOP,
    SCRIPT,
    SHORT_SCRIPT,
    Guarded,
    assert_gentle_reminder_came_one_request_late,
    assert_interleaved,
    assert_reminders_reached_model,
    assert_separate_runs,
    assert_whole_chain,
    break_once,
    expected_whole_chain,
    hand_wired,  # noqa: F401  (a fixture)
    lookup_result,
    make_guarded,
    next_call,
    openai_messages,
    provider_for,
    require,
    run_lengths,
    tool_spans_by_trace,
    with_store,
)

os.environ.setdefault("OPENAI_API_KEY", "offline")
require("agents")
from agents import (  # noqa: E402
    Agent,
    ModelResponse,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    set_trace_processors,
)
from agents.models.interface import Model  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402

from otel_repeat_guard.integrations.openai_agents import repeat_guard_input_filter  # noqa: E402


def _seen(items: Any) -> list[tuple[str, str]]:
    out = []
    for item in items if isinstance(items, list) else [{"role": "user", "content": items}]:
        if item.get("role") == "user":
            out.append(("user", str(item.get("content"))))
        elif item.get("type") == "function_call_output":
            out.append(("tool", str(item.get("output"))))
        else:
            out.append(("assistant", json.dumps(item, default=str)))
    return out


class ScriptedModel(Model):
    def __init__(self, script: Any, requests: list[list[tuple[str, str]]]) -> None:
        self.script, self.requests, self.n = script, requests, 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        seen = _seen(input)
        self.requests.append(seen)
        results = 0
        for role, text in seen:
            if role == "user" and "<system-reminder>" not in text:
                results = 0
            elif role == "tool":
                results += 1
        await asyncio.sleep(0)
        self.n += 1
        call = next_call(results, self.script)
        if call is None:
            text = ResponseOutputText(type="output_text", text=FINAL_ANSWER, annotations=[])
            output: list[Any] = [
                ResponseOutputMessage(
                    type="message", id=f"m{self.n}", role="assistant", status="completed", content=[text]
                )
            ]
        else:
            tool, arguments = call
            raw = json.dumps(arguments, indent=1)  # the instrumentor records this string verbatim
            output = [ResponseFunctionToolCall(type="function_call", call_id=f"c{self.n}", name=tool, arguments=raw)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
        yield


def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


TOOLS = [function_tool(lookup), function_tool(broken_lookup)]  # errors go back to the model as text


def instrumented(guarded: Guarded) -> Iterator[Guarded]:
    set_trace_processors([])  # no upload to the OpenAI backend: this runs offline
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider_for(guarded))
    yield guarded
    instrumentor.uninstrument()
    set_trace_processors([])


@pytest.fixture
def g() -> Iterator[Guarded]:
    yield from instrumented(make_guarded())


@pytest.fixture
def gs(tmp_path: Path) -> Iterator[Guarded]:
    """As ``g``, with the store."""
    with with_store(tmp_path) as guarded:
        yield from instrumented(guarded)


@pytest.fixture
def bare(hand_wired: Guarded) -> Iterator[Guarded]:  # noqa: F811  (the fixture imported above)
    """The guard and the store wired by hand, as docs/runtimes.md showed (scenario.hand_wired)."""
    yield from instrumented(hand_wired)


def run(g: Guarded, agent: Agent[Any], prompt: Any = "Weather in Paris?") -> Any:
    config = RunConfig(call_model_input_filter=repeat_guard_input_filter(guard=g.guard, inbox=g.inbox))
    return Runner.run(agent, prompt, run_config=config)


def test_one_run_and_the_reminders_reach_the_model(g: Guarded) -> None:
    requests: list[list[tuple[str, str]]] = []
    result = asyncio.run(run(g, Agent(name="weather_agent", model=ScriptedModel(SCRIPT, requests), tools=TOOLS)))
    assert result.final_output == FINAL_ANSWER
    assert_separate_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {"weather_agent"}
    assert_reminders_reached_model(requests)


def test_a_request_the_adapter_fails_to_edit_goes_out_unchanged_and_the_next_carries_the_reminder(
    g: Guarded, monkeypatch: pytest.MonkeyPatch
) -> None:
    import otel_repeat_guard.integrations.openai_agents as adapter

    failed = break_once(monkeypatch, adapter)
    requests: list[list[tuple[str, str]]] = []
    result = asyncio.run(run(g, Agent(name="weather_agent", model=ScriptedModel(SCRIPT, requests), tools=TOOLS)))
    assert result.final_output == FINAL_ANSWER
    assert failed == [1]
    assert_gentle_reminder_came_one_request_late(requests)


def test_the_whole_chain_agrees(gs: Guarded) -> None:
    """Issue 21, item 5, with the SDK's own Chat Completions model on the real client against the fake server:
    reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with FakeOpenAI(LOOP) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        result = asyncio.run(run(gs, Agent(name="weather_agent", model=model, tools=TOOLS)))
    assert result.final_output == FINAL_ANSWER
    assert_reminders_reached_model([openai_messages(body) for body in server.requests], loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures(bare: Guarded) -> None:
    """Issue 40, item 1: ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter``, as docs/runtimes.md
    showed (the store kept provisional run keys while facts were opt-in): the store's wasted tokens are the
    metric's, one run key, every model call on the run's timeline."""
    with FakeOpenAI(LOOP) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        result = asyncio.run(run(bare, Agent(name="weather_agent", model=model, tools=TOOLS)))
    assert result.final_output == FINAL_ANSWER
    assert_whole_chain(bare, expected_whole_chain())


def test_the_whole_chain_agrees_over_the_responses_api(gs: Guarded) -> None:
    """Issue 21, item 5, with the SDK's Responses model (its default) on the real client against the fake
    server's ``/responses``: the same figures, the usage reported as input_tokens/output_tokens."""
    with FakeOpenAI(LOOP) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
        model = OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)
        result = asyncio.run(run(gs, Agent(name="weather_agent", model=model, tools=TOOLS)))
    assert result.final_output == FINAL_ANSWER
    assert len(server.requests) == len(LOOP) + 1 and all("input" in body for body in server.requests)
    assert_reminders_reached_model([responses_messages(body) for body in server.requests], loop=True)
    assert [(r.tool_name, r.run_length, r.tier) for r in gs.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
        ("lookup", 8, "detailed"),
    ]
    assert_whole_chain(gs, expected_whole_chain())


def test_the_whole_chain_agrees_for_an_mcp_tool_over_the_responses_api(gs: Guarded) -> None:
    """Issue 21, item 5, with the tool served by an MCP server in a subprocess (tests/integrations/mcp_cases.py
    over stdio, through the SDK's MCPServerStdio): the SDK's tool spans for the MCP tool and its response
    spans are one run, each repeat wasting the usage of the response that asked for it."""
    from agents.mcp import MCPServerStdio, MCPServerStdioParams

    root = Path(__file__).resolve().parents[2]
    params = MCPServerStdioParams(
        command=sys.executable,
        args=["-m", "tests.integrations.mcp_cases"],
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(root)},
    )

    async def over_mcp(server: FakeOpenAI) -> Any:
        async with MCPServerStdio(params, cache_tools_list=True) as weather:
            client = AsyncOpenAI(base_url=server.base_url, api_key="offline")
            model = OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)
            return await run(gs, Agent(name="weather_agent", model=model, mcp_servers=[weather]))

    with FakeOpenAI(LOOP) as server:
        result = asyncio.run(over_mcp(server))
    assert result.final_output == FINAL_ANSWER
    (spans,) = tool_spans_by_trace(gs).values()
    assert [s.name for s in spans] == ["lookup"] * len(LOOP)
    assert_reminders_reached_model([responses_messages(body) for body in server.requests], loop=True)
    assert [(r.tool_name, r.run_length, r.tier) for r in gs.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
        ("lookup", 8, "detailed"),
    ]
    assert_whole_chain(gs, expected_whole_chain())


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    agent = Agent(name="weather_agent", model=ScriptedModel(SHORT_SCRIPT, []), tools=TOOLS)
    first = asyncio.run(run(g, agent))
    asyncio.run(run(g, agent, [*first.to_input_list(), {"role": "user", "content": "And again?"}]))
    assert [run_lengths(spans) for spans in tool_spans_by_trace(g).values()] == [[1, 2], [1, 2]]


async def _both(*runs: Any) -> None:
    await asyncio.gather(*runs)


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded) -> None:
    a = Agent(name="weather_agent", model=ScriptedModel(SCRIPT, []), tools=TOOLS)
    b = Agent(name="travel_agent", model=ScriptedModel(SCRIPT, []), tools=TOOLS)
    asyncio.run(_both(run(g, a), run(g, b)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)
    assert {r.agent_name for r in g.reminders} == {"weather_agent", "travel_agent"}


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded) -> None:
    agent = Agent(name="weather_agent", model=ScriptedModel(SCRIPT, []), tools=TOOLS)
    asyncio.run(_both(run(g, agent), run(g, agent)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


def test_a_stop_reminder_ends_the_run_with_repeat_guard_stop() -> None:
    from otel_repeat_guard import GuardConfig, RepeatGuardStop

    from .scenario import PARIS

    guarded = make_guarded(config=GuardConfig(thresholds=(3,), stop_at=4))
    set_trace_processors([])
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider_for(guarded))
    requests: list[list[tuple[str, str]]] = []
    try:
        agent = Agent(name="weather_agent", model=ScriptedModel((("lookup", PARIS),) * 6, requests), tools=TOOLS)
        with pytest.raises(RepeatGuardStop) as stopped:
            asyncio.run(run(guarded, agent))
    finally:
        instrumentor.uninstrument()
        set_trace_processors([])
    assert (stopped.value.reminder.tier, stopped.value.reminder.run_length) == ("stop", 4)
    assert len(requests) == 4  # no request after the stop
    assert any("identical arguments 3 times" in text for role, text in requests[3] if role == "user")
