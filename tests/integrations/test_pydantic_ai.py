"""pydantic-ai with Agent.instrument_all(), its own FunctionModel, and the ProcessHistory adapter.

pydantic-ai 2.x has no instrumentation format 1 any more: format 2 (``running tool`` spans,
``tool_arguments``) is the oldest it offers; 5 is the default and 6 the newest.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .scenario import (
    FINAL_ANSWER,
    LOOP,
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
    provider_for,
    require,
    run_lengths,
    tool_spans_by_trace,
    usage_after,
    with_store,
)

require("pydantic_ai")
from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402

from otel_repeat_guard.integrations.pydantic_ai import repeat_guard_capability  # noqa: E402


def _is_reminder(part: Any) -> bool:
    return isinstance(part, UserPromptPart) and "<system-reminder>" in str(part.content)


def _seen(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    out = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                out.append(("user", str(part.content)))
            elif isinstance(part, ToolReturnPart | RetryPromptPart):
                out.append(("tool", str(part.content)))
            elif isinstance(part, ToolCallPart | TextPart):
                out.append(("assistant", str(part)))
    return out


def scripted_model(script: Any, requests: list[list[tuple[str, str]]]) -> FunctionModel:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(_seen(messages))
        results = 0
        for message in messages:
            for part in message.parts if isinstance(message, ModelRequest) else ():
                if isinstance(part, UserPromptPart) and not _is_reminder(part):
                    results = 0  # a new user prompt starts the script over
                elif isinstance(part, ToolReturnPart | RetryPromptPart):
                    results += 1
        await asyncio.sleep(0)  # let concurrent runs interleave
        tokens = usage_after(results)
        usage = RequestUsage(input_tokens=tokens["input"], output_tokens=tokens["output"])
        call = next_call(results, script)
        if call is None:
            return ModelResponse(parts=[TextPart(FINAL_ANSWER)], usage=usage)
        tool, arguments = call
        part = ToolCallPart(tool, dict(arguments), tool_call_id=f"call_{len(requests)}")
        return ModelResponse(parts=[part], usage=usage)

    return FunctionModel(respond, model_name="scripted")


def make_agent(g: Guarded, name: str, requests: list[list[tuple[str, str]]], script: Any = None) -> Agent[None, str]:
    from .scenario import SCRIPT

    agent: Agent[None, str] = Agent(
        scripted_model(SCRIPT if script is None else script, requests),
        name=name,
        retries=5,
        capabilities=[repeat_guard_capability(guard=g.guard, inbox=g.inbox)],
    )

    @agent.tool_plain
    def lookup(city: str, units: str) -> str:
        """Look up the weather."""
        return lookup_result(city, units)

    @agent.tool_plain
    def broken_lookup(city: str, units: str) -> str:
        """Look up the weather, badly."""
        raise ModelRetry(f"the weather service for {city} is down")

    return agent


FORMATS = {"params": [2, 5, 6], "ids": ["format2-oldest", "format5-default", "format6-newest"]}


def instrumented(guarded: Guarded, version: int) -> Iterator[Guarded]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # formats 2-4 are deprecated
        Agent.instrument_all(InstrumentationSettings(tracer_provider=provider_for(guarded), version=version))
    yield guarded
    Agent.instrument_all(False)


@pytest.fixture(**FORMATS)
def g(request: pytest.FixtureRequest) -> Iterator[Guarded]:
    yield from instrumented(make_guarded(), request.param)


@pytest.fixture(**FORMATS)
def gs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Guarded]:
    """As ``g``, with the store."""
    with with_store(tmp_path) as guarded:
        yield from instrumented(guarded, request.param)


@pytest.fixture
def bare(hand_wired: Guarded) -> Iterator[Guarded]:  # noqa: F811  (the fixture imported above)
    """The guard and the store wired by hand, as docs/runtimes.md showed (scenario.hand_wired), on the
    instrumentation's default format."""
    yield from instrumented(hand_wired, 5)


def test_one_run_and_the_reminders_reach_the_model(g: Guarded) -> None:
    requests: list[list[tuple[str, str]]] = []
    result = make_agent(g, "weather_agent", requests).run_sync("Weather in Paris?")
    assert result.output == FINAL_ANSWER
    (agent_id,) = assert_separate_runs(g, 1)
    assert {r.agent_name for r in g.reminders} == {"weather_agent"}
    assert agent_id.startswith("weather_agent#")
    assert_reminders_reached_model(requests)
    reminders_in_history = [p for m in result.all_messages() for p in m.parts if _is_reminder(p)]
    assert len(reminders_in_history) == 2  # delivered once each, never duplicated


def test_a_request_the_adapter_fails_to_edit_goes_out_unchanged_and_the_next_carries_the_reminder(
    g: Guarded, monkeypatch: pytest.MonkeyPatch
) -> None:
    import otel_repeat_guard.integrations.pydantic_ai as adapter

    failed = break_once(monkeypatch, adapter)
    requests: list[list[tuple[str, str]]] = []
    assert make_agent(g, "weather_agent", requests).run_sync("Weather in Paris?").output == FINAL_ANSWER
    assert failed == [1]
    assert_gentle_reminder_came_one_request_late(requests)


def test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures(bare: Guarded) -> None:
    """Issue 40, item 1: ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter``, as docs/runtimes.md
    shows: the store's wasted tokens are the metric's, one run key, every model call on the run's timeline."""
    assert make_agent(bare, "weather_agent", [], LOOP).run_sync("Weather in Paris?").output == FINAL_ANSWER
    assert_whole_chain(bare, expected_whole_chain())


def test_the_whole_chain_agrees(gs: Guarded) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    requests: list[list[tuple[str, str]]] = []
    assert make_agent(gs, "weather_agent", requests, LOOP).run_sync("Weather in Paris?").output == FINAL_ANSWER
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    agent = make_agent(g, "weather_agent", [], SHORT_SCRIPT)
    first = agent.run_sync("Weather in Paris?")
    agent.run_sync("And again?", message_history=first.all_messages())
    runs = [run_lengths(spans) for spans in tool_spans_by_trace(g).values()]
    assert runs == [[1, 2], [1, 2]]


async def _both(*runs: Any) -> None:
    await asyncio.gather(*runs)


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded) -> None:
    a, b = make_agent(g, "weather_agent", []), make_agent(g, "travel_agent", [])
    asyncio.run(_both(a.run("Weather in Paris?"), b.run("Weather in Paris?")))
    assert_separate_runs(g, 2)
    assert_interleaved(g)
    assert {r.agent_name for r in g.reminders} == {"weather_agent", "travel_agent"}


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded) -> None:
    requests: list[list[tuple[str, str]]] = []
    agent = make_agent(g, "weather_agent", requests)
    asyncio.run(_both(agent.run("Weather in Paris?"), agent.run("Weather in Paris?")))
    assert_separate_runs(g, 2)
    assert_interleaved(g)
    assert sum("<system-reminder>" in t for r in requests for _, t in r[-1:]) == 4  # each run got its own two


def test_a_stop_reminder_ends_the_run_with_repeat_guard_stop() -> None:
    """stop_at: the run ends before the model is asked again, with an exception the application catches."""
    from otel_repeat_guard import GuardConfig, RepeatGuardStop

    from .scenario import PARIS

    guarded = make_guarded(config=GuardConfig(thresholds=(3,), stop_at=4))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider_for(guarded)))
    requests: list[list[tuple[str, str]]] = []
    try:
        agent = make_agent(guarded, "weather_agent", requests, (("lookup", PARIS),) * 6)
        with pytest.raises(RepeatGuardStop) as stopped:
            agent.run_sync("Weather in Paris?")
    finally:
        Agent.instrument_all(False)
    reminder = stopped.value.reminder
    assert (reminder.tier, reminder.run_length, reminder.tool_name) == ("stop", 4, "lookup")
    assert str(stopped.value) == reminder.text and "Stop calling tools now" in reminder.text
    assert len(requests) == 4  # the 4th call's request carried the gentle reminder; no 5th request went out
    assert any("identical arguments 3 times" in text for role, text in requests[3] if role == "user")
