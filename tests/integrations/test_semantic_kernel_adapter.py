"""Semantic Kernel 1.45 has no hook before each model request of its auto function-calling loop.

Which is why there is no ``otel_repeat_guard.integrations.semantic_kernel``. Its filters are:

- prompt render filters: run when a prompt template is rendered (a ``ChatCompletionAgent``'s
  instructions, once per invocation), not per request of the loop;
- function invocation and auto function invocation filters: run around each tool call. The
  loop (``ChatCompletionClientBase.get_chat_message_contents``) calls
  ``Kernel.invoke_function_call``, which runs the filter stack and only then appends the tool
  result to the chat history. A message a filter adds lands between the model's tool call and
  its result, where the OpenAI API rejects it.

This test pins that down with the filter an adapter would have been: after ``next(context)``
the tool span has ended, the run is found through the span context (the loop span: it is
current there), and the reminder, which names the tool ``Weather-lookup``, is due; but the
message lands before the tool result. If a Semantic Kernel release changes that, this test
fails, and the filter becomes the adapter. Until then reminders reach Semantic Kernel's model
through the OpenAI client it is given: ``guard_client(openai.AsyncOpenAI(...))``, passed as the
service's ``async_client``, shown end to end below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .msft_cases import INSTRUMENTATIONS, guarded_board, instrumented
from .scenario import (
    FINAL_ANSWER,
    GENTLE,
    LOOP,
    ONE_CALL,
    REPEAT3,
    Guarded,
    assert_gentle_reminder_delivered_once,
    assert_nothing_delivered,
    assert_reminders_reached_model,
    assert_whole_chain,
    expected_whole_chain,
    guard_events,
    lookup_result,
    make_guarded,
    openai_messages,
    require,
    with_store,
)

require("semantic_kernel")
import openai  # noqa: E402
from semantic_kernel.agents import ChatCompletionAgent  # noqa: E402
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior  # noqa: E402
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion  # noqa: E402
from semantic_kernel.contents import AuthorRole, ChatMessageContent  # noqa: E402
from semantic_kernel.filters import FilterTypes  # noqa: E402

from otel_repeat_guard.integrations import reminder_message, take_reminders  # noqa: E402
from otel_repeat_guard.integrations.openai_client import guard_client  # noqa: E402

from .test_semantic_kernel import CLIENTS, LOOKUP, MODES, PluginFakeOpenAI, Weather, make_agent, run, set_mode  # noqa: E402

PARIS_TASK, LYON_TASK = "Weather in Paris?", "Weather in Lyon?"
SK_GENTLE = GENTLE.replace("`lookup`", f"`{LOOKUP}`")


@pytest.fixture(params=MODES)
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    set_mode(request.param, monkeypatch)
    with guarded_board(make_guarded()) as guarded, instrumented("openai-v2", monkeypatch):
        yield guarded


@pytest.fixture(params=[(m, i) for m in MODES for i in INSTRUMENTATIONS], ids=lambda p: f"{p[0]}-{p[1]}")
def gs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Guarded]:
    """A guard writing the store, in each mode of Semantic Kernel's tracing, with each client instrumentation."""
    mode, instrumentation = request.param
    set_mode(mode, monkeypatch)
    with with_store(tmp_path) as stored, guarded_board(stored) as guarded, instrumented(instrumentation, monkeypatch):
        yield guarded


def guarded_agent(g: Guarded, server: PluginFakeOpenAI, calls: int = len(REPEAT3)) -> ChatCompletionAgent:
    """The weather agent on an ``AsyncOpenAI`` client guarded with ``guard_client`` (how reminders reach SK's model)."""
    client = guard_client(openai.AsyncOpenAI(base_url=server.base_url, api_key="offline"), guard=g.guard, inbox=g.inbox)
    CLIENTS.append(client)
    return ChatCompletionAgent(
        service=OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client),
        name="weather_agent",
        plugins=[Weather()],
        function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=calls + 2),
    )


def test_the_whole_chain_agrees(gs: Guarded) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with PluginFakeOpenAI(LOOP) as server:
        response = run(guarded_agent(gs, server, calls=len(LOOP)).get_response(PARIS_TASK))
        conversations = by_task(server)
    assert str(response.message.content) == FINAL_ANSWER
    assert_reminders_reached_model(conversations[PARIS_TASK], loop=True)
    assert_whole_chain(gs, expected_whole_chain(), tool=LOOKUP)


def by_task(server: PluginFakeOpenAI) -> dict[str, list[list[tuple[str, str]]]]:
    out: dict[str, list[list[tuple[str, str]]]] = {}
    for bodies in server.conversations():
        requests = [openai_messages(body) for body in bodies]
        out[next(text for role, text in requests[0] if role == "user")] = requests
    return out


def test_an_auto_function_invocation_filter_cannot_add_the_reminder_after_the_tool_result(g: Guarded) -> None:
    hook_calls: list[tuple[str | None, int]] = []

    async def reminder_filter(context: Any, next: Any) -> None:
        await next(context)
        agent_id = g.guard.current_agent_id()
        reminders = take_reminders(g.guard, g.inbox)
        hook_calls.append((agent_id, len(reminders)))
        if reminders:
            message = ChatMessageContent(role=AuthorRole.USER, content=reminder_message(reminders))
            context.chat_history.add_message(message)

    with PluginFakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:
        agent = make_agent(server)  # one agent, two concurrent invocations (each gets its own thread)
        agent.kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, reminder_filter)

        async def both() -> list[Any]:
            return list(await asyncio.gather(agent.get_response(PARIS_TASK), agent.get_response(LYON_TASK)))

        responses = run(both())
        conversations = by_task(server)

    assert [str(r.message.content) for r in responses] == [FINAL_ANSWER, FINAL_ANSWER]
    assert sorted(conversations) == [LYON_TASK, PARIS_TASK]
    assert len(conversations[LYON_TASK]) == 2
    assert_nothing_delivered(conversations[LYON_TASK])

    (reminder,) = g.reminders
    assert (reminder.tool_name, reminder.run_length, reminder.tier) == (LOOKUP, 3, "gentle")
    assert {event["repeat_tool_guard.agent_id"] for _, event in guard_events(g)} == {reminder.agent_id}
    # The filter runs in the run's span context: the Paris run's three tool calls under the id its
    # repeat events carry (the reminder due after the third), Lyon's one call under another id.
    assert [n for agent_id, n in hook_calls if agent_id == reminder.agent_id] == [0, 0, 1], hook_calls
    (lyon,) = [call for call in hook_calls if call[0] != reminder.agent_id]
    assert lyon[0] is not None and lyon[1] == 0, hook_calls

    paris = conversations[PARIS_TASK]
    assert len(paris) == 4
    assert not any("<system-reminder>" in text for request in paris[:3] for _, text in request)
    last = paris[3]
    assert [role for role, _ in last[-3:]] == ["assistant", "user", "tool"], last  # not after the result
    assert last[-2][1] == f"<system-reminder>\n{reminder.text}\n</system-reminder>"
    assert last[-2][1].count(SK_GENTLE) == 1, last[-2][1]
    assert last[-1][1] == lookup_result("Paris", "metric")


def test_the_client_adapter_delivers_the_reminder_to_semantic_kernels_model(g: Guarded) -> None:
    """One agent, two concurrent invocations; its OpenAI client guarded with ``guard_client``."""
    with PluginFakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:
        agent = guarded_agent(g, server)

        async def both() -> list[Any]:
            return list(await asyncio.gather(agent.get_response(PARIS_TASK), agent.get_response(LYON_TASK)))

        responses = run(both())
        conversations = by_task(server)

    assert [str(r.message.content) for r in responses] == [FINAL_ANSWER, FINAL_ANSWER]
    (reminder,) = g.reminders
    assert (reminder.tool_name, reminder.run_length, reminder.tier) == (LOOKUP, 3, "gentle")
    paris = [
        [(role, text.replace(SK_GENTLE, GENTLE)) for role, text in request] for request in conversations[PARIS_TASK]
    ]
    assert_gentle_reminder_delivered_once(paris)  # with SK's tool name put back to the scenario's
    assert conversations[PARIS_TASK][3][-1][1] == f"<system-reminder>\n{reminder.text}\n</system-reminder>"
    assert SK_GENTLE in reminder.text
    assert len(conversations[LYON_TASK]) == 2
    assert_nothing_delivered(conversations[LYON_TASK])
