"""AutoGen AgentChat and Semantic Kernel: reminders reach the model through the OpenAI client adapter.

Each framework gets a real ``AsyncOpenAI`` client, guarded with ``guard_client``, pointed at
:class:`FakeOpenAI`, and uses it through its public constructor (AutoGen's
``BaseOpenAIChatCompletionClient``, Semantic Kernel's ``OpenAIChatCompletion(async_client=...)``).
Two runs of the same agent definition go at once on that one client: Paris repeats ``lookup``
three times, Lyon calls it once. Paris's 4th request carries the gentle reminder once, after
the tool results; Lyon's requests carry nothing.

AutoGen's tool spans have no arguments: the guard takes them from the model spans of the
OpenInference instrumentation (as in ``test_autogen.py``). An ``AssistantAgent`` holds one
conversation, so the concurrent runs use two instances of the same agent. Semantic Kernel runs
in its sensitive mode, where the tool spans carry the arguments (as in ``test_semantic_kernel.py``);
one ``ChatCompletionAgent`` runs both prompts at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .msft_cases import guarded_board, instrumented
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
    require,
)

require("autogen_agentchat")
require("autogen_ext.models.openai")
require("semantic_kernel")
import openai  # noqa: E402
from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_ext.models.openai import BaseOpenAIChatCompletionClient  # noqa: E402
from semantic_kernel.agents import ChatCompletionAgent  # noqa: E402
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior  # noqa: E402
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion  # noqa: E402
from semantic_kernel.functions import kernel_function  # noqa: E402
from semantic_kernel.utils.telemetry.agent_diagnostics import decorators as agent_diagnostics  # noqa: E402
from semantic_kernel.utils.telemetry.model_diagnostics import decorators as model_diagnostics  # noqa: E402
from semantic_kernel.utils.telemetry.model_diagnostics import function_tracer  # noqa: E402

from otel_repeat_guard.integrations.openai_client import guard_client  # noqa: E402

PARIS_PROMPT = "Weather in Paris?"
LYON_PROMPT = "Weather in Lyon?"
AUTOGEN_MODEL = "gpt-4o-mini-2024-07-18"  # the name AutoGen resolves gpt-4o-mini to (else it warns on every call)
PLUGIN = "Weather"


def by_prompt(server: FakeOpenAI) -> dict[str, list[list[tuple[str, str]]]]:
    """Each conversation's requests as (role, text) pairs, keyed by its user prompt."""
    out = {}
    for conversation in server.conversations():
        requests = [openai_messages(body) for body in conversation]
        out[next(text for role, text in requests[0] if role == "user")] = requests
    return out


def assert_delivered_to_paris_only(g: Guarded, server: FakeOpenAI, tool: str = "lookup") -> None:
    conversations = by_prompt(server)
    paris, lyon = conversations[PARIS_PROMPT], conversations[LYON_PROMPT]
    (reminder,) = g.reminders
    assert (reminder.tool_name, reminder.run_length, reminder.tier) == (tool, 3, "gentle")
    assert_gentle_reminder_delivered_once(
        [[(role, text.replace(f"`{tool}`", "`lookup`")) for role, text in request] for request in paris]
    )
    assert sum(reminder.text in text for _, text in paris[3]) == 1
    assert len(lyon) == 2
    assert_nothing_delivered(lyon)
    assert g.inbox.pending() == []


async def _closing(client: openai.AsyncOpenAI, runs: Sequence[Any]) -> list[Any]:
    try:
        return list(await asyncio.gather(*runs))
    finally:
        await client.close()


# -- AutoGen AgentChat ----------------------------------------------------------------------------


async def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


@pytest.fixture
def autogen_guarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    with guarded_board(make_guarded()) as guarded, instrumented("openinference", monkeypatch):
        yield guarded


def test_autogen_reminders_reach_the_model_through_the_client_adapter(autogen_guarded: Guarded) -> None:
    g = autogen_guarded
    with FakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:

        async def main() -> list[Any]:
            client = guard_client(
                openai.AsyncOpenAI(base_url=server.base_url, api_key="offline"), guard=g.guard, inbox=g.inbox
            )
            model = BaseOpenAIChatCompletionClient(client, create_args={"model": AUTOGEN_MODEL})
            a, b = (
                AssistantAgent("weather_agent", model_client=model, tools=[lookup], max_tool_iterations=5) for _ in "ab"
            )
            return await _closing(client, [a.run(task=PARIS_PROMPT), b.run(task=LYON_PROMPT)])

        results = asyncio.run(main())
    assert [str(r.messages[-1].content) for r in results] == [FINAL_ANSWER, FINAL_ANSWER]
    assert_delivered_to_paris_only(g, server)


# -- Semantic Kernel ----------------------------------------------------------------------------


class Weather:
    @kernel_function(description="Look up the weather.")
    def lookup(self, city: str, units: str) -> str:
        return lookup_result(city, units)


class PluginFakeOpenAI(FakeOpenAI):
    """The scenario, with Semantic Kernel's qualified tool names."""

    def script_for(self, body: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        call = super().script_for(body)
        return None if call is None else (f"{PLUGIN}-{call[0]}", call[1])


@pytest.fixture
def sk_guarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    for module in (model_diagnostics, agent_diagnostics, function_tracer):  # sensitive mode: arguments on tool spans
        settings = module.MODEL_DIAGNOSTICS_SETTINGS
        monkeypatch.setattr(settings, "enable_otel_diagnostics", True)
        monkeypatch.setattr(settings, "enable_otel_diagnostics_sensitive", True)
    with guarded_board(make_guarded()) as guarded, instrumented(None, monkeypatch):
        yield guarded


def test_semantic_kernel_reminders_reach_the_model_through_the_client_adapter(sk_guarded: Guarded) -> None:
    g = sk_guarded
    with PluginFakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:

        async def main() -> list[Any]:
            client = guard_client(
                openai.AsyncOpenAI(base_url=server.base_url, api_key="offline"), guard=g.guard, inbox=g.inbox
            )
            agent = ChatCompletionAgent(
                service=OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client),
                name="weather_agent",
                plugins=[Weather()],
                function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=5),
            )
            return await _closing(
                client, [agent.get_response(messages=PARIS_PROMPT), agent.get_response(messages=LYON_PROMPT)]
            )

        results = asyncio.run(main())
    assert [str(r.message.content) for r in results] == [FINAL_ANSWER, FINAL_ANSWER]
    assert_delivered_to_paris_only(g, server, tool=f"{PLUGIN}-lookup")
