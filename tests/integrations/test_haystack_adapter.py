"""Haystack 3.4's ``Agent`` with the ``before_llm`` hook adapter, end to end against the fake OpenAI server.

Instrumented as in :mod:`test_haystack` (OpenInference's Haystack instrumentor, and in the second
parametrization the OpenAI client's too). Haystack runs tools without spans: the guard counts each
call from the model's request, when the hook asks for the run's reminders before the next request,
so the reminder for the 3rd call is in the 4th request.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    LOOP,
    ONE_CALL,
    REPEAT3,
    Guarded,
    Switchboard,
    assert_gentle_reminder_delivered_once,
    assert_nothing_delivered,
    assert_reminders_reached_model,
    assert_whole_chain,
    expected_whole_chain,
    lookup_result,
    make_guarded,
    openai_messages,
    require,
    wired,
    with_store,
)

os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # no usage upload: nothing may leave 127.0.0.1
os.environ.setdefault("OPENAI_API_KEY", "offline")
require("haystack")
from haystack.components.agents import Agent  # noqa: E402
from haystack.components.agents.state import State  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.tools import tool  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from openinference.instrumentation.haystack import HaystackInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

from otel_repeat_guard import Reminder  # noqa: E402
from otel_repeat_guard.installed import default_inbox, set_installed_guard  # noqa: E402
from otel_repeat_guard.integrations import _common  # noqa: E402
from otel_repeat_guard.integrations.haystack import RepeatGuardHook  # noqa: E402

PARIS_PROMPT = [ChatMessage.from_user("Weather in Paris?")]
LYON_PROMPT = [ChatMessage.from_user("Weather in Lyon?")]


@tool
def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


@pytest.fixture(scope="module", params=["haystack", "haystack+openai-client"])
def board(request: pytest.FixtureRequest) -> Iterator[Switchboard]:
    switchboard = Switchboard()
    provider = TracerProvider()
    provider.add_span_processor(switchboard)
    instrumentors: list[Any] = [HaystackInstrumentor()] + ([OpenAIInstrumentor()] if "openai" in request.param else [])
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    yield switchboard
    for instrumentor in reversed(instrumentors):
        instrumentor.uninstrument()


@pytest.fixture
def g(board: Switchboard) -> Iterator[Guarded]:
    guarded = make_guarded()
    board.targets = guarded.processors
    yield guarded
    board.targets = []


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as fake:
        yield fake


def make_agent(g: Guarded, server: FakeOpenAI) -> Agent:
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini", api_base_url=server.base_url, api_key=Secret.from_token("offline")
    )
    return Agent(
        chat_generator=generator,
        tools=[lookup],
        hooks={"before_llm": [RepeatGuardHook(guard=g.guard, inbox=g.inbox)]},
    )


def conversation(server: FakeOpenAI, city: str) -> list[list[tuple[str, str]]]:
    """The (role, text) requests of the run prompted about ``city``."""
    (requests,) = [c for c in server.conversations() if f"Weather in {city}?" in str(c[0]["messages"])]
    return [openai_messages(body) for body in requests]


def _reminders_in(result: dict[str, Any]) -> list[str]:
    return [m.text or "" for m in result["messages"] if m.is_from("user") and "<system-reminder>" in (m.text or "")]


def assert_overlapped(server: FakeOpenAI) -> None:
    """The two runs' requests overlapped in time: each run's first request came before the other's last."""
    order = ["Lyon" if "Weather in Lyon?" in str(body["messages"]) else "Paris" for body in server.requests]
    for one, other in (("Paris", "Lyon"), ("Lyon", "Paris")):
        assert order.index(one) < len(order) - 1 - order[::-1].index(other), order


def test_the_whole_chain_agrees(board: Switchboard, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with FakeOpenAI(LOOP) as server, with_store(tmp_path) as gs, wired(board, gs):
        assert make_agent(gs, server).run(messages=PARIS_PROMPT)["last_message"].text == FINAL_ANSWER
    assert_reminders_reached_model(conversation(server, "Paris"), loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_one_run_gets_the_gentle_reminder_in_its_fourth_request(g: Guarded, server: FakeOpenAI) -> None:
    result = make_agent(g, server).run(messages=PARIS_PROMPT)
    assert result["last_message"].text == FINAL_ANSWER
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert len(_reminders_in(result)) == 1  # it stays in the run's conversation, once
    assert g.inbox.pending() == []


def test_a_concurrent_run_of_the_same_agent_gets_nothing(g: Guarded, server: FakeOpenAI) -> None:
    """One Agent object, two ``run_async`` at once: Paris (REPEAT3) and Lyon (ONE_CALL)."""
    agent = make_agent(g, server)

    async def both() -> list[Any]:
        return list(await asyncio.gather(agent.run_async(messages=PARIS_PROMPT), agent.run_async(messages=LYON_PROMPT)))

    paris, lyon = asyncio.run(both())
    assert (paris["last_message"].text, lyon["last_message"].text) == (FINAL_ANSWER, FINAL_ANSWER)
    assert len(server.conversations()) == 2
    assert_overlapped(server)
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    lyon_requests = conversation(server, "Lyon")
    assert len(lyon_requests) == 2
    assert_nothing_delivered(lyon_requests)
    assert (len(_reminders_in(paris)), _reminders_in(lyon)) == (1, [])
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]


def test_without_the_hook_nothing_reaches_the_model(g: Guarded, server: FakeOpenAI) -> None:
    """No adapter: the guard still counts the 3rd call when the 4th model call starts, but its reminder waits in
    the inbox; the model never sees it."""
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini", api_base_url=server.base_url, api_key=Secret.from_token("offline")
    )
    Agent(chat_generator=generator, tools=[lookup]).run(messages=PARIS_PROMPT)
    requests = conversation(server, "Paris")
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert len(g.inbox.pending()) == 1


def test_the_hook_serializes_with_the_agent(g: Guarded, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serialized, the hook keeps no guard or inbox; deserialized (its module allowed), it takes the process-wide ones."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "otel_repeat_guard")
    generator = OpenAIChatGenerator(model="gpt-4o-mini", api_key=Secret.from_env_var("OPENAI_API_KEY"))
    agent = Agent(chat_generator=generator, hooks={"before_llm": [RepeatGuardHook(guard=g.guard)]})
    data = agent.to_dict()
    assert data["init_parameters"]["hooks"] == {
        "before_llm": [{"type": "otel_repeat_guard.integrations.haystack.RepeatGuardHook", "init_parameters": {}}]
    }
    previous = set_installed_guard(g.guard)
    try:
        (hook,) = Agent.from_dict(data).hooks["before_llm"]
    finally:
        set_installed_guard(previous)
    assert isinstance(hook, RepeatGuardHook)
    assert (hook._guard, hook._inbox) == (g.guard, default_inbox())


def test_the_hook_never_raises_into_the_agent(
    g: Guarded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside any run the hook leaves the state alone; a state that cannot take the reminder is logged."""
    hook = RepeatGuardHook(guard=g.guard, inbox=g.inbox)
    state = State(schema={}, data={"messages": [ChatMessage.from_user("hi")]})
    hook.run(state)
    assert [m.text for m in state.data["messages"]] == ["hi"]

    class Broken:
        def set(self, key: str, value: Any) -> None:
            raise RuntimeError("boom")

    due = Reminder("run-1", "a", "lookup", 3, 3, "gentle", "t", "{}", "0" * 32, "0" * 16)
    monkeypatch.setattr(_common, "take_reminders", lambda guard, inbox, context, framework: [due])
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        hook.run(Broken())
        asyncio.run(hook.run_async(Broken()))
    assert caplog.text.count("could not add reminders") == 2
    assert g.inbox.drain("run-1") == [due, due], "each failed request gave its reminder back"
