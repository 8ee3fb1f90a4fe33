"""The smolagents adapter (RepeatGuardModel) end to end: a ToolCallingAgent whose OpenAIServerModel talks to the
fake OpenAI server, traced by OpenInference (test_smolagents.py's setup).

smolagents sends tool results as ``Observation:`` messages (role ``tool-response``, a user message on the wire)
and ends a run with its ``final_answer`` tool, so the REPEAT3 scenario is four requests: three ``lookup`` calls,
then ``final_answer``. The requests are recorded as the wrapped model gets them, as smolagents ``ChatMessage``s:
there the reminder is a user message of its own after the observations. When the model builds the HTTP request,
smolagents merges consecutive user messages, so on the wire its text follows the last observation's text in one
user message; the wire is checked too.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

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
    hand_wired,  # noqa: F401  (a fixture)
    lookup_result,
    make_guarded,
    next_call,
    require,
    wired,
    with_store,
)

os.environ.setdefault("OPENAI_API_KEY", "offline")
require("smolagents")
from openinference.instrumentation.smolagents import SmolagentsInstrumentor  # noqa: E402
from smolagents import ActionStep, LogLevel, OpenAIServerModel, ToolCallingAgent  # noqa: E402

from otel_repeat_guard.integrations import smolagents as adapter  # noqa: E402
from otel_repeat_guard.integrations.smolagents import RepeatGuardModel  # noqa: E402

from .test_smolagents import SmolFakeOpenAI, _text, broken_lookup, lookup  # noqa: E402

Requests = list[list[tuple[str, str]]]
OBSERVATION = "Observation:\n"

instrumented = instrumented_fixture(SmolagentsInstrumentor)


@pytest.fixture
def g(instrumented: Instrumented) -> Iterator[Guarded]:
    yield from guarded(instrumented)


class ByPrompt(SmolFakeOpenAI):
    """test_smolagents.SmolFakeOpenAI following ``script`` (REPEAT3 unless given), or ONE_CALL for a task about Lyon."""

    def __init__(self, script: Any = REPEAT3) -> None:
        super().__init__(script)

    def script_for(self, body: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        script = ONE_CALL if "Lyon" in str(body.get("messages")) else self.script
        return next_call(self.tool_results(body), script) or ("final_answer", {"answer": FINAL_ANSWER})


@pytest.fixture
def server() -> Iterator[ByPrompt]:
    with ByPrompt() as fake:
        yield fake


def seen(messages: Any) -> list[tuple[str, str]]:
    """smolagents ChatMessages as (role, text): an ``Observation:`` is a tool result, its text after the prefix."""
    out = []
    for message in messages:
        role = str(getattr(message.role, "value", message.role))
        content = message.content
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
        if role == "tool-response":
            out.append(("tool", text.removeprefix(OBSERVATION)))
        elif role in {"user", "system"}:
            out.append((role, text))
        else:
            out.append(("assistant", text))
    return out


class RecordingModel(OpenAIServerModel):
    """The wrapped model: records each request it gets and the run the guard sees there (the adapter's context)."""

    def __init__(self, server: ByPrompt, g: Guarded, requests: Requests, ids: list[str | None]) -> None:
        super().__init__(model_id="gpt-4o-mini", api_base=server.base_url, api_key="offline")
        self.g, self.requests, self.ids = g, requests, ids

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.requests.append(seen(messages))
        self.ids.append(self.g.guard.current_agent_id())
        return super().generate(messages, *args, **kwargs)


def make_agent(model: Any, step_callbacks: Any = None) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=[lookup, broken_lookup],
        model=model,
        name="weather_agent",
        verbosity_level=LogLevel.OFF,
        step_callbacks=step_callbacks,
    )


def run_id(g: Guarded, city: str) -> str:
    """The key the repeat events of the run about ``city`` carry: its AGENT span's."""
    ids = {
        e["repeat_tool_guard.agent_id"]
        for s, e in guard_events(g)
        if city in str((s.attributes or {}).get("input.value"))
    }
    (agent_id,) = ids
    return str(agent_id)


def wire(server: ByPrompt, city: str) -> list[str]:
    """Each HTTP request of the run about ``city``, as its JSON text."""
    return [json.dumps(body) for body in server.requests if city in json.dumps(body.get("messages"))]


def test_the_whole_chain_agrees(instrumented: Instrumented, tmp_path: Path) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    requests: Requests = []
    with ByPrompt(LOOP) as server, with_store(tmp_path) as gs, wired(instrumented.board, gs):
        model = RepeatGuardModel(RecordingModel(server, gs, requests, []), guard=gs.guard, inbox=gs.inbox)
        assert make_agent(model).run("Weather in Paris?") == FINAL_ANSWER
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(gs, expected_whole_chain(final_answer_tool=True))


def test_a_bare_guard_wired_by_hand_beside_the_store_gives_the_guards_figures(
    instrumented: Instrumented,
    hand_wired: Guarded,  # noqa: F811  (the fixture imported above)
) -> None:
    """Issue 40, item 1: ``RepeatGuardSpanProcessor(on_reminder=...)`` beside ``SQLiteSpanExporter``, as docs/runtimes.md
    showed (the store kept provisional run keys while facts were opt-in): the store's wasted tokens are the
    metric's, one run key, every model call on the run's timeline."""
    with ByPrompt(LOOP) as server, wired(instrumented.board, hand_wired):
        model = RepeatGuardModel(
            RecordingModel(server, hand_wired, [], []), guard=hand_wired.guard, inbox=hand_wired.inbox
        )
        assert make_agent(model).run("Weather in Paris?") == FINAL_ANSWER
    assert_whole_chain(hand_wired, expected_whole_chain(final_answer_tool=True))


def test_the_next_request_carries_the_reminder_once(g: Guarded, server: ByPrompt) -> None:
    requests: Requests = []
    ids: list[str | None] = []
    agent = make_agent(RepeatGuardModel(RecordingModel(server, g, requests, ids), guard=g.guard, inbox=g.inbox))
    assert agent.run("Weather in Paris?") == FINAL_ANSWER
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert g.reminders[0].text.startswith(GENTLE)
    assert_gentle_reminder_delivered_once(requests)
    assert requests[3][-1] == ("user", f"<system-reminder>\n{g.reminders[0].text}\n</system-reminder>")
    assert requests[3][-2] == ("tool", lookup_result(**PARIS))
    assert ids == [run_id(g, "Paris")] * 4 == [g.reminders[0].agent_id] * 4
    assert g.inbox.pending() == []
    # On the wire: the 4th request only, once, right after the last observation's text (smolagents merges them).
    bodies = wire(server, "Paris")
    assert [body.count(GENTLE) for body in bodies] == [0, 0, 0, 1]
    last = server.requests[3]["messages"][-1]
    assert last["role"] == "user"
    assert _text(last).endswith(
        f"{OBSERVATION}{lookup_result(**PARIS)}\n<system-reminder>\n{g.reminders[0].text}\n</system-reminder>"
    )
    # The memory never holds it: not in the steps, nor in the step's recorded input (smolagents' own list).
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    assert not any("<system-reminder>" in str(m.content) for s in steps for m in s.model_input_messages or [])
    assert not any("<system-reminder>" in str(m.content) for m in agent.write_memory_to_messages())


@OUTERS
def test_a_concurrent_run_of_the_same_agent_receives_nothing(
    g: Guarded, server: ByPrompt, instrumented: Instrumented, outer: bool
) -> None:
    """Two instances of one agent definition (a smolagents agent object holds one conversation), on two threads.

    A step callback holds the Paris run after its 3rd step, its reminder due, until the Lyon run (which starts
    only then) has made both its requests and finished. Plainly, or both under one outer span.
    """
    paris: Requests = []
    lyon: Requests = []
    paris_ids: list[str | None] = []
    lyon_ids: list[str | None] = []
    paris_due, lyon_done = threading.Event(), threading.Event()
    pending: list[str] = []

    def hold(step: ActionStep, agent: Any) -> None:
        if step.step_number == 3:
            paris_due.set()
            assert lyon_done.wait(10)

    def run_paris() -> Any:
        model = RepeatGuardModel(RecordingModel(server, g, paris, paris_ids), guard=g.guard, inbox=g.inbox)
        return make_agent(model, [hold]).run("Weather in Paris?")

    def run_lyon() -> Any:
        assert paris_due.wait(10)
        pending.extend(g.inbox.pending())
        model = RepeatGuardModel(RecordingModel(server, g, lyon, lyon_ids), guard=g.guard, inbox=g.inbox)
        try:
            return make_agent(model).run("Weather in Lyon?")
        finally:
            lyon_done.set()

    with instrumented.around(outer), ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(contextvars.copy_context().run, run) for run in (run_paris, run_lyon)]
        assert [f.result() for f in futures] == [FINAL_ANSWER] * 2
    assert pending == [run_id(g, "Paris")]
    assert [(r.tool_name, r.run_length) for r in g.reminders] == [("lookup", 3)]
    assert_gentle_reminder_delivered_once(paris)
    assert len(lyon) == 2 and lyon[1][-1] == ("tool", lookup_result("Lyon", "metric"))
    assert_nothing_delivered(lyon)
    assert paris_ids == [run_id(g, "Paris")] * 4
    (lyon_id,) = set(lyon_ids)
    assert len(lyon_ids) == 2 and lyon_id is not None and lyon_id != run_id(g, "Paris")
    assert [body.count("<system-reminder>") for body in wire(server, "Lyon")] == [0, 0]


def test_streaming_outputs_carry_the_reminder_too(g: Guarded, server: ByPrompt) -> None:
    """``stream_outputs=True``: the agent calls ``generate_stream``, which the wrapper passes the reminder to."""
    model = RepeatGuardModel(
        OpenAIServerModel(model_id="gpt-4o-mini", api_base=server.base_url, api_key="offline"),
        guard=g.guard,
        inbox=g.inbox,
    )
    agent = ToolCallingAgent(
        tools=[lookup, broken_lookup],
        model=model,
        name="weather_agent",
        verbosity_level=LogLevel.OFF,
        stream_outputs=True,
    )
    assert agent.run("Weather in Paris?") == FINAL_ANSWER
    assert [body.get("stream") for body in server.requests] == [True] * 4
    assert [body.count(GENTLE) for body in wire(server, "Paris")] == [0, 0, 0, 1]


def test_a_failure_in_the_adapter_leaves_the_request_unchanged(
    g: Guarded, server: ByPrompt, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(reminders: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(adapter, "reminder_message", broken)
    requests: Requests = []
    model = RepeatGuardModel(RecordingModel(server, g, requests, []), guard=g.guard, inbox=g.inbox)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        assert make_agent(model).run("Weather in Paris?") == FINAL_ANSWER
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert [r.message for r in caplog.records if r.name == "otel_repeat_guard"] == [
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one"
    ]


def test_everything_else_is_the_wrapped_models(server: ByPrompt) -> None:
    g = make_guarded()
    inner = OpenAIServerModel(model_id="gpt-4o-mini", api_base=server.base_url, api_key="offline")
    model = RepeatGuardModel(inner, guard=g.guard, inbox=g.inbox)
    assert model.model_id == "gpt-4o-mini" and model.to_dict() == inner.to_dict()
    assert model.generate_stream.__name__ == "stream" and hasattr(model, "generate_stream")
    assert not hasattr(RepeatGuardModel(object.__new__(_NoStream), guard=g.guard, inbox=g.inbox), "generate_stream")


class _NoStream:
    def generate(self, messages: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_a_wrong_guard_or_model_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="guard must be a RepeatGuardSpanProcessor"):
        RepeatGuardModel(_NoStream(), guard=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model must be a smolagents Model"):
        RepeatGuardModel(object(), guard=make_guarded().guard)
