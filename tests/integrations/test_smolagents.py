"""smolagents ToolCallingAgent with openinference-instrumentation-smolagents, its OpenAIServerModel pointed at
the fake OpenAI server.

The instrumentation marks each run ``<agent name>.run`` as an AGENT span (no ``agent.name``: the span
name names it), each step a ``Step N`` CHAIN span under it, and under each step the model call
(``OpenAIModel.generate``, LLM, with the requested ``tool_calls`` in ``llm.output_messages``) and the
tool call (a TOOL span named after the tool's class, ``SimpleTool`` for ``@tool`` functions, with
``tool.name`` and the call in ``input.value`` as ``{"args": [], "sanitize_inputs_outputs": true,
"kwargs": {...}}``). The tool span has no call id. A tool's exception marks its span ERROR and goes
back to the model as an ``Error:`` user message.

smolagents sends tool results as *user* messages (``Observation:``) and ends a run only through its
``final_answer`` tool, so the fake server is scripted from those observations and answers with a
``final_answer`` call: one more tool span per run, a different call, left out of the scenario's spans.

An agent object holds one conversation (``agent.memory``), so concurrent runs use two agent objects;
runs are synchronous, so they run on threads (with the caller's context, for the outer span).
"""

from __future__ import annotations

import contextvars
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .oi_cases import (
    OUTERS,
    Instrumented,
    assert_interleaved_runs,
    assert_run_lengths,
    assert_runs,
    guarded,
    instrumented_fixture,
    kind,
    runs,
)
from .scenario import EXPECTED_RUNS, FINAL_ANSWER, SHORT_SCRIPT, Guarded, lookup_result, next_call, require, run_lengths

os.environ.setdefault("OPENAI_API_KEY", "offline")
require("smolagents")
from openinference.instrumentation import TraceConfig  # noqa: E402
from openinference.instrumentation.smolagents import SmolagentsInstrumentor  # noqa: E402
from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402

SCOPE = "openinference.instrumentation.smolagents"
FINAL = ("final_answer",)


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded(instrumented)


instrumented = instrumented_fixture(SmolagentsInstrumentor)


@tool
def lookup(city: str, units: str) -> str:
    """Look up the weather.

    Args:
        city: the city
        units: metric or imperial
    """
    return lookup_result(city, units)


@tool
def broken_lookup(city: str, units: str) -> str:
    """Look up the weather, badly.

    Args:
        city: the city
        units: metric or imperial
    """
    raise RuntimeError(f"the weather service for {city} is down")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content or [])


class SmolFakeOpenAI(FakeOpenAI):
    """Counts smolagents' tool results: ``Observation:`` and ``Error:`` texts in the user messages after the
    last ``New task:`` (smolagents merges consecutive user messages, so counts texts, not messages), and
    ends with a ``final_answer`` call."""

    def tool_results(self, body: dict[str, Any]) -> int:
        results = 0
        for message in body.get("messages") or []:
            if message.get("role") != "user":
                continue
            text = _text(message)
            if "New task:" in text:
                results, text = 0, text[text.rindex("New task:") :]
            results += text.count("Observation:\n") + text.count("\nNow let's retry")
        return results

    def script_for(self, body: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        return next_call(self.tool_results(body), self.script) or ("final_answer", {"answer": FINAL_ANSWER})


@pytest.fixture
def server() -> Iterator[SmolFakeOpenAI]:
    with SmolFakeOpenAI() as fake:
        yield fake


def make_agent(server: FakeOpenAI, name: str = "weather_agent") -> ToolCallingAgent:
    model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=server.base_url, api_key="offline")
    return ToolCallingAgent(tools=[lookup, broken_lookup], model=model, name=name, verbosity_level=LogLevel.OFF)


def concurrently(*runs: Callable[[], Any]) -> list[Any]:
    """Run each on its own thread, each in a copy of the caller's context (so under its outer span)."""
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, run) for run in runs]
        return [f.result() for f in futures]


@OUTERS
def test_one_run(g: Guarded, server: SmolFakeOpenAI, instrumented: Instrumented, outer: bool) -> None:
    with instrumented.around(outer):
        assert make_agent(server).run("Weather in Paris?") == FINAL_ANSWER
    assert len(server.requests) == 9  # 8 tool calls, then final_answer
    assert_runs(g, 1, outer, skip=FINAL)
    assert [r.agent_name for r in g.reminders] == ["weather_agent.run"] * 2  # the run span's name
    spans = g.exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]
    (run,) = [s for s in spans if kind(s) == "AGENT"]
    assert run.name == "weather_agent.run" and (run.parent is None) == (not outer)
    tools = [s for s in spans if kind(s) == "TOOL"]
    models = [s for s in spans if kind(s) == "LLM"]
    assert [(s.attributes or {}).get("tool.name") for s in tools] == ["lookup"] * 6 + ["broken_lookup"] * 2 + [
        "final_answer"
    ]
    assert {s.name for s in models} == {"OpenAIModel.generate"} and len(models) == 9
    # tool and model spans are siblings under a per-step CHAIN span ("Step N"), whose parent is the run
    steps = {by_id[s.parent.span_id] for s in tools + models}  # type: ignore[union-attr]
    assert {s.name for s in steps} == {f"Step {i}" for i in range(1, 10)}
    assert {by_id[s.parent.span_id].name for s in steps} == {"weather_agent.run"}  # type: ignore[union-attr]
    final = [s for s in tools if (s.attributes or {}).get("tool.name") == "final_answer"]
    assert run_lengths(final) == [1]
    assert json.loads(str((tools[0].attributes or {})["input.value"])) == {
        "args": [],
        "sanitize_inputs_outputs": True,
        "kwargs": {"city": "Paris", "units": "metric"},
    }
    assert not any(k.endswith("call.id") or k.endswith("call_id") for s in tools for k in (s.attributes or {}))


@OUTERS
def test_a_second_prompt_gets_a_fresh_chain(g: Guarded, instrumented: Instrumented, outer: bool) -> None:
    with SmolFakeOpenAI(SHORT_SCRIPT) as server, instrumented.around(outer):
        agent = make_agent(server)
        assert agent.run("Weather in Paris?") == FINAL_ANSWER
        assert agent.run("And again?", reset=False) == FINAL_ANSWER
    assert_run_lengths(g, outer, [[1, 2], [1, 2]], skip=FINAL)


@OUTERS
def test_a_second_agent_running_concurrently_has_its_own_chain(
    g: Guarded, server: SmolFakeOpenAI, instrumented: Instrumented, outer: bool
) -> None:
    a, b = make_agent(server, "weather_agent"), make_agent(server, "travel_agent")
    with instrumented.around(outer):
        assert concurrently(lambda: a.run("Paris?"), lambda: b.run("Paris?")) == [FINAL_ANSWER] * 2
    assert_runs(g, 2, outer, skip=FINAL)
    assert_interleaved_runs(g, outer)
    assert sorted(r.agent_name for r in g.reminders) == ["travel_agent.run"] * 2 + ["weather_agent.run"] * 2


@OUTERS
def test_two_concurrent_runs_of_one_agent_have_separate_chains(
    g: Guarded, server: SmolFakeOpenAI, instrumented: Instrumented, outer: bool
) -> None:
    """Two objects of the same agent (one smolagents agent object holds one conversation at a time)."""
    a, b = make_agent(server), make_agent(server)
    with instrumented.around(outer):
        assert concurrently(lambda: a.run("Paris?"), lambda: b.run("Paris?")) == [FINAL_ANSWER] * 2
    assert_runs(g, 2, outer, skip=FINAL)
    assert_interleaved_runs(g, outer)


# -- never silently blind ------------------------------------------------------------------------


def test_with_inputs_hidden_the_models_request_stands_in(
    g: Guarded, server: SmolFakeOpenAI, instrumented: Instrumented
) -> None:
    """OPENINFERENCE_HIDE_INPUTS: the tool span's input.value is ``__REDACTED__`` and carries no call id, but
    the model's request (its outputs are not hidden) names each call: matched by tool name, the guard
    sees the whole scenario, and nothing is left unguarded."""
    instrumented.reinstrument(TraceConfig(hide_inputs=True))
    try:
        assert make_agent(server).run("Weather in Paris?") == FINAL_ANSWER
    finally:
        instrumented.reinstrument()
    spans = g.exporter.get_finished_spans()
    tools = [s for s in spans if kind(s) == "TOOL"]
    assert {(s.attributes or {}).get("input.value") for s in tools} == {"__REDACTED__"}
    assert run_lengths(tools) == [*EXPECTED_RUNS, 1]  # and final_answer
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [
        ("lookup", 3, "gentle"),
        ("lookup", 5, "detailed"),
    ]
    assert g.unguarded() == {}
    from otel_repeat_guard.cli.doctor import diagnose

    report = diagnose(spans)
    assert report.exit_code == 0
    assert {t.tool: dict(t.arguments_from) for t in report.tools} == {
        "lookup": {"model_request": 6},
        "broken_lookup": {"model_request": 2},
        "final_answer": {"model_request": 1},
    }


def test_doctor_finds_no_blind_spot_in_a_plain_run(g: Guarded, server: SmolFakeOpenAI) -> None:
    from otel_repeat_guard.cli.doctor import diagnose

    assert make_agent(server).run("Weather in Paris?") == FINAL_ANSWER
    assert len(runs(g, False)) == 1
    report = diagnose(g.exporter.get_finished_spans())
    assert (report.exit_code, list(report.blind_spots)) == (0, [])
