"""The scenario for LangChain 1.x ``create_agent`` and LangGraph ``create_react_agent``, shared by the
OpenInference and the OpenLLMetry test modules (each instruments LangChain its own way in a
module-scoped ``board`` fixture built with :func:`instrumented_board`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from .scenario import (
    FINAL_ANSWER,
    LOOP,
    SCRIPT,
    SHORT_SCRIPT,
    Guarded,
    Switchboard,
    assert_gentle_reminder_came_one_request_late,
    assert_interleaved,
    assert_reminders_reached_model,
    assert_separate_runs,
    assert_whole_chain,
    break_once,
    expected_whole_chain,
    lookup_result,
    make_guarded,
    next_call,
    require,
    run_lengths,
    tool_spans_by_trace,
    usage_after,
    wired,
)

require("langgraph")
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.prebuilt import ToolNode, create_react_agent  # noqa: E402  (deprecated in LangGraph 1.x, still offered)

from otel_repeat_guard.integrations.langchain import RepeatGuardMiddleware, repeat_guard_pre_model_hook  # noqa: E402


def instrumented_board(instrumentor: Any) -> Iterator[Switchboard]:
    """Instrument LangChain once per module: re-instrumenting does not reliably move an instrumentor to a new provider."""
    switchboard = Switchboard()
    provider = TracerProvider()
    provider.add_span_processor(switchboard)
    instrumentor.instrument(tracer_provider=provider)
    yield switchboard
    instrumentor.uninstrument()


@pytest.fixture
def g(board: Switchboard) -> Iterator[Guarded]:
    guarded = make_guarded()
    board.targets = guarded.processors
    yield guarded
    board.targets = []


class ScriptedChat(BaseChatModel):
    """Asks for SCRIPT[i] after i tool results since the last user prompt; records what it was sent.

    Reports the scenario's usage (:func:`scenario.usage_after`) on every answer."""

    script: Any
    requests: Any  # Any: pydantic would copy a list field, and the test reads this one

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        seen = [
            ("user" if m.type == "human" else "tool" if m.type == "tool" else "assistant", str(m.content))
            for m in messages
        ]
        self.requests.append(seen)
        results = 0
        for role, text in seen:
            if role == "user" and "<system-reminder>" not in text:
                results = 0
            elif role == "tool":
                results += 1
        tokens = usage_after(results)
        usage = {
            "input_tokens": tokens["input"],
            "output_tokens": tokens["output"],
            "total_tokens": tokens["input"] + tokens["output"],
        }
        call = next_call(results, self.script)
        if call is None:
            answer = AIMessage(content=FINAL_ANSWER, usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=answer)])
        name, arguments = call
        message = AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": dict(arguments), "id": f"call_{len(self.requests)}", "type": "tool_call"}
            ],
            usage_metadata=usage,
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        await asyncio.sleep(0)  # let concurrent runs interleave
        return self._generate(messages, stop, run_manager, **kwargs)


@tool
def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


@tool
def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise ValueError(f"the weather service for {city} is down")


class ToolErrorsToModel(AgentMiddleware):  # type: ignore[type-arg]
    """create_agent lets tool exceptions end the run; hand them to the model instead, as harnesses do."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(request)
        except ValueError as error:
            return ToolMessage(content=f"error: {error}", tool_call_id=request.tool_call["id"], status="error")

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except ValueError as error:
            return ToolMessage(content=f"error: {error}", tool_call_id=request.tool_call["id"], status="error")


def build(kind: str, g: Guarded, name: str, script: Any = SCRIPT, requests: list[Any] | None = None) -> Any:
    model = ScriptedChat(script=script, requests=[] if requests is None else requests)
    if kind == "create_agent":
        middleware = [RepeatGuardMiddleware(guard=g.guard, inbox=g.inbox), ToolErrorsToModel()]
        return create_agent(model, [lookup, broken_lookup], name=name, middleware=middleware)
    tools = ToolNode([lookup, broken_lookup], handle_tool_errors=True)
    return create_react_agent(
        model, tools, name=name, pre_model_hook=repeat_guard_pre_model_hook(guard=g.guard, inbox=g.inbox)
    )


KINDS = pytest.mark.parametrize("kind", ["create_agent", "react"])
PROMPT = {"messages": [HumanMessage(content="Weather in Paris?")]}
# create_agent: the root span is the agent; the prebuilt ReAct graph named without "agent" is
# not tagged AGENT by OpenInference, so its root stands for the run.
NAMES = {"create_agent": ("weather_agent", "travel_agent"), "react": ("weather", "travel")}


@KINDS
def test_one_run_and_the_reminders_reach_the_model(kind: str, g: Guarded) -> None:
    requests: list[Any] = []
    out = build(kind, g, NAMES[kind][0], requests=requests).invoke(PROMPT)  # tools run on a thread-pool worker
    assert out["messages"][-1].content == FINAL_ANSWER
    assert_separate_runs(g, 1)
    assert_reminders_reached_model(requests)
    # the no-progress detector's outcome: the ToolMessage envelope (its tool_call_id differs per call) unwrapped
    from otel_repeat_guard.conventions.outcomes import outcome_of

    tools = next(iter(tool_spans_by_trace(g).values()))
    assert [outcome_of(s.attributes or {}, s.events, False, None) for s in tools[:6]] == [
        (lookup_result("Paris", "metric"), False)
    ] * 6
    assert not any("<system-reminder>" in str(m.content) for m in out["messages"])  # per call, not in the state


@KINDS
def test_a_request_the_adapter_fails_to_edit_goes_out_unchanged_and_the_next_carries_the_reminder(
    kind: str, g: Guarded, monkeypatch: pytest.MonkeyPatch
) -> None:
    import otel_repeat_guard.integrations.langchain as adapter

    failed = break_once(monkeypatch, adapter)
    requests: list[Any] = []
    out = build(kind, g, NAMES[kind][0], requests=requests).invoke(PROMPT)
    assert out["messages"][-1].content == FINAL_ANSWER
    assert failed == [1]
    assert_gentle_reminder_came_one_request_late(requests)


@KINDS
def test_the_whole_chain_agrees(kind: str, board: Switchboard, stored: Guarded) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    requests: list[Any] = []
    with wired(board, stored):
        out = build(kind, stored, NAMES[kind][0], LOOP, requests).invoke(PROMPT)
    assert out["messages"][-1].content == FINAL_ANSWER
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(stored, expected_whole_chain())


@KINDS
def test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures(
    kind: str, board: Switchboard, hand_wired: Guarded
) -> None:
    """Issue 40, item 1: ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter``, as docs/runtimes.md
    showed (it stored 0 wasted tokens against the guard's metric, 12 run keys and no model call on the run's
    timeline while facts were opt-in): the store's wasted tokens are the metric's, one run key, every model call
    on the run's timeline."""
    with wired(board, hand_wired):
        out = build(kind, hand_wired, NAMES[kind][0], LOOP).invoke(PROMPT)
    assert out["messages"][-1].content == FINAL_ANSWER
    assert_whole_chain(hand_wired, expected_whole_chain())


@KINDS
def test_a_second_prompt_gets_a_fresh_chain(kind: str, g: Guarded) -> None:
    agent = build(kind, g, NAMES[kind][0], SHORT_SCRIPT)
    first = agent.invoke(PROMPT)
    agent.invoke({"messages": [*first["messages"], HumanMessage(content="And again?")]})
    assert [run_lengths(spans) for spans in tool_spans_by_trace(g).values()] == [[1, 2], [1, 2]]


async def _both(*runs: Any) -> None:
    await asyncio.gather(*runs)


@KINDS
def test_a_second_agent_running_concurrently_has_its_own_chain(kind: str, g: Guarded) -> None:
    a, b = (build(kind, g, name) for name in NAMES[kind])
    asyncio.run(_both(a.ainvoke(PROMPT), b.ainvoke(PROMPT)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


@KINDS
def test_two_concurrent_runs_of_one_agent_have_separate_chains(kind: str, g: Guarded) -> None:
    agent = build(kind, g, NAMES[kind][0])
    asyncio.run(_both(agent.ainvoke(PROMPT), agent.ainvoke(PROMPT)))
    assert_separate_runs(g, 2)
    assert_interleaved(g)


@KINDS
def test_a_stop_reminder_ends_the_run(kind: str, board: Switchboard) -> None:
    """create_agent: the middleware jumps to the end, the stop text the state's last message;
    create_react_agent: its pre-model hook cannot jump, so the run ends with RepeatGuardStop."""
    from otel_repeat_guard import GuardConfig, RepeatGuardStop

    from .scenario import PARIS

    guarded = make_guarded(config=GuardConfig(thresholds=(3,), stop_at=4))
    board.targets = guarded.processors
    requests: list[Any] = []
    try:
        agent = build(kind, guarded, NAMES[kind][0], (("lookup", PARIS),) * 6, requests)
        if kind == "create_agent":
            out = agent.invoke(PROMPT)
            last = out["messages"][-1]
            assert (last.type, last.name) == ("human", "repeat_guard")
            assert "Stop calling tools now" in last.content and "<system-reminder>" in last.content
        else:
            with pytest.raises(RepeatGuardStop) as stopped:
                agent.invoke(PROMPT)
            assert stopped.value.reminder.tier == "stop"
    finally:
        board.targets = []
    assert [(r.tier, r.run_length) for r in guarded.reminders] == [("gentle", 3), ("stop", 4)]
    assert len(requests) == 4  # no model request after the stop
