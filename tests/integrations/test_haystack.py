"""Haystack 3.x ``Agent`` with openinference-instrumentation-haystack, its OpenAIChatGenerator pointed at the fake OpenAI server.

What the instrumentation records (haystack-ai 3.4, openinference-instrumentation-haystack 0.1.46):

- the run is an ``Agent.run`` span (or ``Agent.run_async``) of kind CHAIN, not AGENT: no span is
  marked as an agent run, so the run must be found as the span that encloses the model calls;
- each model call is an ``OpenAIChatGenerator.run`` LLM span, a child of the run span, whose
  ``llm.output_messages.0.message.tool_calls.{j}.tool_call.function.{name,arguments}`` say which
  calls the model asked for, WITHOUT ``tool_call.id`` (the instrumentation does not record it);
- tools run inside the agent (``haystack.components.agents.tool_calling._run_tool``, not a
  component): there is no tool span at all, and nothing says that a tool failed (tool-result
  messages are recorded with their role only).

So every call is one the model requested and that never got a tool span: the guard counts it
when the run's next model call starts, and puts its events on that model-call span.

The second parametrization also instruments the OpenAI client (openinference-instrumentation-
openai), as deployments often do: each request then shows twice, on the generator span without
ids and on its child ``ChatCompletion`` LLM span with ids. It must still be counted once, in the
run of the ``Agent.run`` span: the generator's span carries the request's messages from its start
(its kind only from its end), so it is a model call, never the run, and the client's span, the
first model call of the request to start, is where the previous request's calls are counted.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    PARIS,
    SHORT_SCRIPT,
    Guarded,
    Switchboard,
    guard_events,
    lookup_result,
    make_guarded,
    require,
)

os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # no usage upload: nothing may leave 127.0.0.1
os.environ.setdefault("OPENAI_API_KEY", "offline")
require("haystack")
from haystack.components.agents import Agent  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.tools import tool  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from openinference.instrumentation.haystack import HaystackInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

SCOPE = "openinference.instrumentation.haystack"
CLIENT_SCOPE = "openinference.instrumentation.openai"
OUTER = "outer request"
REPEAT = "repeat_tool_guard.repeat"
REMINDER = "repeat_tool_guard.reminder"
PROMPT = [ChatMessage.from_user("Weather in Paris?")]


@tool
def lookup(city: str, units: str) -> str:
    """Look up the weather."""
    return lookup_result(city, units)


@tool
def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"the weather service for {city} is down")


class Instrumented:
    def __init__(self, with_openai: bool) -> None:
        self.board = Switchboard()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.board)
        self.instrumentors: list[Any] = [HaystackInstrumentor()] + ([OpenAIInstrumentor()] if with_openai else [])
        for instrumentor in self.instrumentors:
            instrumentor.instrument(tracer_provider=self.provider)

    def outer(self) -> Any:
        return self.provider.get_tracer("test").start_as_current_span(OUTER)


@pytest.fixture(scope="module", params=["haystack", "haystack+openai-client"])
def instrumented(request: pytest.FixtureRequest) -> Iterator[Instrumented]:
    it = Instrumented(with_openai=request.param != "haystack")
    yield it
    for instrumentor in reversed(it.instrumentors):
        instrumentor.uninstrument()


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    guarded = make_guarded()
    instrumented.board.targets = guarded.processors
    yield guarded
    instrumented.board.targets = []


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def make_agent(server: FakeOpenAI, system_prompt: str | None = None) -> Agent:
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini", api_base_url=server.base_url, api_key=Secret.from_token("offline")
    )
    # Tool failures go back to the model as a tool result, as harnesses do.
    return Agent(
        chat_generator=generator,
        tools=[lookup, broken_lookup],
        system_prompt=system_prompt,
        raise_on_tool_invocation_failure=False,
    )


def _answer(result: dict[str, Any]) -> str | None:
    return result["messages"][-1].text


async def _both(*runs: Any) -> list[Any]:
    return list(await asyncio.gather(*runs))


# -- reading the spans -----------------------------------------------------------------------------


def _kind(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get("openinference.span.kind")


def _is_run(span: ReadableSpan) -> bool:
    return span.name in {"Agent.run", "Agent.run_async"}


def _is_model_call(span: ReadableSpan) -> bool:
    """The generator's span (not the OpenAI client's ChatCompletion under it)."""
    return span.name.startswith("OpenAIChatGenerator.") and _kind(span) == "LLM"


def model_calls_by_run(g: Guarded) -> dict[int, list[ReadableSpan]]:
    """The generator spans of each ``Agent.run`` span, in the order they started."""
    spans = g.exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]
    out: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        if not _is_model_call(span):
            continue
        assert span.parent is not None
        run = by_id[span.parent.span_id]
        assert _is_run(run), run.name
        out[run.context.span_id].append(span)  # type: ignore[union-attr]
    return dict(out)


def _events(g: Guarded, model: ReadableSpan, name: str) -> list[dict[str, Any]]:
    """The guard's ``name`` events of the request of the generator span ``model``: on that span, or on the
    client's ``ChatCompletion`` span inside it (where they go when the client is instrumented)."""
    spans = [model, *(s for s in g.exporter.get_finished_spans() if _is_client_call(s, model))]
    return [dict(e.attributes or {}) for span in spans for e in span.events if e.name == name]


def _is_client_call(span: ReadableSpan, model: ReadableSpan) -> bool:
    """``span`` is the OpenAI client's model-call span inside the generator span ``model``."""
    return span.parent is not None and span.parent.span_id == model.context.span_id and _kind(span) == "LLM"  # type: ignore[union-attr]


def assert_guard_events_only_on_model_calls(g: Guarded) -> None:
    for span in g.exporter.get_finished_spans():
        if _kind(span) != "LLM":  # the generator's span, or the client's inside it
            assert not [e.name for e in span.events if e.name.startswith("repeat_tool_guard")], span.name


def assert_scenario_run(g: Guarded, models: list[ReadableSpan]) -> str:
    """One run of SCRIPT seen only through the model's requests.

    Call ``k`` (1-based) is counted when model call ``k + 1`` starts, and its events go on that
    span: repeats (run lengths 2..6, then 2 for the second failing call) on model calls 3..7 and 9,
    the gentle reminder on model call 4, the detailed one on model call 6. Returns the chain key.
    """
    assert len(models) == 9  # 8 tool calls, then the answer
    repeats = [_events(g, m, REPEAT) for m in models]
    assert [len(r) for r in repeats] == [0, 0, 1, 1, 1, 1, 1, 0, 1], [m.name for m in models]
    flat = [r for rs in repeats for r in rs]
    assert [r["repeat_tool_guard.run_length"] for r in flat] == [2, 3, 4, 5, 6, 2]
    assert [r["gen_ai.tool.name"] for r in flat] == ["lookup"] * 5 + ["broken_lookup"]
    # Haystack's spans never say that broken_lookup failed: the flag cannot be set.
    assert [r["repeat_tool_guard.error"] for r in flat] == [False] * 6
    (agent_id,) = {r["repeat_tool_guard.agent_id"] for r in flat}
    reminders = [(i, r["repeat_tool_guard.tier"]) for i, m in enumerate(models) for r in _events(g, m, REMINDER)]
    assert reminders == [(3, "gentle"), (5, "detailed")]
    mine = [r for r in g.reminders if r.agent_id == agent_id]
    assert [(r.tool_name, r.run_length, r.tier) for r in mine] == [("lookup", 3, "gentle"), ("lookup", 5, "detailed")]
    assert mine[1].arguments_preview == json.dumps(PARIS, separators=(",", ":"))
    return agent_id


def assert_separate_runs(g: Guarded, runs: int, traces: int) -> None:
    by_run = model_calls_by_run(g)
    assert len(by_run) == runs
    assert len({m.context.trace_id for ms in by_run.values() for m in ms}) == traces  # type: ignore[union-attr]
    ids = [assert_scenario_run(g, models) for models in by_run.values()]
    assert len(set(ids)) == runs
    assert len(g.reminders) == 2 * runs
    assert_guard_events_only_on_model_calls(g)
    assert g.unguarded() == {}


def assert_interleaved(g: Guarded) -> None:
    """The model calls of the runs really alternated in time."""
    run_of = {m.context.span_id: run for run, ms in model_calls_by_run(g).items() for m in ms}  # type: ignore[union-attr]
    order = [run_of[s.context.span_id] for s in g.exporter.get_finished_spans() if s.context.span_id in run_of]  # type: ignore[union-attr]
    first_of_other = next(i for i, r in enumerate(order) if r != order[0])
    assert order[0] in order[first_of_other:], "the runs did not interleave"


def short_run_lengths(g: Guarded) -> list[list[int]]:
    """Run lengths from the repeat events of each run (a call of run length 1 has none)."""
    return [
        [r["repeat_tool_guard.run_length"] for m in models for r in _events(g, m, REPEAT)]
        for models in model_calls_by_run(g).values()
    ]


# -- the scenario ----------------------------------------------------------------------------------


def test_one_run(g: Guarded, server: FakeOpenAI, instrumented: Instrumented) -> None:
    assert _answer(make_agent(server).run(messages=PROMPT)) == FINAL_ANSWER
    assert len(server.requests) == 9
    assert_separate_runs(g, runs=1, traces=1)
    spans = g.exporter.get_finished_spans()
    # The span tree: one CHAIN run span at the root, no AGENT span, no TOOL span.
    (run,) = [s for s in spans if s.parent is None]
    assert (run.name, _kind(run), run.instrumentation_scope.name) == ("Agent.run", "CHAIN", SCOPE)  # type: ignore[union-attr]
    assert not [s.name for s in spans if _kind(s) in {"AGENT", "TOOL"}]
    scope = CLIENT_SCOPE if len(instrumented.instrumentors) == 2 else SCOPE  # the first model call of each request
    assert guard_events(g) and all(s.instrumentation_scope.name == scope for s, _ in guard_events(g))  # type: ignore[union-attr]
    models = model_calls_by_run(g)[run.context.span_id]  # type: ignore[union-attr]
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    assert [(m.attributes or {}).get(prefix + "function.name") for m in models] == [
        *["lookup"] * 6,
        *["broken_lookup"] * 2,
        None,
    ]
    assert not any(prefix + "id" in (m.attributes or {}) for m in models)
    clients = [s for s in spans if s.name == "ChatCompletion"]
    assert len(clients) == (9 if len(instrumented.instrumentors) == 2 else 0)
    assert all(prefix + "id" in (c.attributes or {}) for c in clients[:8])


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server:
        agent = make_agent(server)
        first = agent.run(messages=PROMPT)
        second = agent.run(messages=[*first["messages"], ChatMessage.from_user("And again?")])
    assert (_answer(first), _answer(second)) == (FINAL_ANSWER, FINAL_ANSWER)
    assert short_run_lengths(g) == [[2], [2]]
    assert_guard_events_only_on_model_calls(g)
    assert g.unguarded() == {}


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_agent(server, "You report the weather."), make_agent(server, "You plan trips.")
    results = asyncio.run(_both(a.run_async(messages=PROMPT), b.run_async(messages=PROMPT)))
    assert [_answer(r) for r in results] == [FINAL_ANSWER] * 2
    assert_separate_runs(g, runs=2, traces=2)
    assert_interleaved(g)


def test_two_concurrent_runs_of_one_agent_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    agent = make_agent(server)
    results = asyncio.run(_both(agent.run_async(messages=PROMPT), agent.run_async(messages=PROMPT)))
    assert [_answer(r) for r in results] == [FINAL_ANSWER] * 2
    assert_separate_runs(g, runs=2, traces=2)
    assert_interleaved(g)


# -- every run under one shared outer span (an HTTP request serving several runs) ---------------


def test_under_one_outer_span_a_second_prompt_gets_a_fresh_chain(g: Guarded, instrumented: Instrumented) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server, instrumented.outer():
        agent = make_agent(server)
        first = agent.run(messages=PROMPT)
        agent.run(messages=[*first["messages"], ChatMessage.from_user("And again?")])
    assert short_run_lengths(g) == [[2], [2]]
    assert_guard_events_only_on_model_calls(g)


def test_under_one_outer_span_two_concurrent_agents_have_their_own_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    a, b = make_agent(server, "You report the weather."), make_agent(server, "You plan trips.")

    async def both() -> list[Any]:
        with instrumented.outer():
            return await _both(a.run_async(messages=PROMPT), b.run_async(messages=PROMPT))

    assert [_answer(r) for r in asyncio.run(both())] == [FINAL_ANSWER] * 2
    assert_separate_runs(g, runs=2, traces=1)
    assert_interleaved(g)


def test_under_one_outer_span_two_concurrent_runs_of_one_agent_have_separate_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    agent = make_agent(server)

    async def both() -> list[Any]:
        with instrumented.outer():
            return await _both(agent.run_async(messages=PROMPT), agent.run_async(messages=PROMPT))

    assert [_answer(r) for r in asyncio.run(both())] == [FINAL_ANSWER] * 2
    assert_separate_runs(g, runs=2, traces=1)
    assert_interleaved(g)


def test_doctor_finds_no_blind_spot(g: Guarded, server: FakeOpenAI) -> None:
    from otel_repeat_guard.cli.doctor import diagnose

    make_agent(server).run(messages=PROMPT)
    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])
