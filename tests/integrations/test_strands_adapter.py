"""The strands adapter (RepeatGuardHooks) end to end: test_strands.py's scripted model, recording what it got."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

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
    lookup_result,
    make_guarded,
    require,
    tool_spans_by_trace,
    wired,
    with_store,
)

require("strands")
import strands.telemetry.tracer as strands_tracer  # noqa: E402
from strands import Agent  # noqa: E402
from strands.hooks import BeforeModelCallEvent  # noqa: E402

from otel_repeat_guard.integrations import strands as adapter  # noqa: E402
from otel_repeat_guard.integrations.strands import RepeatGuardHooks  # noqa: E402

from .test_strands import BOARD, ScriptedModel, broken_lookup, lookup  # noqa: E402

Requests = list[list[tuple[str, str]]]


def _seen(messages: Any) -> list[tuple[str, str]]:
    """The request as (role, text): each text block of a user message, each tool result's text, the rest as JSON."""
    out = []
    for message in messages:
        for block in message["content"]:
            if "toolResult" in block:
                out.append(("tool", "".join(part.get("text", "") for part in block["toolResult"]["content"])))
            elif message["role"] == "user" and "text" in block:
                out.append(("user", block["text"]))
            else:
                out.append(("assistant", json.dumps(block, default=str)))
    return out


class RecordingModel(ScriptedModel):
    """test_strands.ScriptedModel following ``script``, else REPEAT3 (ONE_CALL when prompted about Lyon),
    recording each request."""

    def __init__(self, requests: Requests, script: Any = None) -> None:
        super().__init__(REPEAT3)
        self.requests, self.fixed = requests, script

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        seen = _seen(messages)
        self.requests.append(seen)
        script = self.fixed or (ONE_CALL if "Lyon" in seen[0][1] else REPEAT3)
        async for event in ScriptedModel(script).stream(messages, *args, **kwargs):
            yield event


class Gate:
    """A test hook, registered before the adapter: at the request after ``results`` tool results, set then wait."""

    def __init__(self, results: int, signal: asyncio.Event | None = None, wait: asyncio.Event | None = None) -> None:
        self.results, self.signal, self.wait = results, signal, wait

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        registry.add_callback(BeforeModelCallEvent, self.before_model_call)

    async def before_model_call(self, event: BeforeModelCallEvent) -> None:
        results = sum("toolResult" in block for message in event.agent.messages for block in message["content"])
        if results != self.results:
            return
        if self.signal is not None:
            self.signal.set()
        if self.wait is not None:
            await asyncio.wait_for(self.wait.wait(), 10)


def make_agent(g: Guarded, requests: Requests, *gates: Gate, script: Any = None) -> Agent:
    return Agent(
        model=RecordingModel(requests, script),
        tools=[lookup, broken_lookup],
        name="weather_agent",
        callback_handler=None,
        hooks=[*gates, RepeatGuardHooks(guard=g.guard, inbox=g.inbox)],
    )


@pytest.fixture(scope="module", autouse=True)
def global_provider() -> None:
    """test_strands.py's switchboard: the global provider is set once per process, by whichever module runs first."""
    provider = TracerProvider()
    provider.add_span_processor(BOARD)
    trace.set_tracer_provider(provider)


SCHEMAS: Any = {"params": ["", "gen_ai_latest_experimental"], "ids": ["default-schema", "latest-experimental-schema"]}


def on_board(schema: str, monkeypatch: pytest.MonkeyPatch, guarded: Guarded) -> Iterator[Guarded]:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", schema)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", None)
    with wired(BOARD, guarded):
        yield guarded


@pytest.fixture(**SCHEMAS)
def g(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guarded]:
    yield from on_board(request.param, monkeypatch, make_guarded())


@pytest.fixture(**SCHEMAS)
def gs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Guarded]:
    """As ``g``, with the store."""
    with with_store(tmp_path) as guarded:
        yield from on_board(request.param, monkeypatch, guarded)


def test_the_whole_chain_agrees(gs: Guarded) -> None:
    """Issue 21, item 5: reminders, the store's rows, wasted tokens, run key, timeline and reminder outcomes."""
    requests: Requests = []
    assert str(make_agent(gs, requests, script=LOOP)("Weather in Paris?")).strip() == FINAL_ANSWER
    assert_reminders_reached_model(requests, loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_the_next_request_carries_the_reminder_once_and_it_stays_in_the_history(g: Guarded) -> None:
    requests: Requests = []
    agent = make_agent(g, requests)
    result = agent("Weather in Paris?")  # sync: strands runs it on a worker thread
    assert str(result).strip() == FINAL_ANSWER
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert_gentle_reminder_delivered_once(requests)
    # In the history: one text block after the 3rd tool result, in the same user message; the result unedited.
    carrying = [m for m in agent.messages if any("<system-reminder>" in b.get("text", "") for b in m["content"])]
    assert len(carrying) == 1
    ((tool_result, reminder),) = [m["content"] for m in carrying]
    assert carrying[0]["role"] == "user" and carrying[0] is agent.messages[6]
    assert tool_result["toolResult"]["content"] == [{"text": lookup_result(**PARIS)}]
    assert tool_result["toolResult"]["status"] == "success"
    assert g.reminders[0].text.startswith(GENTLE)
    assert reminder == {"text": f"<system-reminder>\n{g.reminders[0].text}\n</system-reminder>"}
    assert len(agent.messages) == 8  # prompt, 3 x (call, result), answer: no message of its own


async def _paris_and_lyon(g: Guarded, paris: Requests, lyon: Requests) -> None:
    pending, lyon_done = asyncio.Event(), asyncio.Event()
    # Paris waits, with its reminder due, until Lyon has made its last request and finished.
    paris_agent = make_agent(g, paris, Gate(3, signal=pending, wait=lyon_done))
    lyon_agent = make_agent(g, lyon, Gate(1, wait=pending))

    async def lyon_run() -> None:
        await lyon_agent.invoke_async("Weather in Lyon?")
        lyon_done.set()

    await asyncio.gather(paris_agent.invoke_async("Weather in Paris?"), lyon_run())


def test_a_concurrent_run_of_the_same_agent_receives_nothing(g: Guarded) -> None:
    """Two instances of one agent definition (a strands Agent runs one invocation at a time).

    The Lyon run makes its last request while the Paris run's reminder is waiting in the inbox.
    """
    paris: Requests = []
    lyon: Requests = []
    asyncio.run(_paris_and_lyon(g, paris, lyon))
    assert len(tool_spans_by_trace(g)) == 2
    assert [(r.tool_name, r.run_length) for r in g.reminders] == [("lookup", 3)]
    assert_gentle_reminder_delivered_once(paris)
    assert len(lyon) == 2 and lyon[1][-1] == ("tool", lookup_result("Lyon", "metric"))
    assert_nothing_delivered(lyon)


def test_a_failure_in_the_adapter_leaves_the_request_unchanged(
    g: Guarded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(reminders: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(adapter, "reminder_message", broken)
    requests: Requests = []
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        result = make_agent(g, requests)("Weather in Paris?")
    assert str(result).strip() == FINAL_ANSWER
    assert len(requests) == 4
    assert_nothing_delivered(requests)
    assert [r.message for r in caplog.records if r.name == "otel_repeat_guard"] == [
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one"
    ]


def test_a_wrong_guard_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="guard must be a RepeatGuardSpanProcessor"):
        RepeatGuardHooks(guard=object())  # type: ignore[arg-type]
