"""CrewAI 1.15's ``before_llm_call`` hook adapter, end to end: the real crew against the fake OpenAI server.

Instrumented as in :mod:`test_crewai_openinference` (OpenInference's CrewAI and OpenAI
instrumentors). The script is REPEAT3, three identical ``lookup`` calls then the answer, so
CrewAI's own stop at the 5th identical call (left as installed here) never fires.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from .crewai_cases import (  # noqa: F401  (no_network: an autouse fixture)
    Instrumented,
    guarded_on,
    no_network,
)
from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    ONE_CALL,
    REPEAT3,
    Guarded,
    assert_gentle_reminder_delivered_once,
    assert_nothing_delivered,
    lookup_result,
    openai_messages,
    require,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai")

require("crewai")
from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.crews.crew_output import CrewOutput  # noqa: E402
from crewai.hooks import get_before_llm_call_hooks, unregister_before_llm_call_hook  # noqa: E402
from crewai.hooks.llm_hooks import LLMCallHookContext  # noqa: E402
from crewai.tools import tool  # noqa: E402
from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

from otel_repeat_guard import Reminder  # noqa: E402
from otel_repeat_guard.integrations import _common  # noqa: E402
from otel_repeat_guard.integrations.crewai import register_repeat_guard_hook, repeat_guard_llm_hook  # noqa: E402

MEET: dict[str, threading.Barrier] = {}
"""city -> a barrier the first lookup about that city waits at (set by the concurrent test)."""


@tool("lookup")
def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    barrier = MEET.pop(city, None)
    if barrier is not None:
        barrier.wait()
    return lookup_result(city, units)


@pytest.fixture(scope="module")
def instrumented() -> Iterator[Instrumented]:
    it = Instrumented([CrewAIInstrumentor(), OpenAIInstrumentor()])
    yield it
    it.close()


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded_on(instrumented)


@pytest.fixture
def hooked(g: Guarded) -> Iterator[Guarded]:
    """The adapter registered globally, as its docstring says; unregistered afterwards."""
    hook = register_repeat_guard_hook(guard=g.guard, inbox=g.inbox)
    yield g
    assert unregister_before_llm_call_hook(hook)
    assert hook not in get_before_llm_call_hooks()


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(REPEAT3, by_prompt={"Lyon": ONE_CALL}) as fake:
        yield fake


def make_crew(server: FakeOpenAI) -> Crew:
    """One agent, one task ("Weather in {city}?", filled from the kickoff inputs), the ``lookup`` tool."""
    llm = LLM(model="openai/gpt-4o-mini", base_url=server.base_url, api_key="offline")
    agent = Agent(
        role="weather agent", goal="answer weather questions", backstory="a forecaster", llm=llm, tools=[lookup]
    )
    task = Task(description="Weather in {city}?", expected_output="the weather", agent=agent)
    return Crew(agents=[agent], tasks=[task])


def conversation(server: FakeOpenAI, city: str) -> list[list[tuple[str, str]]]:
    """The (role, text) requests of the run prompted about ``city``."""
    (requests,) = [c for c in server.conversations() if f"Weather in {city}?" in str(c[0]["messages"])]
    return [openai_messages(body) for body in requests]


def assert_overlapped(server: FakeOpenAI) -> None:
    """The two runs' requests overlapped in time: each run's first request came before the other's last."""
    order = ["Lyon" if "Weather in Lyon?" in str(body["messages"]) else "Paris" for body in server.requests]
    for one, other in (("Paris", "Lyon"), ("Lyon", "Paris")):
        assert order.index(one) < len(order) - 1 - order[::-1].index(other), order


def test_one_run_gets_the_gentle_reminder_in_its_fourth_request(hooked: Guarded, server: FakeOpenAI) -> None:
    out = make_crew(server).kickoff(inputs={"city": "Paris"})
    assert isinstance(out, CrewOutput) and out.raw == FINAL_ANSWER
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    assert [(r.tool_name, r.run_length, r.tier) for r in hooked.reminders] == [("lookup", 3, "gentle")]
    assert hooked.inbox.pending() == []


def test_a_concurrent_run_of_the_same_crew_gets_nothing(hooked: Guarded, server: FakeOpenAI) -> None:
    """Two runs at once of one crew definition, through ``kickoff_for_each_async``.

    CrewAI refuses two concurrent runs of one Agent instance, so it runs a copy of the crew (and
    of its agent) per input: the Paris run (REPEAT3) and the Lyon run (ONE_CALL) at once. Each
    run's first lookup waits for the other's, so the runs surely overlap.
    """

    async def both() -> Any:
        return await make_crew(server).kickoff_for_each_async(inputs=[{"city": "Paris"}, {"city": "Lyon"}])

    barrier = threading.Barrier(2, timeout=30)
    MEET.update(Paris=barrier, Lyon=barrier)
    try:
        outputs = asyncio.run(both())
    finally:
        MEET.clear()
    assert [o.raw for o in outputs] == [FINAL_ANSWER] * 2
    assert len(server.conversations()) == 2
    assert_overlapped(server)
    assert_gentle_reminder_delivered_once(conversation(server, "Paris"))
    lyon = conversation(server, "Lyon")
    assert len(lyon) == 2
    assert_nothing_delivered(lyon)
    assert [(r.tool_name, r.run_length, r.tier) for r in hooked.reminders] == [("lookup", 3, "gentle")]


def test_without_the_hook_nothing_reaches_the_model(g: Guarded, server: FakeOpenAI) -> None:
    """The same run with the guard but no adapter: the reminder stays in the inbox, the model never sees it."""
    make_crew(server).kickoff(inputs={"city": "Paris"})
    requests = conversation(server, "Paris")
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert len(g.inbox.pending()) == 1


def test_the_hook_never_raises_into_the_agent(
    g: Guarded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside any run the hook leaves the messages alone; a context that cannot take the reminder is logged."""
    hook = repeat_guard_llm_hook(guard=g.guard, inbox=g.inbox)
    context = LLMCallHookContext(messages=[{"role": "user", "content": "hi"}])
    assert hook(context) is None and context.messages == [{"role": "user", "content": "hi"}]

    class Broken:
        @property
        def messages(self) -> Any:
            raise RuntimeError("boom")

    due = Reminder("run-1", "a", "lookup", 3, 3, "gentle", "t", "{}", "0" * 32, "0" * 16)
    monkeypatch.setattr(_common, "take_reminders", lambda guard, inbox, context, framework: [due])
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        assert hook(Broken()) is None
    assert "could not add reminders" in caplog.text
    assert g.inbox.drain("run-1") == [due], "given back for the run's next request"
