"""google-adk with a scripted LLM and content capture on (its own virtualenv: ADK pins opentelemetry <= 1.44).

ADK records no tool arguments unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is
set (``SPAN_ONLY`` puts them in ``gen_ai.tool.call.arguments``); its legacy schema
(``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``) records ``gcp.vertex.agent.tool_call_args``.
ADK only uses the global tracer provider, so it is set once, behind a switchboard.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from .scenario import (
    FINAL_ANSWER,
    SCRIPT,
    SHORT_SCRIPT,
    Guarded,
    Switchboard,
    assert_interleaved,
    assert_separate_runs,
    lookup_result,
    make_guarded,
    next_call,
    require,
    run_lengths,
    tool_spans_by_trace,
    usage_after,
)

require("google.adk")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models import BaseLlm, LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

BOARD = Switchboard()


class ScriptedLlm(BaseLlm):
    script: Any = SCRIPT

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        results = 0
        for content in llm_request.contents:
            for part in content.parts or ():
                if content.role == "user" and part.text and "<system-reminder>" not in part.text:
                    results = 0
                elif part.function_response:
                    results += 1
        await asyncio.sleep(0)  # let concurrent runs interleave
        tokens = usage_after(results)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=tokens["input"],
            candidates_token_count=tokens["output"],
            total_token_count=tokens["input"] + tokens["output"],
        )
        call = next_call(results, self.script)
        if call is None:
            answer = types.Content(role="model", parts=[types.Part(text=FINAL_ANSWER)])
            yield LlmResponse(content=answer, usage_metadata=usage, finish_reason=types.FinishReason.STOP)
            return
        name, arguments = call
        part = types.Part(function_call=types.FunctionCall(name=name, args=dict(arguments), id=f"adk-{results}"))
        content = types.Content(role="model", parts=[part])
        yield LlmResponse(content=content, usage_metadata=usage, finish_reason=types.FinishReason.STOP)  # as Gemini


def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


def _error_to_model(tool: Any, args: Any, tool_context: Any, error: Exception) -> dict[str, str]:
    return {"error": str(error)}  # ADK otherwise ends the run on a tool exception


def make_agent(name: str, script: Any = SCRIPT) -> LlmAgent:
    return LlmAgent(
        name=name,
        model=ScriptedLlm(model="scripted", script=script),
        instruction="Use lookup.",
        tools=[lookup, broken_lookup],
        on_tool_error_callback=_error_to_model,
    )


async def _run(agent: LlmAgent, prompts: tuple[str, ...] = ("Weather in Paris?",)) -> None:
    runner = InMemoryRunner(agent=agent, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for prompt in prompts:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass


@pytest.fixture(scope="module", autouse=True)
def global_provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(BOARD)
    trace.set_tracer_provider(provider)


@pytest.fixture(params=["2", "1"], ids=["schema2-span-only", "legacy-schema1"])
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN", request.param)
    guarded = make_guarded()
    BOARD.targets = guarded.processors
    yield guarded
    BOARD.targets = []


def test_one_run(g: Guarded) -> None:
    asyncio.run(_run(make_agent("weather_agent")))
    assert_separate_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {"weather_agent"}


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    asyncio.run(_run(make_agent("weather_agent", SHORT_SCRIPT), ("Weather in Paris?", "And again?")))
    runs = [run_lengths(spans) for spans in tool_spans_by_trace(g).values()]
    assert runs in ([[1, 2], [1, 2]], [[1, 2, 1, 2]])  # each prompt is its own invocation (and trace, in schema 2)


async def _both(*runs: Any) -> None:
    await asyncio.gather(*runs)


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded) -> None:
    asyncio.run(_both(_run(make_agent("weather_agent")), _run(make_agent("travel_agent"))))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded) -> None:
    agent = make_agent("weather_agent")
    asyncio.run(_both(_run(agent), _run(agent)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)
