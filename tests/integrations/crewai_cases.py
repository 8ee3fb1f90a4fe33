"""CrewAI 1.15 driven by the fake OpenAI server, shared by the OpenInference and the OpenLLMetry test modules.

CrewAI 1.15 calls the ``openai`` SDK natively (``LLM("openai/…")`` builds its own
``OpenAICompletion`` on ``openai.OpenAI``; LiteLLM is only a fallback for providers it has no
native client for, and is not installed here), so the model is pointed at the fake server with
``base_url`` and the OpenAI SDK is instrumented like any other client. Each module instruments
CrewAI and the OpenAI client once, on a module-scoped provider behind a :class:`Switchboard`.

Two CrewAI defaults shape what the spans show:

- **CrewAI stops a run itself at the 5th identical call** (since 1.15.29:
  ``crewai.utilities.agent_utils.MAX_REPEATED_TOOL_CALLS = 5``, a module constant with no
  setting; it counts (tool, arguments with sorted keys, result) over the whole run, not
  consecutively, and raises ``ToolExecutionFailedError`` out of ``Crew.kickoff``). The
  acceptance scenario needs six identical calls, so :func:`lift_crewai_stop` raises that
  constant for every test except those that ask for :func:`crewai_default_stop`.
- **The tool cache is opt-in** (``Crew(cache=False)`` by default since 1.15.x; 1.15.0 still
  had ``cache=True``). With ``Crew(cache=True)`` repeated identical calls are answered from the
  cache without running the tool, so they get no tool span of their own.

Telemetry: ``CREWAI_DISABLE_TELEMETRY``/``CREWAI_DISABLE_TRACKING`` keep CrewAI's anonymous
telemetry provider from being built (it is a private ``TracerProvider``; CrewAI 1.15 never sets
the global one), ``CREWAI_TRACING_ENABLED=false`` keeps its cloud trace listener off, and
:func:`no_network` fails the module if anything but 127.0.0.1 was dialled.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    LOOP,
    Guarded,
    Switchboard,
    assert_reminders_reached_model,
    assert_whole_chain,
    expected_whole_chain,
    lookup_result,
    make_guarded,
    openai_messages,
    require,
    wired,
)

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # read when CrewAI's telemetry singleton is built (on import)
os.environ["CREWAI_DISABLE_TRACKING"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"  # no upload of execution traces to CrewAI's service
os.environ.setdefault("OPENAI_API_KEY", "offline")
assert "OTEL_SDK_DISABLED" not in os.environ, "OTEL_SDK_DISABLED would also switch off the SDK under test"

require("crewai")
import crewai.utilities.agent_utils as crewai_agent_utils  # noqa: E402
from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.crews.crew_output import CrewOutput  # noqa: E402
from crewai.hooks import unregister_before_llm_call_hook  # noqa: E402
from crewai.tools import tool  # noqa: E402
from crewai.tools.tool_failure import ToolExecutionFailedError  # noqa: E402

from otel_repeat_guard.integrations.crewai import register_repeat_guard_hook  # noqa: E402

OUTER = "outer request"
REPEAT = "repeat_tool_guard.repeat"
REMINDER = "repeat_tool_guard.reminder"
TASK = "Weather in Paris?"
CREWAI_STOP = crewai_agent_utils.MAX_REPEATED_TOOL_CALLS

__all__ = ["ToolExecutionFailedError"]


@tool("lookup")
def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    time.sleep(0.005)  # a little real work, so that concurrent runs interleave
    return lookup_result(city, units)


@tool("broken_lookup")
def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


# -- fixtures (each test module imports them) ------------------------------------------------------


class Instrumented:
    """CrewAI and the OpenAI client instrumented once on a provider whose processors each test swaps."""

    def __init__(self, instrumentors: Sequence[Any]) -> None:
        self.board = Switchboard()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.board)
        self.instrumentors = list(instrumentors)
        for instrumentor in self.instrumentors:
            instrumentor.instrument(tracer_provider=self.provider)

    def outer(self) -> Any:
        return self.provider.get_tracer("test").start_as_current_span(OUTER)

    def close(self) -> None:
        for instrumentor in reversed(self.instrumentors):
            instrumentor.uninstrument()


@pytest.fixture(scope="module", autouse=True)
def no_network() -> Iterator[list[Any]]:
    """Refuse (and remember) every connection to anything but the loopback range."""
    dialled: list[Any] = []
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def local(address: Any) -> bool:
        if not isinstance(address, tuple):
            return True  # AF_UNIX
        host = str(address[0])
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host.split("%", maxsplit=1)[0]).is_loopback
        except ValueError:
            return False

    def guarded(real: Callable[..., Any]) -> Callable[..., Any]:
        def dial(self: socket.socket, address: Any) -> Any:
            if not local(address):
                dialled.append(address)
                raise ConnectionRefusedError(f"offline test: no connection to {address!r}")
            return real(self, address)

        return dial

    socket.socket.connect = guarded(connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(connect_ex)  # type: ignore[method-assign]
    yield dialled
    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
    assert dialled == [], f"the tests tried to reach the network: {dialled}"


def guarded_on(instrumented: Instrumented) -> Iterator[Guarded]:
    """The body of each module's ``g`` fixture: a fresh guard behind the module's switchboard."""
    guarded = make_guarded()
    instrumented.board.targets = guarded.processors
    yield guarded
    instrumented.board.targets = []


def fake_server() -> Iterator[FakeOpenAI]:
    """The body of each module's ``server`` fixture."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def lift_crewai_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the scenario's six identical calls run: CrewAI would end the run at the fifth."""
    monkeypatch.setattr(crewai_agent_utils, "MAX_REPEATED_TOOL_CALLS", 1000)


@pytest.fixture
def crewai_default_stop(lift_crewai_stop: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI as installed: a run ends with ToolExecutionFailedError at the fifth identical call."""
    monkeypatch.setattr(crewai_agent_utils, "MAX_REPEATED_TOOL_CALLS", CREWAI_STOP)


# -- building and running crews --------------------------------------------------------------------


def make_crew(server: FakeOpenAI, role: str = "weather agent", *, cache: bool = False) -> Crew:
    """One agent, one task, the two tools; the model is the fake server through CrewAI's native OpenAI client."""
    llm = LLM(model="openai/gpt-4o-mini", base_url=server.base_url, api_key="offline")
    agent = Agent(
        role=role, goal="answer weather questions", backstory="a forecaster", llm=llm, tools=[lookup, broken_lookup]
    )
    task = Task(description=TASK, expected_output="the weather", agent=agent)
    return Crew(agents=[agent], tasks=[task], cache=cache)


async def _gather(*runs: Any) -> list[Any]:
    return list(await asyncio.gather(*runs))


def run_two_crews(a: Crew, b: Crew, outer: Any | None = None) -> list[str]:
    """Two crews at once (``kickoff_async`` runs each ``kickoff`` on a worker thread, context copied)."""

    async def both() -> list[Any]:
        if outer is None:
            return await _gather(a.kickoff_async(), b.kickoff_async())
        with outer:
            return await _gather(a.kickoff_async(), b.kickoff_async())

    return [out.raw for out in asyncio.run(both()) if isinstance(out, CrewOutput)]


def run_one_crew_twice(crew: Crew, outer: Any | None = None) -> list[str]:
    """CrewAI's own way to run one crew concurrently: ``kickoff_for_each_async`` (a copy of the crew per input).

    CrewAI refuses two concurrent runs of one Agent instance ("Executor is already running. Cannot
    invoke the same executor instance concurrently."), so the copies are as close as it gets.
    """

    async def both() -> Any:
        if outer is None:
            return await crew.kickoff_for_each_async(inputs=[{}, {}])
        with outer:
            return await crew.kickoff_for_each_async(inputs=[{}, {}])

    return [out.raw for out in asyncio.run(both()) if isinstance(out, CrewOutput)]


def kickoff(crew: Crew) -> str:
    """One run; its final answer."""
    out = crew.kickoff()
    assert isinstance(out, CrewOutput)
    return out.raw


def kickoff_twice(crew: Crew) -> list[str]:
    """A second prompt: the same crew kicked off again (CrewAI starts a new conversation each time)."""
    return [kickoff(crew), kickoff(crew)]


def kickoff_reminded(instrumented: Instrumented, g: Guarded, script: Any) -> FakeOpenAI:
    """One run of a crew on ``script`` with the reminder hook registered and ``g`` behind the board; its server."""
    hook = register_repeat_guard_hook(guard=g.guard, inbox=g.inbox)
    try:
        with FakeOpenAI(script) as server, wired(instrumented.board, g):
            assert kickoff(make_crew(server)) == FINAL_ANSWER
    finally:
        unregister_before_llm_call_hook(hook)
    return server


def test_the_whole_chain_agrees(instrumented: Instrumented, stored: Guarded) -> None:
    """Issue 21, item 5: the loop through the real crew, with the reminder hook registered, into the store:
    reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    server = kickoff_reminded(instrumented, stored, LOOP)
    assert_reminders_reached_model([openai_messages(body) for body in server.requests], loop=True)
    assert_whole_chain(stored, expected_whole_chain())


def test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures(
    instrumented: Instrumented, hand_wired: Guarded
) -> None:
    """Issue 40, item 1: ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter``, as docs/runtimes.md
    showed (under OpenLLMetry the store kept no tool call while facts were opt-in): the store's wasted tokens are
    the metric's, one run key, every model call on the run's timeline."""
    kickoff_reminded(instrumented, hand_wired, LOOP)
    assert_whole_chain(hand_wired, expected_whole_chain())


# -- reading the spans -----------------------------------------------------------------------------


def events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


def spans_by_parent(g: Guarded, is_model_call: Callable[[ReadableSpan], bool]) -> dict[int, list[ReadableSpan]]:
    """The model-call spans of each agent span (their parent), in the order they started."""
    out: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in sorted(g.exporter.get_finished_spans(), key=lambda s: s.start_time or 0):
        if is_model_call(span):
            assert span.parent is not None, span.name
            out[span.parent.span_id].append(span)
    return dict(out)


def assert_interleaved_runs(g: Guarded, is_model_call: Callable[[ReadableSpan], bool]) -> None:
    """The model calls of the runs really alternated in time (ended in a mixed order)."""
    run_of = {m.context.span_id: run for run, ms in spans_by_parent(g, is_model_call).items() for m in ms}
    order = [run_of[s.context.span_id] for s in g.exporter.get_finished_spans() if s.context.span_id in run_of]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


def dump(spans: Sequence[ReadableSpan], name: str) -> None:
    """With OTEL_REPEAT_GUARD_SPAN_DUMP_DIR set, write every span (name, scope, parent, attributes, events) there."""
    folder = os.environ.get("OTEL_REPEAT_GUARD_SPAN_DUMP_DIR")
    if not folder:
        return
    path = os.path.join(folder, f"spans-{name}.txt")
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    with open(path, "w", encoding="utf-8") as out:
        for s in spans:
            parent = names.get(s.parent.span_id, "?") if s.parent else None
            scope = s.instrumentation_scope.name if s.instrumentation_scope else None
            out.write(f"=== {s.name} | scope {scope} | parent {parent} | status {s.status.status_code.name}\n")
            for key, value in (s.attributes or {}).items():
                out.write(f"    {key} = " + str(value)[:300].replace("\n", " ") + "\n")
            for e in s.events:
                attrs = {k: str(v)[:200] for k, v in (e.attributes or {}).items()}
                out.write(f"    EVENT {e.name} {attrs}\n")
