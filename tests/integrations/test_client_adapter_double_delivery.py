"""A native adapter and a client adapter at once: each reminder reaches the model once.

pydantic-ai (``Agent.instrument_all()``) with its OpenAI chat model on a real ``AsyncOpenAI``
client pointed at :class:`FakeOpenAI`. The native adapter (the ``ProcessHistory`` capability)
runs before the request is built, the client adapter (``guard_client``) when it is sent; both
drain the same inbox, so whichever runs first delivers and the other finds nothing. Each alone
delivers too, so "once" is not "never". A second run of the same agent object, at the same time
(prompted about Lyon, one call), receives nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    ONE_CALL,
    REPEAT3,
    Guarded,
    assert_gentle_reminder_delivered_once,
    assert_nothing_delivered,
    lookup_result,
    make_guarded,
    openai_messages,
    provider_for,
    require,
)

require("pydantic_ai")
require("openai")
import openai  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from otel_repeat_guard.integrations.openai_client import guard_client  # noqa: E402
from otel_repeat_guard.integrations.pydantic_ai import repeat_guard_capability  # noqa: E402

PARIS_PROMPT = "Weather in Paris?"
LYON_PROMPT = "Weather in Lyon?"


@pytest.fixture
def g() -> Iterator[Guarded]:
    guarded = make_guarded()
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider_for(guarded)))
    yield guarded
    Agent.instrument_all(False)


def run_both(g: Guarded, server: FakeOpenAI, native: bool, client_adapter: bool) -> list[Any]:
    async def main() -> list[Any]:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="offline", max_retries=0)
        if client_adapter:
            guard_client(client, guard=g.guard, inbox=g.inbox)
        agent: Agent[None, str] = Agent(
            OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)),
            name="weather_agent",
            capabilities=[repeat_guard_capability(guard=g.guard, inbox=g.inbox)] if native else [],
        )

        @agent.tool_plain
        def lookup(city: str, units: str) -> str:
            """Look up the weather."""
            return lookup_result(city, units)

        try:
            return list(await asyncio.gather(agent.run(PARIS_PROMPT), agent.run(LYON_PROMPT)))
        finally:
            await client.close()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("native", "client_adapter"), [(True, True), (True, False), (False, True)], ids=["both", "native", "client"]
)
def test_a_reminder_reaches_the_model_once(g: Guarded, native: bool, client_adapter: bool) -> None:
    with FakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:
        results = run_both(g, server, native, client_adapter)
    assert [r.output for r in results] == [FINAL_ANSWER, FINAL_ANSWER]
    by_prompt = {}
    for conversation in server.conversations():
        requests = [openai_messages(body) for body in conversation]
        by_prompt[next(text for role, text in requests[0] if role == "user")] = requests
    assert_gentle_reminder_delivered_once(by_prompt[PARIS_PROMPT])
    assert len(by_prompt[LYON_PROMPT]) == 2
    assert_nothing_delivered(by_prompt[LYON_PROMPT])
    assert [(r.agent_name, r.run_length) for r in g.reminders] == [("weather_agent", 3)]
    assert g.inbox.pending() == []
