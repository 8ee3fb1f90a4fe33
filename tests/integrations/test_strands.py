"""strands-agents with a scripted model, in both of its telemetry schemas.

strands only uses the global tracer provider, and reads OTEL_SEMCONV_STABILITY_OPT_IN once,
into a process-wide Tracer singleton: the fixture sets the global provider once (behind a
switchboard) and resets that singleton to switch schemas. The default schema records the
arguments only in a ``gen_ai.tool.message`` event; ``gen_ai_latest_experimental`` records
``gen_ai.tool.call.arguments``. strands has no reminder adapter here (the issue asks for
pydantic-ai, LangChain and OpenAI Agents): its BeforeModelCallEvent hook is the place for one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
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

require("strands")
import strands.telemetry.tracer as strands_tracer  # noqa: E402
from strands import Agent, tool  # noqa: E402
from strands.models.model import Model  # noqa: E402

BOARD = Switchboard()


class ScriptedModel(Model):
    def __init__(self, script: Any) -> None:
        self.script = script
        self.config: dict[str, Any] = {"model_id": "scripted"}

    def update_config(self, **config: Any) -> None:
        self.config.update(config)

    def get_config(self) -> Any:
        return self.config

    async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        results = 0
        for message in messages:
            for block in message["content"]:
                if message["role"] == "user" and "text" in block and "<system-reminder>" not in block["text"]:
                    results = 0
                elif "toolResult" in block:
                    results += 1
        await asyncio.sleep(0)  # let concurrent runs interleave
        call = next_call(results, self.script)
        yield {"messageStart": {"role": "assistant"}}
        if call is None:
            yield {"contentBlockDelta": {"delta": {"text": FINAL_ANSWER}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        else:
            name, arguments = call
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": f"t{len(messages)}", "name": name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        tokens = usage_after(results)
        usage = {"inputTokens": tokens["input"], "outputTokens": tokens["output"]}
        yield {"metadata": {"usage": {**usage, "totalTokens": sum(usage.values())}, "metrics": {"latencyMs": 1}}}


@tool
def lookup(city: str, units: str) -> str:
    """Look up the weather.

    Args:
        city: the city
        units: metric or imperial
    """
    return lookup_result(city, units)


@tool
def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly.

    Args:
        city: the city
        units: metric or imperial
    """
    raise RuntimeError(f"the weather service for {city} is down")


def make_agent(name: str, script: Any = SCRIPT) -> Agent:
    return Agent(model=ScriptedModel(script), tools=[lookup, broken_lookup], name=name, callback_handler=None)


@pytest.fixture(scope="module", autouse=True)
def global_provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(BOARD)
    trace.set_tracer_provider(provider)


@pytest.fixture(params=["", "gen_ai_latest_experimental"], ids=["default-schema", "latest-experimental-schema"])
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", request.param)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", None)  # strands reads the variable once per Tracer
    guarded = make_guarded()
    BOARD.targets = guarded.processors
    yield guarded
    BOARD.targets = []


def test_one_run(g: Guarded, request: pytest.FixtureRequest) -> None:
    result = make_agent("weather_agent")("Weather in Paris?")  # sync: strands runs it on a worker thread
    assert FINAL_ANSWER in str(result)
    assert_separate_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {"weather_agent"}
    spans = next(iter(tool_spans_by_trace(g).values()))
    recorded_as_attribute = "gen_ai.tool.call.arguments" in (spans[0].attributes or {})
    assert recorded_as_attribute == ("latest" in request.node.callspec.id)


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    agent = make_agent("weather_agent", SHORT_SCRIPT)
    agent("Weather in Paris?")
    agent("And again?")
    assert [run_lengths(spans) for spans in tool_spans_by_trace(g).values()] == [[1, 2], [1, 2]]


async def _both(*runs: Any) -> None:
    await asyncio.gather(*runs)


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded) -> None:
    asyncio.run(
        _both(make_agent("weather_agent").invoke_async("Paris?"), make_agent("travel_agent").invoke_async("Paris?"))
    )
    assert_separate_runs(g, 2)
    assert_interleaved(g)


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded) -> None:
    """Two instances of the same agent (a strands Agent instance holds one conversation at a time)."""
    asyncio.run(
        _both(make_agent("weather_agent").invoke_async("Paris?"), make_agent("weather_agent").invoke_async("Paris?"))
    )
    assert_separate_runs(g, 2)
    assert_interleaved(g)
