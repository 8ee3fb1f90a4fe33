"""Outcomes that arrive after their calls: a tool span with no result, or a call counted from the model's
request, gets its outcome from the run's next model request (its ``tool`` messages), in each vocabulary."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.conventions.responses import (
    gen_ai_input_messages,
    openinference_input_messages,
    traceloop_prompts,
)
from otel_repeat_guard.core.detectors import Call, NoProgressDetector

from .conftest import Harness, make_harness

NO_PROGRESS = GuardConfig(no_progress_thresholds=(3,))
DOWN = "ERROR: the weather service is down"


# -- reading the answers a request carries back ------------------------------------------------------


def test_genai_input_messages_give_each_tool_call_response_by_its_id() -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "a", "name": "lookup", "arguments": {}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "a", "response": {"temp": 18}}]},
        {"role": "tool", "tool_call_id": "b", "content": "sunny"},  # a chat-completions message as it is
    ]
    assert gen_ai_input_messages({"gen_ai.input.messages": json.dumps(messages)}) == {"a": {"temp": 18}, "b": "sunny"}


def test_odd_messages_cost_only_themselves() -> None:
    messages = [
        {"role": "tool", "parts": 5},
        {"role": "tool", "parts": [7, {"type": "tool_call_response", "id": 3, "response": "x"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "no-response"}]},
        "text",
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "ok", "response": "fine"}]},
    ]
    assert gen_ai_input_messages({"gen_ai.input.messages": json.dumps(messages)}) == {"ok": "fine"}
    assert gen_ai_input_messages({"gen_ai.input.messages": "not json [tool"}) == {}
    assert gen_ai_input_messages({"gen_ai.input.messages": '[{"role": "user", "content": "hi"}]'}) == {}


def test_flattened_vocabularies_give_the_tool_messages_by_id() -> None:
    openinference = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "weather?",
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.tool_call_id": "a",
        "llm.input_messages.2.message.content": DOWN,
        "llm.input_messages.10.message.role": "tool",
        "llm.input_messages.10.message.tool_call_id": "b",
        "llm.input_messages.10.message.content": "sunny",
        "llm.input_messages.3.message.role": "tool",  # no id: passed over
        "llm.input_messages.3.message.content": "lost",
    }
    assert openinference_input_messages(openinference) == {"a": DOWN, "b": "sunny"}
    traceloop = {
        key.replace("llm.input_messages", "gen_ai.prompt").replace(".message.", "."): value
        for key, value in openinference.items()
    }
    assert traceloop_prompts(traceloop) == {"a": DOWN, "b": "sunny"}


# -- the detector: waiting changes nothing but when it speaks -----------------------------------------


calls = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]), st.sampled_from([b"1", b"2", b"3", None]), st.sampled_from([b"x", b"y", None])
    ),
    max_size=30,
)


@given(calls, st.integers(min_value=1, max_value=4))
def test_calls_that_await_their_outcomes_are_judged_as_if_they_had_them(
    script: list[tuple[str, bytes | None, bytes | None]], step: int
) -> None:
    """The oracle sees each outcome with its call; the detector under test gets them ``step`` calls at a time,
    from the "next model request"."""
    oracle, late = NoProgressDetector((2, 3)), NoProgressDetector((2, 3))
    expected = [found for tool, key, outcome in script if (found := oracle.observe(Call(tool, key, outcome)))]
    got = []
    for start in range(0, len(script), step):
        chunk = script[start : start + step]
        for i, (tool, key, _) in enumerate(chunk, start):
            assert late.observe(Call(tool, key, None, f"id{i}")) is None
        answers = {f"id{i}": outcome for i, (_, _, outcome) in enumerate(chunk, start) if outcome is not None}
        state = late.state()  # the wait travels, as the Redis chain store moves it
        late = NoProgressDetector((2, 3))
        late.restore(state)
        got += [found for _, found in late.outcomes(answers)]
    assert got == expected


def test_a_call_that_does_not_wait_ends_the_wait_of_those_before_it() -> None:
    detector = NoProgressDetector((2,))
    detector.observe(Call("t", b"1", b"x"))
    detector.observe(Call("t", b"2", None, "late"))  # its outcome never comes: a runtime that mixes both
    assert detector.observe(Call("t", b"3", b"x")) is None  # compared with nothing before it
    assert detector.outcomes({"late": b"x"}) == []
    assert detector.state() == [["t", b"3", b"x"], 1]


# -- the guard, on the span shapes of the runtimes ------------------------------------------------------


def _chat(h: Harness, answered: dict[str, str], asks: tuple[str, str, dict[str, Any]] | None, vocabulary: str) -> None:
    """A model call that carries ``answered`` back (call id -> result) and asks for ``asks``."""
    start = {"gen_ai.operation.name": "chat"} if vocabulary != "openinference" else {"openinference.span.kind": "LLM"}
    with h.tracer.start_as_current_span("chat gpt-4o", attributes=start) as span:
        if vocabulary == "openinference":
            for i, (call_id, result) in enumerate(answered.items()):
                span.set_attribute(f"llm.input_messages.{i}.message.role", "tool")
                span.set_attribute(f"llm.input_messages.{i}.message.tool_call_id", call_id)
                span.set_attribute(f"llm.input_messages.{i}.message.content", result)
        else:
            parts = [{"type": "tool_call_response", "id": i, "response": r} for i, r in answered.items()]
            span.set_attribute("gen_ai.input.messages", json.dumps([{"role": "tool", "parts": parts}]))
        if asks is not None:
            call_id, name, arguments = asks
            if vocabulary == "openinference":
                prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
                span.set_attribute(prefix + "id", call_id)
                span.set_attribute(prefix + "function.name", name)
                span.set_attribute(prefix + "function.arguments", json.dumps(arguments))
            else:
                part = {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
                span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))


def _no_progress(h: Harness) -> list[tuple[str, Any, Any]]:
    found = [(s.name, dict(e.attributes or {})) for s in h.exporter.get_finished_spans() for e in s.events]
    return [
        (name, event["repeat_tool_guard.run_length"], event.get("gen_ai.tool.call.id"))
        for name, event in found
        if "repeat_tool_guard.outcome_digest" in event
    ]


def test_a_tool_span_without_its_result_takes_it_from_the_next_request() -> None:
    """MCP's server span in-process: the call id and arguments, no result; the loop sends the result back."""
    h = make_harness(NO_PROGRESS)
    with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        answered: dict[str, str] = {}
        for i in range(4):
            _chat(h, dict(answered), None, "genai")
            with h.tracer.start_as_current_span("execute_tool lookup") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup")
                span.set_attribute("gen_ai.tool.call.id", f"c{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"city": "Paris", "try": i}))
            answered[f"c{i}"] = DOWN
        _chat(h, answered, None, "genai")
    assert _no_progress(h) == [("chat gpt-4o", 2, "c1"), ("chat gpt-4o", 3, "c2"), ("chat gpt-4o", 4, "c3")]
    assert [(r.kind, r.run_length, r.tier) for r in h.reminders] == [("no_progress", 3, "gentle")]
    assert DOWN in h.reminders[0].text


def test_a_result_on_the_tool_span_is_not_waited_for() -> None:
    h = make_harness(NO_PROGRESS)
    with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(3):
            with h.tracer.start_as_current_span("execute_tool lookup") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup")
                span.set_attribute("gen_ai.tool.call.id", f"c{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"try": i}))
                span.set_attribute("gen_ai.tool.call.result", DOWN)
    assert _no_progress(h) == [("execute_tool lookup", 2, None), ("execute_tool lookup", 3, None)]  # on the call


@pytest.mark.parametrize("vocabulary", ["genai", "openinference", "traceloop"])
def test_calls_counted_from_the_requests_take_their_outcomes_from_the_next_one(vocabulary: str) -> None:
    """CrewAI's shape: no tool span at all; each model call asks for a call and carries the last ones' results."""
    h = make_harness(NO_PROGRESS)
    with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        answered: dict[str, str] = {}
        for i in range(4):
            _chat(h, dict(answered), (f"c{i}", "lookup", {"city": "Paris", "try": i}), vocabulary)
            answered[f"c{i}"] = DOWN
        _chat(h, answered, None, vocabulary)
    assert _no_progress(h) == [("chat gpt-4o", 2, "c1"), ("chat gpt-4o", 3, "c2"), ("chat gpt-4o", 4, "c3")]
    assert [(r.kind, r.run_length, r.tier) for r in h.reminders] == [("no_progress", 3, "gentle")]


def test_past_the_bound_the_oldest_waiting_call_is_taken_as_having_no_outcome() -> None:
    from otel_repeat_guard.core.detectors.no_progress import MAX_AWAITING

    detector = NoProgressDetector((2,))
    for i in range(MAX_AWAITING + 1):
        detector.observe(Call("t", bytes([i]), None, f"id{i}"))
    found = detector.outcomes({f"id{i}": b"same" for i in range(MAX_AWAITING + 1)})
    assert [d.run_length for _, d in found] == list(range(2, MAX_AWAITING + 1))  # id0 went: the run starts at id1
    assert [call.awaits for call, _ in found][:2] == ["id2", "id3"]


def test_a_run_with_no_detector_state_has_nothing_to_answer() -> None:
    from otel_repeat_guard.core.chains import ChainTracker
    from otel_repeat_guard.core.detectors import detectors_for

    tracker = ChainTracker(10, None, detectors=detectors_for(NO_PROGRESS))
    assert tracker.outcomes("never seen", {"id": b"x"}) == []
    assert ChainTracker(10, None).outcomes("never seen", {}) == []


def test_shapes_of_calls_have_no_outcomes_to_wait_for() -> None:
    from otel_repeat_guard.core.detectors import CycleDetector, RepeatDetector

    assert RepeatDetector().outcomes({"id": b"x"}) == [] and CycleDetector((2,), 3).outcomes({"id": b"x"}) == []
