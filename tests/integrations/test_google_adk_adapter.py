"""The google-adk adapter (repeat_guard_before_model_callback) end to end: test_google_adk.py's scripted LLM, recording."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from pydantic import Field

from .scenario import (
    FINAL_ANSWER,
    GENTLE,
    LOOP,
    LYON,
    ONE_CALL,
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

require("google.adk")
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models import LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

from otel_repeat_guard.integrations import google_adk as adapter  # noqa: E402
from otel_repeat_guard.integrations.google_adk import repeat_guard_before_model_callback  # noqa: E402

from .test_google_adk import BOARD, ScriptedLlm, _error_to_model, broken_lookup, lookup  # noqa: E402

Requests = list[list[tuple[str, str]]]


def _seen(contents: Any) -> list[tuple[str, str]]:
    """The request as (role, text): user text parts, each function response's result, the rest as JSON."""
    out = []
    for content in contents:
        for part in content.parts or ():
            if part.function_response:
                response = part.function_response.response
                if isinstance(response, dict) and set(response) == {"result"}:
                    out.append(("tool", str(response["result"])))
                else:
                    out.append(("tool", repr(response)))
            elif content.role == "user" and part.text is not None:
                out.append(("user", part.text))
            else:
                out.append(("assistant", part.model_dump_json(exclude_none=True)))
    return out


def _prompt(seen: list[tuple[str, str]]) -> str:
    return "Lyon" if "Lyon" in seen[0][1] else "Paris"


def _tool_results(llm_request: LlmRequest) -> int:
    return sum(1 for content in llm_request.contents for part in content.parts or () if part.function_response)


class RecordingLlm(ScriptedLlm):
    """test_google_adk.ScriptedLlm following ``fixed``, else REPEAT3 (ONE_CALL when prompted about Lyon),
    recording each request."""

    requests: dict[str, Requests] = Field(default_factory=dict)
    fixed: Any = None

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> Any:
        seen = _seen(llm_request.contents)
        prompt = _prompt(seen)
        self.requests.setdefault(prompt, []).append(seen)
        scripted = ScriptedLlm(model="scripted", script=self.fixed or (ONE_CALL if prompt == "Lyon" else REPEAT3))
        async for response in scripted.generate_content_async(llm_request, stream):
            yield response


def make_agent(llm: RecordingLlm, callback: Any) -> LlmAgent:
    return LlmAgent(
        name="weather_agent",
        model=llm,
        instruction="Use lookup.",
        tools=[lookup, broken_lookup],
        on_tool_error_callback=_error_to_model,
        before_model_callback=callback,
    )


async def _run(agent: LlmAgent, prompt: str) -> tuple[str, list[Any]]:
    """The final text and the session's events."""
    runner = InMemoryRunner(agent=agent, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    text = ""
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        text = "".join(part.text or "" for part in (event.content.parts or ()) if event.content) or text
    stored = await runner.session_service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert stored is not None
    return text, list(stored.events)


@pytest.fixture(scope="module", autouse=True)
def global_provider() -> None:
    """test_google_adk.py's switchboard: the global provider is set once per process, by whichever module runs first."""
    provider = TracerProvider()
    provider.add_span_processor(BOARD)
    trace.set_tracer_provider(provider)


SCHEMAS: Any = {"params": ["2", "1"], "ids": ["schema2-span-only", "legacy-schema1"]}


def on_board(schema: str, monkeypatch: pytest.MonkeyPatch, guarded: Guarded) -> Iterator[Guarded]:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN", schema)
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
    llm = RecordingLlm(model="scripted", fixed=LOOP)
    callback = repeat_guard_before_model_callback(guard=gs.guard, inbox=gs.inbox)
    text, _ = asyncio.run(_run(make_agent(llm, callback), "Weather in Paris?"))
    assert text == FINAL_ANSWER
    assert_reminders_reached_model(llm.requests["Paris"], loop=True)
    assert_whole_chain(gs, expected_whole_chain())


def test_the_next_request_carries_the_reminder_once_for_this_call_only(g: Guarded) -> None:
    llm = RecordingLlm(model="scripted")
    seen_by_then: list[list[tuple[str, str]]] = []

    def users_callback(callback_context: Any, llm_request: LlmRequest) -> None:  # the agent's own callback
        assert callback_context.agent_name == "weather_agent"
        seen_by_then.append(_seen(llm_request.contents))

    callback = repeat_guard_before_model_callback(guard=g.guard, inbox=g.inbox, then=users_callback)
    text, events = asyncio.run(_run(make_agent(llm, callback), "Weather in Paris?"))
    assert text == FINAL_ANSWER
    assert [(r.tool_name, r.run_length, r.tier) for r in g.reminders] == [("lookup", 3, "gentle")]
    assert list(llm.requests) == ["Paris"]
    requests = llm.requests["Paris"]
    assert_gentle_reminder_delivered_once(requests)
    assert g.reminders[0].text.startswith(GENTLE)
    assert requests[3][-1] == ("user", f"<system-reminder>\n{g.reminders[0].text}\n</system-reminder>")
    assert requests[3][-2] == ("tool", lookup_result("Paris", "metric"))  # its own message, right after the result
    assert seen_by_then == requests  # `then` ran on every call, after the reminder was added
    in_session = [p.text for e in events if e.content for p in e.content.parts or () if p.text]
    assert not any("<system-reminder>" in t for t in in_session), in_session  # this call only


def test_a_concurrent_run_of_the_same_agent_receives_nothing(g: Guarded) -> None:
    """One LlmAgent object, two concurrent runs (two sessions).

    The Lyon run makes its last request while the Paris run's reminder is waiting in the inbox:
    a test callback listed before the adapter holds each run at the right request.
    """
    llm = RecordingLlm(model="scripted")

    async def both() -> None:
        pending, lyon_done = asyncio.Event(), asyncio.Event()

        async def gate(callback_context: Any, llm_request: LlmRequest) -> None:
            prompt, results = _prompt(_seen(llm_request.contents)), _tool_results(llm_request)
            if prompt == "Paris" and results == 3:
                pending.set()
                await asyncio.wait_for(lyon_done.wait(), 10)
            elif prompt == "Lyon" and results == 1:
                await asyncio.wait_for(pending.wait(), 10)

        agent = make_agent(llm, [gate, repeat_guard_before_model_callback(guard=g.guard, inbox=g.inbox)])

        async def lyon() -> None:
            await _run(agent, "Weather in Lyon?")
            lyon_done.set()

        await asyncio.gather(_run(agent, "Weather in Paris?"), lyon())

    asyncio.run(both())
    assert len(tool_spans_by_trace(g)) == 2
    assert [(r.tool_name, r.run_length) for r in g.reminders] == [("lookup", 3)]
    assert_gentle_reminder_delivered_once(llm.requests["Paris"])
    lyon = llm.requests["Lyon"]
    assert len(lyon) == 2 and lyon[1][-1] == ("tool", lookup_result(**LYON))
    assert_nothing_delivered(lyon)


def test_then_can_still_answer_instead_of_the_model(g: Guarded) -> None:
    llm = RecordingLlm(model="scripted")

    async def cached(callback_context: Any, llm_request: LlmRequest) -> LlmResponse:
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="from the cache")]))

    callback = repeat_guard_before_model_callback(guard=g.guard, inbox=g.inbox, then=cached)
    text, _ = asyncio.run(_run(make_agent(llm, callback), "Weather in Paris?"))
    assert text == "from the cache"
    assert llm.requests == {}


def test_a_failure_in_the_adapter_leaves_the_request_unchanged(
    g: Guarded, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(reminders: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(adapter, "reminder_message", broken)
    llm = RecordingLlm(model="scripted")
    callback = repeat_guard_before_model_callback(guard=g.guard, inbox=g.inbox)
    with caplog.at_level(logging.ERROR, logger="otel_repeat_guard"):
        text, _ = asyncio.run(_run(make_agent(llm, callback), "Weather in Paris?"))
    assert text == FINAL_ANSWER
    assert len(llm.requests["Paris"]) == 4
    assert_nothing_delivered(llm.requests["Paris"])
    assert [r.message for r in caplog.records if r.name == "otel_repeat_guard"] == [
        "repeat guard could not add reminders; the model request goes out unchanged, and its reminder waits for the "
        "run's next one"
    ]


def test_a_wrong_inbox_is_refused_at_construction(g: Guarded) -> None:
    with pytest.raises(ValueError, match="inbox must be a ReminderInbox"):
        repeat_guard_before_model_callback(guard=g.guard, inbox=object())  # type: ignore[arg-type]
