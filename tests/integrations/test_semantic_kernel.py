"""Semantic Kernel's ChatCompletionAgent with its built-in tracing, and the OpenAI client instrumented three ways.

Semantic Kernel always makes an ``execute_tool <Plugin>-<function>`` span (``gen_ai.tool.name``,
``gen_ai.tool.call.id``) under an ``AutoFunctionInvocationLoop`` span, and records the
arguments (``gen_ai.tool.call.arguments``) only in sensitive mode. Its switches
(``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS`` and ``..._SENSITIVE``) are read
once, at import, into three module-level settings objects; the ``mode`` fixture sets those.

- ``default``: nothing set. No agent span, no model span of its own: the run is the
  ``AutoFunctionInvocationLoop`` span, which encloses the instrumented client's model spans
  (siblings of the tool spans), and the arguments come from those, joined by call id.
- ``diagnostics``: adds ``invoke_agent <name>`` (``gen_ai.agent.id`` = the agent object's id, the
  same for every run) above the loop, and a ``chat <model>`` span without content around each
  client span. The arguments still come from the client's span, a nephew of the tool span.
- ``sensitive``: the tool spans carry their arguments; the client instrumentation is not needed.

Tool names are qualified by the plugin, so the scripted model asks for ``Weather-lookup``.
Semantic Kernel has no reminder adapter here.
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
from .scenario import FINAL_ANSWER, SCRIPT, SHORT_SCRIPT, Guarded, is_tool_span, lookup_result, make_guarded, require
from .scenario import run_lengths as lengths
from .scenario import tool_spans_by_run as by_run

require("semantic_kernel")
import openai  # noqa: E402
from semantic_kernel.agents import ChatCompletionAgent  # noqa: E402
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior  # noqa: E402
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion  # noqa: E402
from semantic_kernel.functions import kernel_function  # noqa: E402
from semantic_kernel.utils.telemetry.agent_diagnostics import decorators as agent_diagnostics  # noqa: E402
from semantic_kernel.utils.telemetry.model_diagnostics import decorators as model_diagnostics  # noqa: E402
from semantic_kernel.utils.telemetry.model_diagnostics import function_tracer  # noqa: E402

T = TypeVar("T")
PLUGIN = "Weather"
LOOKUP = f"{PLUGIN}-lookup"
TOOL_SCOPE = "semantic_kernel.functions.kernel_function"
SENSITIVE = "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"
MODES = ("default", "diagnostics", "sensitive")
BLIND = {("no_arguments", LOOKUP): 6, ("no_arguments", f"{PLUGIN}-broken_lookup"): 2}


class Weather:
    @kernel_function(description="Look up the weather.")
    def lookup(self, city: str, units: str) -> str:
        return lookup_result(city, units)

    @kernel_function(description="Look up the weather, badly.")
    def broken_lookup(self, city: str, units: str) -> str:
        raise RuntimeError(f"the weather service for {city} is down")


class PluginFakeOpenAI(FakeOpenAI):
    """The scenario, with Semantic Kernel's qualified tool names."""

    def script_for(self, body: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        call = super().script_for(body)
        return None if call is None else (f"{PLUGIN}-{call[0]}", call[1])


CLIENTS: list[openai.AsyncOpenAI] = []


def make_agent(server: FakeOpenAI, name: str = "weather_agent") -> ChatCompletionAgent:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="offline")
    CLIENTS.append(client)
    return ChatCompletionAgent(
        service=OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client),
        name=name,
        plugins=[Weather()],
        function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=len(SCRIPT) + 2),
    )


def run(main: Awaitable[T]) -> T:
    """``asyncio.run``, closing the openai clients inside the loop."""

    async def closing() -> T:
        try:
            return await main
        finally:
            while CLIENTS:
                await CLIENTS.pop().close()

    return asyncio.run(closing())


def set_mode(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (model_diagnostics, agent_diagnostics, function_tracer):
        settings = module.MODEL_DIAGNOSTICS_SETTINGS
        monkeypatch.setattr(settings, "enable_otel_diagnostics", mode != "default")
        monkeypatch.setattr(settings, "enable_otel_diagnostics_sensitive", mode == "sensitive")


@pytest.fixture(params=[(m, i) for m in MODES for i in INSTRUMENTATIONS], ids=lambda p: f"{p[0]}-{p[1]}")
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    mode, instrumentation = request.param
    set_mode(mode, monkeypatch)
    with guarded_board(make_guarded()) as guarded, instrumented(instrumentation, monkeypatch):
        guarded.mode = mode  # type: ignore[attr-defined]
        yield guarded


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with PluginFakeOpenAI() as fake:
        yield fake


def assert_arguments_source(g: Guarded) -> None:
    if g.mode == "sensitive":  # type: ignore[attr-defined]
        tools = [s for s in g.exporter.get_finished_spans() if is_tool_span(s)]
        assert all("gen_ai.tool.call.arguments" in (s.attributes or {}) for s in tools)
    else:
        assert_arguments_not_on_tool_spans(g)


def invoke_agent_spans(g: Guarded) -> list[Any]:
    return [
        s
        for s in g.exporter.get_finished_spans()
        if (s.attributes or {}).get("gen_ai.operation.name") == "invoke_agent"
    ]


def test_one_run(g: Guarded, server: FakeOpenAI) -> None:
    response = run(make_agent(server).get_response(messages="Weather in Paris?"))
    assert str(response.message.content) == FINAL_ANSWER
    assert len(server.requests) == len(SCRIPT) + 1
    assert_arguments_source(g)
    assert_runs(g, 1, LOOKUP)
    if g.mode != "default":  # type: ignore[attr-defined]
        assert {r.agent_name for r in g.reminders} == {"weather_agent"}
    assert_fully_guarded(g)


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    async def both_prompts(agent: ChatCompletionAgent) -> None:
        first = await agent.get_response(messages="Weather in Paris?")
        await agent.get_response(messages="And again?", thread=first.thread)

    with PluginFakeOpenAI(SHORT_SCRIPT) as server:
        run(both_prompts(make_agent(server)))
    assert [lengths(spans) for spans in by_run(g).values()] == [[1, 2], [1, 2]]


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    agent = make_agent(server)

    async def both() -> None:
        await asyncio.gather(agent.get_response(messages="Paris?"), agent.get_response(messages="Paris?"))

    run(both())
    assert_runs(g, 2, LOOKUP)
    assert_runs_interleaved(g)
    if g.mode != "default":  # type: ignore[attr-defined]
        assert [(s.attributes or {})["gen_ai.agent.id"] for s in invoke_agent_spans(g)] == [agent.id, agent.id]
    assert_fully_guarded(g)


def test_two_concurrent_runs_of_one_agent_under_one_outer_span(g: Guarded, server: FakeOpenAI) -> None:
    agent = make_agent(server)

    async def both() -> None:
        with trace.get_tracer("test").start_as_current_span(OUTER):
            await asyncio.gather(agent.get_response(messages="Paris?"), agent.get_response(messages="Paris?"))

    run(both())
    assert_runs(g, 2, LOOKUP, outer=OUTER)
    assert_runs_interleaved(g, outer=OUTER)
    assert_fully_guarded(g)


def test_a_second_prompt_under_one_outer_span_gets_a_fresh_chain(g: Guarded) -> None:
    async def both_prompts(agent: ChatCompletionAgent) -> None:
        with trace.get_tracer("test").start_as_current_span(OUTER):
            first = await agent.get_response(messages="Weather in Paris?")
            await agent.get_response(messages="And again?", thread=first.thread)

    with PluginFakeOpenAI(SHORT_SCRIPT) as server:
        run(both_prompts(make_agent(server)))
    assert [lengths(spans) for spans in by_run(g, outer=OUTER).values()] == [[1, 2], [1, 2]]


@pytest.mark.parametrize("mode", ["default", "diagnostics"])
@pytest.mark.parametrize("off", list(CONTENT_OFF))
def test_content_capture_off_is_reported(
    mode: str, off: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_mode(mode, monkeypatch)
    with guarded_board(make_guarded()) as g, instrumented(off, monkeypatch, content=False):
        response = run(make_agent(server).get_response(messages="Weather in Paris?"))
    assert str(response.message.content) == FINAL_ANSWER
    assert_blind(g, TOOL_SCOPE, BLIND, fixes=(CONTENT_SETTING[off], SENSITIVE))


def test_default_mode_without_model_client_instrumentation_is_reported(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_mode("default", monkeypatch)
    with guarded_board(make_guarded()) as g, instrumented(None, monkeypatch):
        run(make_agent(server).get_response(messages="Weather in Paris?"))
    assert_blind(g, TOOL_SCOPE, BLIND, fixes=(f"{SENSITIVE}=true",))


def test_sensitive_mode_needs_no_model_client_instrumentation(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_mode("sensitive", monkeypatch)
    agent = make_agent(server)

    async def both() -> None:
        await asyncio.gather(agent.get_response(messages="Paris?"), agent.get_response(messages="Paris?"))

    with guarded_board(make_guarded()) as g, instrumented(None, monkeypatch):
        run(both())
    assert_runs(g, 2, LOOKUP)
    assert_runs_interleaved(g)
    assert_fully_guarded(g)
