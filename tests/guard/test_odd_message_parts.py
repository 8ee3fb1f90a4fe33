"""A bad value costs only itself in a model's messages: an odd part is skipped, its siblings are read.

The fuzz test builds messages whose parts are well formed or odd in every way JSON allows (a number,
text, null, an array, an object of the wrong type, ``"parts": 5``), with numbers no float or int holds
in the arguments, and checks the reader against what it was built from: every well-formed call is read,
in order, with arguments that compare equal to the same arguments sent as a tool span's text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_repeat_guard.conventions import MISSING
from otel_repeat_guard.conventions.base import AgentRun, EventLike, Mark, RequestedCall, ToolCall
from otel_repeat_guard.conventions.genai import GenAIConvention
from otel_repeat_guard.conventions.openinference import langgraph_node, unwrap_call
from otel_repeat_guard.conventions.outcomes import unwrap_envelope
from otel_repeat_guard.conventions.requests import (
    gen_ai_choice_events,
    gen_ai_output_messages,
    openinference_output_messages,
    traceloop_completions,
)
from otel_repeat_guard.conventions.traceloop import unwrap_langchain_inputs, unwrap_mcp_input
from otel_repeat_guard.core.canonical import arguments_key

from .conftest import Harness, make_harness

HUGE = "9" * 5_000  # past Python's int conversion limit
DEEP = "[" * 5_000 + "]" * 5_000  # past the recursion limit
GOOD = {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"city": "Paris"}}


def _read(messages: Any) -> list[RequestedCall]:
    return gen_ai_output_messages({"gen_ai.output.messages": json.dumps(messages)})


def test_a_message_whose_parts_is_not_a_list_costs_only_that_message() -> None:
    for odd in (5, 2.5, True, "tool_call", {"type": "tool_call", "name": "x"}):
        messages = [{"role": "assistant", "parts": odd}, {"role": "assistant", "parts": [GOOD]}]
        assert _read(messages) == [RequestedCall("c1", "lookup", {"city": "Paris"})], odd
    beside = [{"parts": 5, "tool_calls": [{"id": "c2", "function": {"name": "grep", "arguments": "{}"}}]}]
    assert _read(beside) == [RequestedCall("c2", "grep", "{}")]  # the message's own tool_calls are still read


def test_a_part_that_is_not_an_object_is_skipped_and_its_siblings_are_read() -> None:
    odd_parts = [5, "tool_call", None, [GOOD], True, {"type": "tool_call", "name": 7}, {"type": ["tool_call"]}]
    parts = [*odd_parts, GOOD, 1.5, {**GOOD, "id": "c2", "name": "grep"}]
    assert _read([{"role": "assistant", "parts": parts}]) == [
        RequestedCall("c1", "lookup", {"city": "Paris"}),
        RequestedCall("c2", "grep", {"city": "Paris"}),
    ]
    assert _read([5, None, "x", {"parts": [GOOD]}]) == [RequestedCall("c1", "lookup", {"city": "Paris"})]


def test_a_number_no_float_or_int_holds_costs_its_sibling_calls_nothing() -> None:
    huge = '{"type": "tool_call", "id": "c1", "name": "a", "arguments": {"n": ' + HUGE + "}}"
    far = '{"type": "tool_call", "id": "c2", "name": "b", "arguments": {"n": 1e999999999}}'
    text = '[{"role": "assistant", "parts": [' + huge + ", " + far + ', {"type": "tool_call", "name": "c"}]}]'
    calls = gen_ai_output_messages({"gen_ai.output.messages": text})
    assert [(c.call_id, c.tool_name) for c in calls] == [("c1", "a"), ("c2", "b"), (None, "c")]
    assert arguments_key(calls[0].arguments) == arguments_key('{"n": ' + HUGE + "}")  # as its tool span would say
    assert arguments_key(calls[1].arguments) == arguments_key('{"n": 10e999999998}')
    assert arguments_key(calls[1].arguments) != arguments_key('{"n": Infinity}')  # a value, not Infinity
    assert calls[2].arguments is MISSING


def test_messages_nested_past_the_recursion_limit_read_as_no_calls_and_never_raise() -> None:
    assert (
        gen_ai_output_messages({"gen_ai.output.messages": '[{"parts": [{"type": "tool_call"}]}, ' + DEEP + "]"}) == []
    )

    class Choice:
        name = "gen_ai.choice"
        attributes = {"tool_calls": DEEP, "message": DEEP}  # noqa: RUF012

    assert gen_ai_choice_events([Choice()]) == []


def test_an_index_past_the_conversion_limit_is_skipped_and_the_other_calls_are_read() -> None:
    openinference = "llm.output_messages.{}.message.tool_calls.{}.tool_call.function.name"
    assert openinference_output_messages(
        {openinference.format(HUGE, 0): "bad", openinference.format(0, HUGE): "bad", openinference.format(0, 1): "ok"}
    ) == [RequestedCall(None, "ok", MISSING)]
    traceloop = "gen_ai.completion.{}.tool_calls.{}.name"
    assert traceloop_completions({traceloop.format(HUGE, 0): "bad", traceloop.format(1, 0): "ok", 5: "x"}) == [  # type: ignore[dict-item]
        RequestedCall(None, "ok", MISSING)
    ]


def test_wrappers_nested_past_the_recursion_limit_are_compared_as_their_text() -> None:
    kwargs = '{"kwargs": ' + DEEP + "}"
    assert unwrap_call(kwargs) == kwargs
    langchain = '{"input_str": "x", "inputs": ' + DEEP + "}"
    assert unwrap_langchain_inputs(langchain) == langchain
    mcp = '{"tool_name": "t", "arguments": ' + DEEP + "}"
    assert unwrap_mcp_input(mcp, "t") == mcp
    assert unwrap_envelope(DEEP) == DEEP
    assert langgraph_node({"metadata": '{"langgraph_node": ' + DEEP + "}"}) is None


def test_wrappers_keep_a_number_no_float_or_int_holds_and_still_unwrap() -> None:
    inner = '{"n": ' + HUGE + ', "m": 1e400}'
    assert arguments_key(unwrap_call('{"kwargs": ' + inner + "}")) == arguments_key(inner)
    langchain = '{"input_str": "x", "metadata": {"langgraph_step": 3}, "inputs": ' + inner + "}"
    assert arguments_key(unwrap_langchain_inputs(langchain)) == arguments_key(inner)
    assert arguments_key(unwrap_mcp_input('{"tool_name": "t", "arguments": ' + inner + "}", "t")) == arguments_key(
        inner
    )
    assert langgraph_node({"metadata": '{"langgraph_node": "agent", "n": ' + HUGE + "}"}) == "agent"
    envelope = '{"type": "tool", "data": {"tool_call_id": "x", "content": ' + inner + "}}"
    assert arguments_key(unwrap_envelope(envelope)) == arguments_key(inner)


def _answered_steps(h: Harness, messages: str, tool_spans: int) -> None:
    """AutoGen's shape: each step's model span records what it asked for, then a tool span without
    arguments answers it by call id."""
    with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(tool_spans):
            with h.tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
                span.set_attribute("gen_ai.output.messages", messages)
            with h.tracer.start_as_current_span("execute_tool lookup") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup")
                span.set_attribute("gen_ai.tool.call.id", "c1")


def test_the_guard_counts_a_requested_call_whose_message_has_odd_parts_beside_it() -> None:
    messages = (
        '[{"role": "assistant", "parts": 5}, {"role": "assistant", "parts": [7, "x", null, '
        '{"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"n": 1e999999999, "m": ' + HUGE + "}}]}]"
    )
    h = make_harness()
    _answered_steps(h, messages, 3)
    assert h.run_lengths() == [1, 2, 3]
    h.provider.shutdown()


# -- fuzz: odd parts of every JSON type beside well-formed calls ----------------------------------

NUMBER_TEXTS = st.sampled_from(
    ["1", "-0", "2.5", "1e400", "-1e999999999", "1e9999999999999999999", "1e-999999999", HUGE, "-" + HUGE, "NaN"]
)
ODD_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
ODD_PARTS = ODD_VALUES.filter(
    lambda v: (
        not (isinstance(v, dict) and v.get("type") == "tool_call" and isinstance(v.get("name"), str) and v["name"])
    )
) | st.fixed_dictionaries(
    {"type": st.just("tool_call"), "name": st.none() | st.integers() | st.just("") | st.lists(st.text())}
)


@st.composite
def messages_text(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, str]]]:
    """JSON text of messages, and the (id, name, arguments text) of each well-formed call in it, in order."""
    expected: list[tuple[str, str, str]] = []
    messages: list[str] = []
    for m in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            messages.append('{"role": "assistant", "parts": ' + json.dumps(draw(ODD_VALUES)) + "}")
            continue
        parts: list[str] = []
        for p in range(draw(st.integers(0, 5))):
            if draw(st.booleans()):
                parts.append(json.dumps(draw(ODD_PARTS)))
                continue
            call_id, name = f"c{m}.{p}", draw(st.sampled_from(["lookup", "grep", "ünïcode"]))
            arguments = '{"n": ' + draw(NUMBER_TEXTS) + ', "q": ' + json.dumps(draw(st.text(max_size=4))) + "}"
            parts.append(
                json.dumps({"type": "tool_call", "id": call_id, "name": name})[:-1]
                + ', "arguments": '
                + arguments
                + "}"
            )
            expected.append((call_id, name, arguments))
        messages.append('{"role": "assistant", "parts": [' + ", ".join(parts) + "]}")
    if draw(st.booleans()):
        messages.insert(draw(st.integers(0, len(messages))), json.dumps(draw(ODD_VALUES)))  # an odd message
    return "[" + ", ".join(messages) + "]", expected


@settings(max_examples=200, deadline=None)
@given(messages_text())
def test_every_well_formed_call_is_read_whatever_its_siblings(case: tuple[str, list[tuple[str, str, str]]]) -> None:
    text, expected = case
    calls = gen_ai_output_messages({"gen_ai.output.messages": text})
    assert [(c.call_id, c.tool_name) for c in calls] == [(i, n) for i, n, _ in expected]
    for call, (_, _, arguments) in zip(calls, expected, strict=True):  # the same arguments as a tool span's text
        assert arguments_key(call.arguments) == arguments_key(arguments) is not None
    assert gen_ai_output_messages({"gen_ai.output.messages": text.encode()}) == calls  # bytes read alike


class _FailingRequests:
    """GenAI, with a request reader of the application's own that fails on a message it did not foresee
    (a plain class: the compiled build's conventions take no interpreted subclasses)."""

    tool_marks = (Mark("gen_ai.operation.name", "execute_tool"),)
    model_marks = (Mark("gen_ai.operation.name", "chat"),)

    def __init__(self) -> None:
        self._genai = GenAIConvention()

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        return self._genai.tool_call(name, attributes, events)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        return self._genai.agent_run(name, attributes)

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        raise RuntimeError("a message this reader did not foresee")


def test_a_request_reader_that_fails_costs_only_that_step_s_requests(caplog: pytest.LogCaptureFixture) -> None:
    h = make_harness(conventions=[_FailingRequests()])
    with caplog.at_level(logging.WARNING, "otel_repeat_guard"):
        _answered_steps(h, json.dumps([{"parts": [GOOD]}]), 2)  # tool spans with a call id but no arguments
        with h.agent_run("b", "agent-b"):
            for _ in range(3):
                h.call("grep", {"q": 1})
    assert h.run_lengths() == [1, 1, 1, 2, 3]  # unknown arguments are never identical; the next run counts
    unguarded = [
        dict(e.attributes or {}).get("repeat_tool_guard.reason")
        for s in h.tool_spans()
        for e in s.events
        if e.name == "repeat_tool_guard.unguarded"
    ]
    assert unguarded == ["no_arguments", "no_arguments"]  # counted as calls whose arguments are unknown
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING and "asked for" in r.getMessage()]
    assert len(failures) == 2 and all("'chat m'" in r.getMessage() for r in failures)  # once per step, never per span
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    h.provider.shutdown()


def test_a_wrapper_key_spelt_with_escapes_is_still_unwrapped_and_text_without_it_is_never_parsed() -> None:
    """The LangChain wrapper is looked for only in text that names its key: literally, or with a letter of
    it escaped (still the key once parsed). Text that names neither is its own arguments, as parsing it
    would have found; so is text that is not JSON at all."""
    escaped = '{"\\u0069nput_str": "x", "inputs": {"path": "a.py"}}'
    assert unwrap_langchain_inputs(escaped) == {"path": "a.py"}
    plain = '{"args": [], "kwargs": {"path": "a.py", "note": "no input_str key here"}}'
    assert unwrap_langchain_inputs(plain) is plain
    assert unwrap_langchain_inputs("not json") == "not json"
    assert unwrap_mcp_input('{"tool_name": "t", "arguments": {"q": 1}}', "t") == {"q": 1}
    assert unwrap_mcp_input(b'{"tool_name": "t", "arguments": {"q": 1}}', "t") == {"q": 1}
    other = '{"tool": "t", "arguments": {"q": 1}}'
    assert unwrap_mcp_input(other, "t") is other
