"""CrewAI 1.15 with OpenLLMetry's opentelemetry-instrumentation-crewai and -openai, TRACELOOP_TRACE_CONTENT=true.

What the instrumentations record (crewai 1.15.30, opentelemetry-instrumentation-crewai and
-openai 0.62.4):

- ``crewai.workflow`` at the root, ``<task description>.task`` under it and ``<role>.agent``
  (``traceloop.span.kind = agent``, ``gen_ai.operation.name = invoke_agent``) under that: the agent
  run. Its ``gen_ai.agent.id`` is the Agent object's id: the same for every run of that agent;
- NO tool span: CrewAI runs tools inside the agent span, and this instrumentation does not wrap
  them. Nothing says that a tool ran, nor that it failed;
- an ``openai.chat`` span per model call, a child of the agent span, whose ``gen_ai.output.messages``
  (GenAI shape: parts ``{type: tool_call, id, name, arguments}``) say which call the model asked for.

So every call is one the model requested and that never got a tool span: the guard counts it
when the run's next model call starts (or when the run ends first), and puts its events on that
span. With ``TRACELOOP_TRACE_CONTENT=false`` the model spans keep only
``gen_ai.response.finish_reasons = ('tool_call',)``: no name, no arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from .crewai_cases import (  # noqa: F401  (autouse fixtures)
    CREWAI_STOP,
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
    kickoff_reminded,
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
    NO_PROGRESS_CONFIG,
    NO_PROGRESS_SCRIPT,
    PARIS,
    SHORT_SCRIPT,
    Guarded,
    assert_no_progress_from_the_model_requests,
    guard_events,
    hand_wired,  # noqa: F401  (a fixture)
    is_tool_span,
    openai_messages,
    require,
    stored,  # noqa: F401  (a fixture)
    with_store,
)

# CrewAI 1.15 warns about its own deprecated fields on every crew it builds.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai")

require("opentelemetry.instrumentation.crewai")
from opentelemetry.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from opentelemetry.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

MODEL_SCOPE = "opentelemetry.instrumentation.openai.v1"


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


@pytest.fixture(autouse=True)
def content_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")  # read on every model call


def is_model_call(span: ReadableSpan) -> bool:
    return span.name == "openai.chat"


def _requested(model: ReadableSpan) -> list[dict[str, Any]]:
    """The tool_call parts of a model span's ``gen_ai.output.messages``."""
    messages = json.loads(str((model.attributes or {}).get("gen_ai.output.messages", "[]")))
    return [p for m in messages for p in m.get("parts", []) if p.get("type") == "tool_call"]


def _guard_events_off_model_calls(g: Guarded) -> list[str]:
    return [
        s.name
        for s in g.exporter.get_finished_spans()
        if not is_model_call(s)
        for e in s.events
        if e.name.startswith("repeat_tool_guard")
    ]


def assert_scenario_run(g: Guarded, models: list[ReadableSpan]) -> str:
    """One run of SCRIPT seen only through the model's requests.

    Call ``k`` (1-based) is counted when model call ``k + 1`` starts, and its events go on that
    span: repeats (run lengths 2..6, then 2 for the second failing call) on model calls 3..7 and 9,
    the gentle reminder on model call 4, the detailed one on model call 6. Returns the chain key.
    """
    assert len(models) == 9  # 8 tool calls, then the answer
    ids = [[c["id"] for c in _requested(m)] for m in models]
    assert [len(i) for i in ids] == [1] * 8 + [0]
    repeats = [events(m, REPEAT) for m in models]
    assert [len(r) for r in repeats] == [0, 0, 1, 1, 1, 1, 1, 0, 1], [m.name for m in models]
    flat = [r for rs in repeats for r in rs]
    assert [r["repeat_tool_guard.run_length"] for r in flat] == [2, 3, 4, 5, 6, 2]
    assert [r["gen_ai.tool.name"] for r in flat] == ["lookup"] * 5 + ["broken_lookup"]
    assert [r["gen_ai.tool.call.id"] for r in flat] == [ids[k][0] for k in (1, 2, 3, 4, 5, 7)]
    # Nothing in these spans says that broken_lookup failed: the flag cannot be set.
    assert [r["repeat_tool_guard.error"] for r in flat] == [False] * 6
    (agent_id,) = {str(r["repeat_tool_guard.agent_id"]) for r in flat}
    reminders = [(i, r["repeat_tool_guard.tier"]) for i, m in enumerate(models) for r in events(m, REMINDER)]
    assert reminders == [(3, "gentle"), (5, "detailed")]
    mine = [r for r in g.reminders if r.agent_id == agent_id]
    assert [(r.tool_name, r.run_length, r.tier) for r in mine] == [("lookup", 3, "gentle"), ("lookup", 5, "detailed")]
    assert mine[1].arguments_preview == json.dumps(PARIS, separators=(",", ":"))
    return agent_id


def assert_runs(g: Guarded, runs: int, traces: int) -> None:
    by_run = spans_by_parent(g, is_model_call)
    assert len(by_run) == runs
    assert len({m.context.trace_id for ms in by_run.values() for m in ms}) == traces
    ids = [assert_scenario_run(g, models) for models in by_run.values()]
    assert len(set(ids)) == runs
    assert len(g.reminders) == 2 * runs
    assert _guard_events_off_model_calls(g) == []
    assert g.unguarded() == {}


def short_run_lengths(g: Guarded) -> list[list[int]]:
    """Run lengths from the repeat events of each run (a call of run length 1 has none)."""
    return [
        [r["repeat_tool_guard.run_length"] for m in models for r in events(m, REPEAT)]
        for models in spans_by_parent(g, is_model_call).values()
    ]


# -- the scenario ----------------------------------------------------------------------------------


def test_one_run(g: Guarded, server: FakeOpenAI) -> None:
    assert kickoff(make_crew(server)) == FINAL_ANSWER
    assert len(server.requests) == 9
    assert_runs(g, runs=1, traces=1)
    spans = g.exporter.get_finished_spans()
    dump(spans, "crewai-openllmetry")
    by_name = {s.name: s for s in spans}
    assert not [s.name for s in spans if is_tool_span(s)]  # tools run inside the agent span
    agent, task, root = by_name["weather agent.agent"], by_name["Weather in Paris?.task"], by_name["crewai.workflow"]
    assert task.parent is not None and agent.parent is not None
    assert (root.parent, task.parent.span_id, agent.parent.span_id) == (
        None,
        root.context.span_id,
        task.context.span_id,
    )
    assert (agent.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
    assert (agent.attributes or {})["traceloop.span.kind"] == "agent"
    (models,) = spans_by_parent(g, is_model_call).values()
    assert models[0].parent.span_id == agent.context.span_id  # type: ignore[union-attr]
    assert {m.instrumentation_scope.name for m in models} == {MODEL_SCOPE}  # type: ignore[union-attr]
    assert [(c["name"], c["arguments"]) for m in models for c in _requested(m)][:6] == [("lookup", PARIS)] * 6


@pytest.mark.usefixtures("crewai_default_stop")
def test_crewai_stops_the_run_itself_at_the_fifth_identical_call(g: Guarded, server: FakeOpenAI) -> None:
    """As installed: CrewAI raises at the 5th identical call. Calls 2-4 are counted on model calls 3-5;
    call 5 has no next model call: it is counted when the run ends, with its events on the agent span."""
    with pytest.raises(ToolExecutionFailedError, match="same arguments 5 times"):
        make_crew(server).kickoff()
    assert len(server.requests) == CREWAI_STOP == 5
    spans = g.exporter.get_finished_spans()
    (models,) = spans_by_parent(g, is_model_call).values()
    assert len(models) == 5
    ids = [_requested(m)[0]["id"] for m in models]
    (agent,) = [s for s in spans if s.name == "weather agent.agent"]
    placed = [
        (s.name, e["repeat_tool_guard.run_length"], e["gen_ai.tool.call.id"])
        for s in [*models, agent]
        for e in events(s, REPEAT)
    ]
    assert placed == [
        ("openai.chat", 2, ids[1]),
        ("openai.chat", 3, ids[2]),
        ("openai.chat", 4, ids[3]),
        ("weather agent.agent", 5, ids[4]),
    ]
    assert [e["repeat_tool_guard.tier"] for e in events(agent, REMINDER)] == ["detailed"]
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert g.unguarded() == {}


def test_the_tool_cache_changes_nothing_here(g: Guarded, server: FakeOpenAI) -> None:
    """``Crew(cache=True)``: cached answers and executed tools look the same, both only as requests."""
    assert kickoff(make_crew(server, cache=True)) == FINAL_ANSWER
    assert_runs(g, runs=1, traces=1)


def test_a_second_prompt_gets_a_fresh_chain(g: Guarded) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server:
        assert kickoff_twice(make_crew(server)) == [FINAL_ANSWER] * 2
    assert short_run_lengths(g) == [[2], [2]]
    assert _guard_events_off_model_calls(g) == []
    # Both runs' agent spans carry the same gen_ai.agent.id (the Agent object's): only the run span tells them apart.
    agents = [s for s in g.exporter.get_finished_spans() if s.name == "weather agent.agent"]
    assert len(agents) == 2 and len({(s.attributes or {})["gen_ai.agent.id"] for s in agents}) == 1
    assert len({r["repeat_tool_guard.agent_id"] for _, r in guard_events(g)}) == 2


def test_a_second_agent_running_concurrently_has_its_own_chain(g: Guarded, server: FakeOpenAI) -> None:
    a, b = make_crew(server, "weather agent"), make_crew(server, "travel agent")
    assert run_two_crews(a, b) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=2)
    assert_interleaved_runs(g, is_model_call)


def test_two_concurrent_runs_of_one_crew_have_separate_chains(g: Guarded, server: FakeOpenAI) -> None:
    """CrewAI refuses two concurrent runs of one Agent instance ("Executor is already running"):
    ``kickoff_for_each_async`` runs copies of the crew, whose agents get ids of their own."""
    assert run_one_crew_twice(make_crew(server)) == [FINAL_ANSWER] * 2
    agents = [s for s in g.exporter.get_finished_spans() if s.name == "weather agent.agent"]
    assert len(agents) == 2 and len({(s.attributes or {})["gen_ai.agent.id"] for s in agents}) == 2
    assert_runs(g, runs=2, traces=2)
    assert_interleaved_runs(g, is_model_call)


# -- every run under one shared outer span (an HTTP request serving several runs) ---------------


def test_under_one_outer_span_a_second_prompt_gets_a_fresh_chain(g: Guarded, instrumented: Instrumented) -> None:
    with FakeOpenAI(SHORT_SCRIPT) as server, instrumented.outer():
        kickoff_twice(make_crew(server))
    assert short_run_lengths(g) == [[2], [2]]
    assert _guard_events_off_model_calls(g) == []


def test_under_one_outer_span_two_concurrent_agents_have_their_own_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    a, b = make_crew(server, "weather agent"), make_crew(server, "travel agent")
    assert run_two_crews(a, b, instrumented.outer()) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=1)
    assert_interleaved_runs(g, is_model_call)


def test_under_one_outer_span_two_concurrent_runs_of_one_crew_have_separate_chains(
    g: Guarded, server: FakeOpenAI, instrumented: Instrumented
) -> None:
    assert run_one_crew_twice(make_crew(server), instrumented.outer()) == [FINAL_ANSWER] * 2
    assert_runs(g, runs=2, traces=1)
    assert_interleaved_runs(g, is_model_call)


# -- what the guard can and cannot see --------------------------------------------------------------


def test_doctor_finds_no_blind_spot(g: Guarded, server: FakeOpenAI) -> None:
    from otel_repeat_guard.cli.doctor import diagnose

    make_crew(server).kickoff()
    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])


def test_with_content_tracing_off_the_blind_spot_is_reported(
    g: Guarded, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRACELOOP_TRACE_CONTENT=false: the model spans say only that the model asked for a tool
    (``gen_ai.response.finish_reasons = ('tool_call',)``), not which tool or with what arguments."""
    from otel_repeat_guard.cli.doctor import diagnose

    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    assert kickoff(make_crew(server)) == FINAL_ANSWER
    spans = g.exporter.get_finished_spans()
    (models,) = spans_by_parent(g, is_model_call).values()
    assert [(m.attributes or {}).get("gen_ai.response.finish_reasons") for m in models] == [("tool_call",)] * 8 + [
        ("stop",)
    ]
    assert not any("gen_ai.output.messages" in (m.attributes or {}) for m in models)
    assert g.reminders == [] and not [e for s in spans for e in s.events if e.name.startswith("repeat_tool_guard")]
    # Never silently blind: the doctor and the counter say so, one call per model request that asked for a tool.
    report = diagnose(spans)
    assert report.exit_code == 1, report
    assert [(b.scope, b.reason, b.calls) for b in report.blind_spots] == [(MODEL_SCOPE, "no_arguments", 8)]
    assert "TRACELOOP_TRACE_CONTENT" in report.blind_spots[0].fix
    unguarded = g.unguarded()
    assert {reason for reason, _ in unguarded} == {"no_arguments"} and sum(unguarded.values()) == 8


def test_no_progress_takes_each_outcome_from_the_next_model_request(instrumented: Instrumented, tmp_path: Path) -> None:
    """Issue 24, item 5: CrewAI runs its tools with no span, so nothing records what a tool answered but the
    next request's messages, which the openai instrumentation records as ``gen_ai.input.messages``."""
    with with_store(tmp_path, config=NO_PROGRESS_CONFIG) as g:
        server = kickoff_reminded(instrumented, g, NO_PROGRESS_SCRIPT)
        chats = [s for s in g.exporter.get_finished_spans() if s.instrumentation_scope.name == MODEL_SCOPE]  # type: ignore[union-attr]
        last = json.loads(str(chats[-1].attributes["gen_ai.input.messages"]))  # type: ignore[index]
        answers = [p for m in last for p in m.get("parts", ()) if p.get("type") == "tool_call_response"]
        assert len(answers) == len(NO_PROGRESS_SCRIPT) and "is down" in json.dumps(answers[0])
        assert_no_progress_from_the_model_requests(
            g, [[text for _, text in openai_messages(body)] for body in server.requests]
        )
