"""CrewAI 1.15 with openinference-instrumentation-crewai, and openinference-instrumentation-openai on its model client.

What the instrumentations record (crewai 1.15.30, openinference-instrumentation-crewai 1.1.21,
openinference-instrumentation-openai 0.1.66):

- ``Crew_<id>.kickoff`` (CHAIN) at the root, ``<role>._execute_core`` (AGENT) for the agent's task
  under it: the agent run;
- a TOOL span ``<tool>.run`` per executed tool, a child of the AGENT span, with ``tool.name`` and
  the model's arguments in ``input.value``, and WITHOUT the tool-call id; a failing tool's span
  has status ERROR and an ``exception`` event;
- a ``ChatCompletion`` LLM span per model call, also a child of the AGENT span, whose
  ``llm.output_messages.0.message.tool_calls.0.tool_call.{id,function.name,function.arguments}``
  say which call the model asked for.

So by default every call has its tool span and the guard needs nothing more. With the tool cache
(``Crew(cache=True)``, opt-in), a repeated identical call is answered from the cache: no tool
span, only the model's request says it was made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from .crewai_cases import (  # noqa: F401  (autouse fixtures)
    CREWAI_STOP,
    OUTER,
    REMINDER,
    REPEAT,
    Instrumented,
    ToolExecutionFailedError,
    assert_interleaved_runs,
    crewai_default_stop,
    dump,
    events,
    fake_server,
    guarded_on,
    kickoff,
    kickoff_twice,
    lift_crewai_stop,
    make_crew,
    no_network,
    run_one_crew_twice,
    run_two_crews,
    spans_by_parent,
    test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures,
    test_the_whole_chain_agrees,
)
from .fake_openai import FakeOpenAI
from .scenario import (
    FINAL_ANSWER,
    PARIS,
    PARIS_REORDERED,
    SHORT_SCRIPT,
    Guarded,
    assert_no_event_on_non_tool_spans,
    assert_scenario_run,
    hand_wired,  # noqa: F401  (a fixture)
    is_tool_span,
    require,
    run_lengths,
    stored,  # noqa: F401  (a fixture)
    tool_spans_by_run,
)

# CrewAI 1.15 warns about its own deprecated fields on every crew it builds.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai")

require("openinference.instrumentation.crewai")
from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

SCOPE = "openinference.instrumentation.crewai"
CALL = "llm.output_messages.0.message.tool_calls.0.tool_call."


@pytest.fixture(scope="module")
def instrumented() -> Iterator[Instrumented]:
    it = Instrumented([CrewAIInstrumentor(), OpenAIInstrumentor()])
    yield it
    it.close()


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded_on(instrumented)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    yield from fake_server()


def _kind(span: ReadableSpan) -> object:
    return (span.attributes or {}).get("openinference.span.kind")


def is_model_call(span: ReadableSpan) -> bool:
    return span.name == "ChatCompletion" and _kind(span) == "LLM"


def assert_runs(g: Guarded, runs: int, traces: int, outer: str | None = None) -> None:
    """``runs`` agent runs, each followed SCRIPT in a chain of its own, seen on the tool spans alone."""
    by_run = tool_spans_by_run(g, outer)
    assert len(by_run) == runs
    assert len({s.context.trace_id for spans in by_run.values() for s in spans}) == traces
    ids = [assert_scenario_run(g, spans) for spans in by_run.values()]
    assert len(set(ids)) == runs
    assert len(g.reminders) == 2 * runs
    assert_no_event_on_non_tool_spans(g)  # nothing counted twice from the model's requests
    assert g.unguarded() == {}


def short_run_lengths(g: Guarded, outer: str | None = None) -> list[list[int]]:
    return [run_lengths(spans) for spans in tool_spans_by_run(g, outer).values()]


# -- the scenario ----------------------------------------------------------------------------------


def test_one_run(g: Guarded, server: FakeOpenAI) -> None:
    assert kickoff(make_crew(server)) == FINAL_ANSWER
    assert len(server.requests) == 9
    assert_runs(g, runs=1, traces=1)
    spans = g.exporter.get_finished_spans()
    dump(spans, "crewai-openinference")
    (root,) = [s for s in spans if s.parent is None]
    assert root.name.startswith("Crew_") and root.name.endswith(".kickoff") and _kind(root) == "CHAIN"
    (agent,) = [s for s in spans if _kind(s) == "AGENT"]
    assert (agent.name, agent.parent.span_id) == ("weather agent._execute_core", root.context.span_id)  # type: ignore[union-attr]
    tools = [s for s in spans if is_tool_span(s)]
    assert [s.name for s in tools] == ["lookup.run"] * 6 + ["broken_lookup.run"] * 2
    assert all(s.parent.span_id == agent.context.span_id for s in tools)  # type: ignore[union-attr]
    assert all(s.instrumentation_scope.name == SCOPE for s in tools)  # type: ignore[union-attr]
    assert [json.loads(str((s.attributes or {})["input.value"])) for s in tools] == [PARIS] * 5 + [PARIS_REORDERED] + [
        PARIS
    ] * 2
    assert not any("gen_ai.tool.call.id" in (s.attributes or {}) for s in tools)  # no call id on the tool span
    assert [s.status.status_code.name for s in tools] == ["OK"] * 6 + ["ERROR"] * 2
    (models,) = spans_by_parent(g, is_model_call).values()
    assert len(models) == 9 and models[0].parent.span_id == agent.context.span_id  # type: ignore[union-attr]
    assert [(m.attributes or {}).get(CALL + "function.name") for m in models] == ["lookup"] * 6 + [
        "broken_lookup"
    ] * 2 + [None]
    assert all(CALL + "id" in (m.attributes or {}) for m in models[:8])
    assert [(s.name, e["repeat_tool_guard.tier"]) for s, e in _reminder_events(g)] == [
        ("lookup.run", "gentle"),
        ("lookup.run", "detailed"),
    ]


def _reminder_events(g: Guarded) -> list[tuple[ReadableSpan, dict[str, object]]]:
    return [(s, e) for s in g.exporter.get_finished_spans() for e in events(s, REMINDER)]


@pytest.mark.usefixtures("crewai_default_stop")
def test_crewai_stops_the_run_itself_at_the_fifth_identical_call(g: Guarded, server: FakeOpenAI) -> None:
    """As installed: CrewAI raises at the 5th identical call; the guard's reminders at 3 and 5 came first."""
    with pytest.raises(ToolExecutionFailedError, match="same arguments 5 times"):
        make_crew(server).kickoff()
    assert len(server.requests) == CREWAI_STOP == 5
    (spans,) = tool_spans_by_run(g).values()
    assert run_lengths(spans) == [1, 2, 3, 4, 5]
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert_no_event_on_non_tool_spans(g)
    assert g.unguarded() == {}


def test_with_the_tool_cache_cached_repeats_are_counted_from_the_model_requests(g: Guarded, server: FakeOpenAI) -> None:
    """``Crew(cache=True)``: calls 2-5 are answered from the cache and get no tool span.

    The guard counts them from the model's requests, each when the next model call starts, with its
    events on that ``ChatCompletion`` span; the tool spans of calls 1, 6, 7, 8 are the same calls as
    the requests before them (matched without an id: the tool span has none) and count once.
    """
    assert kickoff(make_crew(server, cache=True)) == FINAL_ANSWER
    spans = g.exporter.get_finished_spans()
    tools = [s for s in spans if is_tool_span(s)]
    assert [(s.name, json.loads(str((s.attributes or {})["input.value"]))) for s in tools] == [
        ("lookup.run", PARIS),
        ("lookup.run", PARIS_REORDERED),  # the cache key is the unsorted JSON: a miss
        ("broken_lookup.run", PARIS),  # failures are never cached
        ("broken_lookup.run", PARIS),
    ]
    (models,) = spans_by_parent(g, is_model_call).values()
    assert len(models) == 9
    ids = [(m.attributes or {}).get(CALL + "id") for m in models]
    on_models = [
        (i, e["repeat_tool_guard.run_length"], e["gen_ai.tool.call.id"], e["gen_ai.tool.name"])
        for i, m in enumerate(models)
        for e in events(m, REPEAT)
    ]
    assert on_models == [(k, k, ids[k - 1], "lookup") for k in (2, 3, 4, 5)]
    assert [(i, e["repeat_tool_guard.tier"]) for i, m in enumerate(models) for e in events(m, REMINDER)] == [
        (3, "gentle"),
        (5, "detailed"),
    ]
    assert run_lengths(tools) == [1, 6, 1, 2]
    assert [e["repeat_tool_guard.error"] for s in tools for e in events(s, REPEAT)] == [False, True]
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert g.unguarded() == {}


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server:
        assert kickoff_twice(make_crew(server)) == [FINAL_ANSWER] * 2
    assert short_run_lengths(g) == [[1, 2], [1, 2]]
    assert_no_event_on_non_tool_spans(g)


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_crew(server, "weather agent"), make_crew(server, "travel agent")
    assert run_two_crews(a, b) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=2)
    assert {r.agent_name for r in g.reminders} == {"weather agent._execute_core", "travel agent._execute_core"}
    assert_interleaved_runs(g, is_model_call)


def test_two_concurrent_runs_of_one_crew_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    assert run_one_crew_twice(make_crew(server)) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=2)
    assert_interleaved_runs(g, is_model_call)


# -- every run under one shared outer span (an HTTP request serving several runs) ---------------


def test_under_one_outer_span_a_second_prompt_gets_a_fresh_chain(g: Guarded, instrumented: Instrumented) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server, instrumented.outer():
        kickoff_twice(make_crew(server))
    assert short_run_lengths(g, OUTER) == [[1, 2], [1, 2]]
    assert_no_event_on_non_tool_spans(g)


def test_under_one_outer_span_two_concurrent_agents_have_their_own_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    a, b = make_crew(server, "weather agent"), make_crew(server, "travel agent")
    assert run_two_crews(a, b, instrumented.outer()) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=1, outer=OUTER)
    assert_interleaved_runs(g, is_model_call)


def test_under_one_outer_span_two_concurrent_runs_of_one_crew_have_separate_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    assert run_one_crew_twice(make_crew(server), instrumented.outer()) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=1, outer=OUTER)
    assert_interleaved_runs(g, is_model_call)


def test_doctor_finds_no_blind_spot(g: Guarded, server: FakeOpenAI) -> None:
    from otel_repeat_guard.cli.doctor import diagnose

    make_crew(server, cache=True).kickoff()
    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])
