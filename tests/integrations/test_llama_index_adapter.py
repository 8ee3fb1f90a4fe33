"""The LlamaIndex adapters end to end: RepeatGuardFunctionAgent and a ReActAgent with RepeatGuardReActChatFormatter,
their OpenAI LLM pointed at the fake OpenAI server, traced by OpenInference (test_llama_index.py's setup).

No span marks a LlamaIndex run as an agent's: the guard finds the run as the span enclosing its model calls
(``FunctionAgent.run`` / ``ReActAgent.run``, a CHAIN span). Each test records ``guard.current_agent_id()`` where
the adapter runs (a test subclass's ``take_step``, just before the adapter's) and checks it is the key the repeat
events carry.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .oi_cases import OUTERS, Instrumented, guarded, instrumented_fixture
from .scenario import (
    FINAL_ANSWER,
    GENTLE,
    LOOP,
    ONE_CALL,
    PARIS,
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
    wired,
    with_store,
)

os.environ.setdefault("OPENAI_API_KEY", "offline")
require("llama_index.core")
from llama_index.core.agent.workflow import ReActAgent  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402

from otel_repeat_guard.integrations import llama_index as adapter  # noqa: E402
from otel_repeat_guard.integrations.llama_index import (  # noqa: E402
    RepeatGuardFunctionAgent,
    RepeatGuardReActChatFormatter,
)

from .test_llama_index import TOOLS, ReActFakeOpenAI  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # pydantic v1 API use inside LlamaIndex
]
KINDS = pytest.mark.parametrize("agent_kind", ["function", "react"])
Requests = list[list[tuple[str, str]]]

instrumented = instrumented_fixture(LlamaIndexInstrumentor)


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded(instrumented)


def _first_user_text(body: dict[str, Any]) -> str:
    return next((str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user"), "")


def fake(agent_kind: str, script: Any = REPEAT3) -> FakeOpenAI:
    """The fake server following ``script``, or ONE_CALL for a prompt about Lyon."""
    cls = ReActFakeOpenAI if agent_kind == "react" else FakeOpenAI
    return cls(script, by_prompt={"Lyon": ONE_CALL})


def seen(agent_kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request as (role, text); a ReActAgent's ``Observation: …`` user messages are its tool results."""
    out = openai_messages(body)
    if agent_kind == "react":
        out = [
            ("tool", t.removeprefix("Observation: ")) if r == "user" and t.startswith("Observation:") else (r, t)
            for r, t in out
        ]
    return out


def requests_about(server: FakeOpenAI, agent_kind: str, city: str) -> Requests:
    (conversation,) = [c for c in server.conversations() if city in _first_user_text(c[0])]
    return [seen(agent_kind, body) for body in conversation]


class Gates:
    """Where the adapter runs, record the run the guard sees; and hold the Paris run, its reminder due, until the
    Lyon run is done (Lyon starts only then), so that Lyon's requests go out while Paris's reminder waits."""

    def __init__(self, g: Guarded, hold: bool) -> None:
        self.g, self.hold = g, hold
        self.ids: dict[str, list[str | None]] = {"Paris": [], "Lyon": []}
        self.paris_due, self.lyon_done = asyncio.Event(), asyncio.Event()
        self.pending_when_lyon_ran: list[str] = []

    async def before_step(self, llm_input: list[Any], results: int) -> None:
        city = "Lyon" if any("Lyon" in str(m.content) for m in llm_input) else "Paris"
        self.ids[city].append(self.g.guard.current_agent_id())
        if not self.hold:
            return
        if city == "Paris" and results == 3:
            self.paris_due.set()
            await asyncio.wait_for(self.lyon_done.wait(), 10)
        elif city == "Lyon" and results == 0:
            await asyncio.wait_for(self.paris_due.wait(), 10)
            self.pending_when_lyon_ran = self.g.inbox.pending()


def make_agent(agent_kind: str, g: Guarded, server: FakeOpenAI, gates: Gates, **llm_options: Any) -> Any:
    llm = OpenAI(model="gpt-4o-mini", api_base=server.base_url, api_key="offline", **llm_options)
    if agent_kind == "function":

        class GatedFunctionAgent(RepeatGuardFunctionAgent):
            async def take_step(self, ctx: Any, llm_input: list[Any], tools: Any, memory: Any) -> Any:
                scratchpad = await ctx.store.get(self.scratchpad_key, default=[])
                await gates.before_step(llm_input, sum(m.role == "tool" for m in scratchpad))
                return await super().take_step(ctx, llm_input, tools, memory)

        return GatedFunctionAgent(
            name="weather_agent", description="Weather", tools=TOOLS, llm=llm, guard=g.guard, inbox=g.inbox
        )

    class GatedReActAgent(ReActAgent):
        async def take_step(self, ctx: Any, llm_input: list[Any], tools: Any, memory: Any) -> Any:
            reasoning = await ctx.store.get(self.reasoning_key, default=[])
            await gates.before_step(
                llm_input, sum(type(step).__name__ == "ObservationReasoningStep" for step in reasoning)
            )
            return await super().take_step(ctx, llm_input, tools, memory)

    formatter = RepeatGuardReActChatFormatter(guard=g.guard, inbox=g.inbox)
    return GatedReActAgent(name="weather_agent", description="Weather", tools=TOOLS, llm=llm, formatter=formatter)


def paris_run_id(g: Guarded) -> str:
    """The key the Paris run's repeat events carry (the run span enclosing the model calls)."""
    ids = {
        e["repeat_tool_guard.agent_id"]
        for span, e in guard_events(g)
        if "Paris" in str((span.attributes or {}).get("input.value"))
    }
    (agent_id,) = ids
    return str(agent_id)


@KINDS
def test_the_whole_chain_agrees(instrumented: Instrumented, agent_kind: str, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    with fake(agent_kind, LOOP) as server, with_store(tmp_path) as gs, wired(instrumented.board, gs):
        usage = {"stream_options": {"include_usage": True}}  # the agents stream; OpenAI reports usage when asked
        agent = make_agent(agent_kind, gs, server, Gates(gs, hold=False), additional_kwargs=usage)

        async def one() -> Any:
            return await agent.run("Weather in Paris?")

        assert str(asyncio.run(one())).strip() == FINAL_ANSWER
    assert_reminders_reached_model(requests_about(server, agent_kind, "Paris"), loop=True)
    assert_whole_chain(gs, expected_whole_chain())


@KINDS
def test_the_next_request_carries_the_reminder_once(g: Guarded, agent_kind: str) -> None:
    gates = Gates(g, hold=False)
    with fake(agent_kind) as server:
        agent = make_agent(agent_kind, g, server, gates)

        async def one() -> Any:
            return await agent.run("Weather in Paris?")

        assert str(asyncio.run(one())).strip() == FINAL_ANSWER
        requests = requests_about(server, agent_kind, "Paris")
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert_gentle_reminder_delivered_once(requests)
    assert requests[3][-1] == ("user", f"<system-reminder>\n{g.reminders[0].text}\n</system-reminder>")
    assert g.reminders[0].text.startswith(GENTLE)
    assert g.inbox.pending() == []
    # The adapter found the run the repeat events name, at every request.
    assert gates.ids["Paris"] == [paris_run_id(g)] * 4
    assert g.reminders[0].agent_id == paris_run_id(g)


@KINDS
def test_the_reminder_stays_where_it_was_delivered_for_a_function_agent_only(g: Guarded, agent_kind: str) -> None:
    """FunctionAgent keeps it in its scratchpad (then the memory); the ReAct formatter adds it to one request."""
    gates = Gates(g, hold=False)
    with fake(agent_kind) as server:
        agent = make_agent(agent_kind, g, server, gates)

        async def one() -> Any:
            handler = agent.run("Weather in Paris?")
            await handler
            return await (await handler.ctx.store.get("memory")).aget()

        history = asyncio.run(one())
    carrying = [m for m in history if "<system-reminder>" in str(m.content)]
    if agent_kind == "function":
        assert [m.role.value for m in history] == ["user", *["assistant", "tool"] * 3, "user", "assistant"]
        assert carrying == [history[7]]
        assert [str(m.content) for m in history if m.role.value == "tool"] == [lookup_result(**PARIS)] * 3
    else:
        assert carrying == []


async def _paris_and_lyon(agent: Any, gates: Gates, around: Any) -> list[Any]:
    async def lyon() -> Any:
        result = await agent.run("Weather in Lyon?")
        gates.lyon_done.set()
        return result

    with around:
        return list(await asyncio.gather(agent.run("Weather in Paris?"), lyon()))


@KINDS
@OUTERS
def test_a_concurrent_run_of_the_same_agent_receives_nothing(
    g: Guarded, instrumented: Instrumented, agent_kind: str, outer: bool
) -> None:
    """Two runs of one agent object at once; Lyon's requests go out while Paris's reminder waits in the inbox.

    Under one outer span, before a run's first model call no span encloses a model call of that run yet, so
    the guard sees the outer span there (nothing is due then); from the second request on, the run's own span.
    """
    gates = Gates(g, hold=True)
    with fake(agent_kind) as server:
        agent = make_agent(agent_kind, g, server, gates)
        outputs = asyncio.run(_paris_and_lyon(agent, gates, instrumented.around(outer)))
        paris, lyon = requests_about(server, agent_kind, "Paris"), requests_about(server, agent_kind, "Lyon")
    assert [str(o).strip() for o in outputs] == [FINAL_ANSWER] * 2
    assert gates.pending_when_lyon_ran == [paris_run_id(g)]
    assert [(r.tool_name, r.run_length) for r in g.reminders] == [("lookup", 3)]
    assert_gentle_reminder_delivered_once(paris)
    assert len(lyon) == 2 and lyon[1][-1] == ("tool", lookup_result("Lyon", "metric"))
    assert_nothing_delivered(lyon)
    first = 1 if outer else 0
    assert gates.ids["Paris"][first:] == [paris_run_id(g)] * (4 - first)
    (lyon_id,) = set(gates.ids["Lyon"][first:])
    assert len(gates.ids["Lyon"]) == 2 and lyon_id not in {None, paris_run_id(g)}


@KINDS
def test_a_failure_in_the_adapter_leaves_the_request_unchanged(
    g: Guarded, agent_kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(reminders: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(adapter, "reminder_message", broken)
    with fake(agent_kind) as server, caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        agent = make_agent(agent_kind, g, server, Gates(g, hold=False))

        async def one() -> Any:
            return await agent.run("Weather in Paris?")

        assert str(asyncio.run(one())).strip() == FINAL_ANSWER
        requests = requests_about(server, agent_kind, "Paris")
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert [r.message for r in caplog.records if r.name == "otel_repeat_guard"] == [
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one"
    ]


def test_a_wrong_guard_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="guard must be a RepeatGuardSpanProcessor"):
        RepeatGuardReActChatFormatter(guard=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inbox must be a ReminderInbox"):
        RepeatGuardFunctionAgent(guard=make_guarded().guard, inbox=object(), tools=TOOLS)  # type: ignore[arg-type]
