"""Agno 3.1: reminders reach the model through the OpenAI client adapter (Agno has no pre-request hook).

Agno 3.1 offers no hook that runs before each model request: ``pre_hooks`` run once per run, on
the input, before the model loop; ``post_hooks`` after it; ``tool_hooks`` wrap each tool call and
are handed a copy of the run's message list (``FunctionCall._safe_hook_call``: "so accidental
list mutations (.clear(), .append()) won't corrupt the run"). So there is no native adapter, and
the reminder goes in at the model client: ``OpenAIChat(client=..., async_client=...)`` accepts
the caller's ``openai`` clients, guarded with ``guard_client``. Instrumented as in
:mod:`test_agno` (OpenInference's Agno instrumentor: ``<agent>.run`` is the run span, current
while the client sends the request).
"""

from __future__ import annotations

import asyncio
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

os.environ["AGNO_TELEMETRY"] = "false"  # no usage upload: nothing may leave 127.0.0.1
os.environ.setdefault("OPENAI_API_KEY", "offline")
require("agno")
import openai  # noqa: E402
from agno.agent import Agent  # noqa: E402
from agno.models.openai import OpenAIChat  # noqa: E402
from openinference.instrumentation.agno import AgnoInstrumentor  # noqa: E402

from otel_repeat_guard.integrations.openai_client import guard_client  # noqa: E402


def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


@pytest.fixture(scope="module")
def board() -> Iterator[Switchboard]:
    switchboard = Switchboard()
    provider = TracerProvider()
    provider.add_span_processor(switchboard)
    instrumentor = AgnoInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield switchboard
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


def make_agent(g: Guarded, server: FakeOpenAI, *, guarded: bool = True) -> Agent:
    client = openai.OpenAI(base_url=server.base_url, api_key="offline")
    async_client = openai.AsyncOpenAI(base_url=server.base_url, api_key="offline")
    if guarded:
        guard_client(client, guard=g.guard, inbox=g.inbox)
        guard_client(async_client, guard=g.guard, inbox=g.inbox)
    model = OpenAIChat(id="gpt-4o-mini", client=client, async_client=async_client)
    return Agent(name="weather_agent", model=model, tools=[lookup], telemetry=False)


def conversation(server: FakeOpenAI, city: str) -> list[list[tuple[str, str]]]:
    """The (role, text) requests of the run prompted about ``city``."""
    (requests,) = [c for c in server.conversations() if f"Weather in {city}?" in str(c[0]["messages"])]
    return [openai_messages(body) for body in requests]


def assert_overlapped(server: FakeOpenAI) -> None:
    """The two runs' requests overlapped in time: each run's first request came before the other's last."""
    order = ["Lyon" if "Weather in Lyon?" in str(body["messages"]) else "Paris" for body in server.requests]
    for one, other in (("Paris", "Lyon"), ("Lyon", "Paris")):
        assert order.index(one) < len(order) - 1 - order[::-1].index(other), order


def test_the_whole_chain_agrees(board: Switchboard, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with FakeOpenAI(LOOP) as server, with_store(tmp_path) as gs, wired(board, gs):
        assert make_agent(gs, server).run("Weather in Paris?").content == FINAL_ANSWER
    assert_reminders_reached_model(conversation(server, "Paris"), loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_one_run_gets_the_gentle_reminder_in_its_fourth_request(g: Guarded, server: FakeOpenAI) -> None:
    assert make_agent(g, server).run("Weather in Paris?").content == FINAL_ANSWER
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    assert [(r.agent_name, r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("weather_agent", "lookup", 3, "gentle")
    ]
    assert g.inbox.pending() == []


def test_a_concurrent_run_of_the_same_agent_gets_nothing(g: Guarded, server: FakeOpenAI) -> None:
    """One Agent object, two ``arun`` at once: Paris (REPEAT3) and Lyon (ONE_CALL)."""
    agent = make_agent(g, server)

    async def both() -> list[Any]:
        return list(await asyncio.gather(agent.arun("Weather in Paris?"), agent.arun("Weather in Lyon?")))

    assert [out.content for out in asyncio.run(both())] == [FINAL_ANSWER] * 2
    assert len(server.conversations()) == 2
    assert_overlapped(server)
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    lyon = conversation(server, "Lyon")
    assert len(lyon) == 2
    assert_nothing_delivered(lyon)
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]


def test_without_the_client_adapter_nothing_reaches_the_model(g: Guarded, server: FakeOpenAI) -> None:
    """The same run with unguarded clients: the reminder waits in the inbox, the model never sees it."""
    make_agent(g, server, guarded=False).run("Weather in Paris?")
    requests = conversation(server, "Paris")
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert len(g.inbox.pending()) == 1
