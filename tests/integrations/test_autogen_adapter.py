"""AutoGen AgentChat: ``RepeatGuardModelContext`` puts the reminder into the model's next request.

The real ``OpenAIChatCompletionClient`` talks to :class:`FakeOpenAI`, instrumented each of the three
ways (AutoGen's tool spans carry no arguments: the guard takes them from the model spans). The
Paris run repeats ``lookup`` three times (``REPEAT3``); a concurrent run of the same agent
definition about Lyon (``ONE_CALL``) must receive nothing. An ``AssistantAgent`` holds one
conversation (its model context) and cannot run twice at once, so the two runs use two instances
of the same agent definition, each with its own ``RepeatGuardModelContext``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .msft_cases import INSTRUMENTATIONS, guarded_board, instrumented
from .scenario import (
    FINAL_ANSWER,
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
    make_guarded,
    openai_messages,
    require,
    with_store,
)

require("autogen_agentchat")
require("autogen_ext.models.openai")
from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core.model_context import BufferedChatCompletionContext  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402

import otel_repeat_guard.integrations.autogen as adapter  # noqa: E402
from otel_repeat_guard.integrations import _common  # noqa: E402
from otel_repeat_guard.integrations.autogen import RepeatGuardModelContext  # noqa: E402

from .test_autogen import CLIENTS, MODEL, final_text, lookup, run  # noqa: E402

PARIS_TASK, LYON_TASK = "Weather in Paris?", "Weather in Lyon?"


def make_agent(g: Guarded, server: FakeOpenAI, inner: Any = None, calls: int = len(REPEAT3)) -> AssistantAgent:
    client = OpenAIChatCompletionClient(model=MODEL, base_url=server.base_url, api_key="offline")
    CLIENTS.append(client)
    return AssistantAgent(
        "weather_agent",
        model_client=client,
        tools=[lookup],
        max_tool_iterations=calls + 2,
        model_context=RepeatGuardModelContext(inner, guard=g.guard, inbox=g.inbox),
    )


@pytest.fixture(params=INSTRUMENTATIONS)
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    with guarded_board(make_guarded()) as guarded, instrumented(request.param, monkeypatch):
        yield guarded


@pytest.fixture(params=INSTRUMENTATIONS)
def gs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Guarded]:
    """As ``g``, with the store."""
    with with_store(tmp_path) as stored, guarded_board(stored) as guarded, instrumented(request.param, monkeypatch):
        yield guarded


def test_the_whole_chain_agrees(gs: Guarded) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with FakeOpenAI(LOOP) as server:
        assert final_text(run(make_agent(gs, server, calls=len(LOOP)).run(task=PARIS_TASK))) == FINAL_ANSWER
    assert_reminders_reached_model(by_task(server)[PARIS_TASK], loop=True)
    assert_whole_chain(gs, expected_whole_chain())


@pytest.fixture
def hook_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, int]]:
    """Each time the model context collects reminders: ``guard.current_agent_id()`` right then, and how many it got."""
    calls: list[tuple[str | None, int]] = []
    take = _common.take_reminders

    def spying(guard: Any, inbox: Any, context: Any = None, **options: Any) -> Any:
        agent_id = guard.current_agent_id(context)
        reminders = take(guard, inbox, context, **options)
        calls.append((agent_id, len(reminders)))
        return reminders

    monkeypatch.setattr(_common, "take_reminders", spying)
    return calls


def by_task(server: FakeOpenAI) -> dict[str, list[list[tuple[str, str]]]]:
    """Each conversation's requests as (role, text) lists, keyed by its task."""
    out: dict[str, list[list[tuple[str, str]]]] = {}
    for bodies in server.conversations():
        requests = [openai_messages(body) for body in bodies]
        task = next(text for role, text in requests[0] if role == "user")
        out[task] = requests
    return out


def test_the_next_request_carries_the_reminder_and_a_concurrent_run_gets_none(
    g: Guarded, hook_calls: list[tuple[str | None, int]]
) -> None:
    with FakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as server:
        paris, lyon = make_agent(g, server), make_agent(g, server)

        async def both() -> list[Any]:
            return list(await asyncio.gather(paris.run(task=PARIS_TASK), lyon.run(task=LYON_TASK)))

        results = run(both())
        conversations = by_task(server)
        order = [next(m["content"] for m in body["messages"] if m["role"] == "user") for body in server.requests]

    assert [final_text(r) for r in results] == [FINAL_ANSWER, FINAL_ANSWER]
    assert sorted(conversations) == [LYON_TASK, PARIS_TASK]
    assert_gentle_reminder_delivered_once(conversations[PARIS_TASK])
    assert len(conversations[LYON_TASK]) == 2
    assert_nothing_delivered(conversations[LYON_TASK])
    assert order.index(LYON_TASK) < len(order) - 1 - order[::-1].index(PARIS_TASK), order  # they overlapped

    (reminder,) = g.reminders
    assert (reminder.tool_name, reminder.run_length, reminder.tier) == ("lookup", 3, "gentle")
    paris_ids = {event["repeat_tool_guard.agent_id"] for _, event in guard_events(g)}
    assert paris_ids == {reminder.agent_id}, paris_ids
    # At hook time the span context names the run: the Paris run's 4 requests under the id its
    # repeat events carry (the 4th with the reminder), Lyon's 2 under another id, with none.
    paris_calls = [n for agent_id, n in hook_calls if agent_id == reminder.agent_id]
    lyon_ids = {agent_id for agent_id, _ in hook_calls if agent_id != reminder.agent_id}
    assert paris_calls == [0, 0, 0, 1], hook_calls
    assert len(lyon_ids) == 1 and None not in lyon_ids, hook_calls
    assert len(hook_calls) == 6, hook_calls

    # For that request only: the conversation the agent keeps holds no reminder.
    for agent in (paris, lyon):
        context = agent.model_context
        assert isinstance(context, RepeatGuardModelContext)
        kept = asyncio.run(context.inner.get_messages())
        assert not any("<system-reminder>" in str(getattr(m, "content", "")) for m in kept), kept


def test_it_wraps_the_agents_own_model_context(g: Guarded) -> None:
    """A buffered context keeps trimming the conversation; the reminder comes after what it keeps."""
    with FakeOpenAI(REPEAT3) as server:
        agent = make_agent(g, server, BufferedChatCompletionContext(buffer_size=6))
        result = run(agent.run(task=PARIS_TASK))
        last = openai_messages(server.requests[-1])

    assert final_text(result) == FINAL_ANSWER
    assert len(server.requests) == 4
    assert [role for role, _ in last] == ["system", *["assistant", "tool"] * 3, "user"], last  # the task was trimmed
    assert last[-1][1].count("<system-reminder>") == 1 and "3 times in a row" in last[-1][1], last


def test_a_failure_in_the_adapter_leaves_the_request_unchanged(
    g: Guarded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(reminders: Any) -> str:
        raise RuntimeError("broken formatter")

    monkeypatch.setattr(adapter, "reminder_message", broken)
    with FakeOpenAI(REPEAT3) as server:
        result = run(make_agent(g, server).run(task=PARIS_TASK))
        requests = [openai_messages(body) for body in server.requests]

    assert final_text(result) == FINAL_ANSWER
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert requests[3][:-2] == requests[2], "the 4th request is the 3rd plus the call and its result, nothing else"
    said, undelivered = [r.message for r in caplog.records if r.name == "otel_repeat_guard"]
    assert said == (
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one"
    )
    # the 4th request was the run's last: the reminder never reached the model, and the guard says so (not_added)
    assert undelivered.startswith(
        "repeat guard: a gentle reminder for tool 'lookup' did not reach the model: an adapter of the run asked"
    )
    (reminder,) = g.reminders
    assert g.inbox.drain(reminder.agent_id) == [reminder], "given back for the run's next request"


def test_inner_must_be_a_model_context(g: Guarded) -> None:
    with pytest.raises(ValueError, match="inner must be an autogen_core ChatCompletionContext"):
        RepeatGuardModelContext([], guard=g.guard, inbox=g.inbox)


def test_guard_and_inbox_default_to_the_process_wide_ones(g: Guarded) -> None:
    from otel_repeat_guard import default_inbox
    from otel_repeat_guard.installed import set_installed_guard

    previous = set_installed_guard(None)
    try:
        unguarded = RepeatGuardModelContext()  # no guard installed: it passes every call through
        assert unguarded._guard.model_call_due() is None
        set_installed_guard(g.guard)
        context = RepeatGuardModelContext()
        assert (context._guard, context._inbox) == (g.guard, default_inbox())
    finally:
        set_installed_guard(previous)
