"""Outcomes as the no-progress detector compares them, from the envelopes real frameworks record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_repeat_guard.conventions import MISSING
from otel_repeat_guard.conventions.outcomes import outcome_of, unwrap_envelope

# Recorded from the real instrumentations (tests/integrations drive them): LangGraph's ToolMessage
# under OpenInference and under OpenLLMetry, and LlamaIndex's ToolOutput.
OPENINFERENCE_TOOL_MESSAGE = json.dumps(
    {
        "type": "tool",
        "data": {"content": "Paris: 18 degrees", "type": "tool", "name": "lookup", "tool_call_id": "call_1"},
    }
)
OPENLLMETRY_TOOL_MESSAGE = json.dumps(
    {
        "output": {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {"content": "Paris: 18 degrees", "type": "tool", "name": "lookup", "tool_call_id": "call_2"},
        },
        "kwargs": {"tags": ["seq:step:1"], "name": "lookup"},
    }
)
LLAMA_INDEX_TOOL_OUTPUT = json.dumps(
    {
        "content": "Paris: 18 degrees",
        "tool_name": "lookup",
        "raw_input": {"kwargs": {"city": "Paris"}},
        "raw_output": "x",
    }
)


@pytest.mark.parametrize("recorded", [OPENINFERENCE_TOOL_MESSAGE, OPENLLMETRY_TOOL_MESSAGE, LLAMA_INDEX_TOOL_OUTPUT])
def test_a_per_call_id_or_an_echo_of_the_input_is_unwrapped_away(recorded: str) -> None:
    assert unwrap_envelope(recorded) == "Paris: 18 degrees"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ('{"a": 1}', {"a": 1}),
        ([1, 2], [1, 2]),
        ({"raw_input": {}, "raw_output": "out"}, "out"),
        ({"output": {"output": {"output": {"output": {"output": {"output": {"output": 1}}}}}}}, {"output": 1}),
    ],
)
def test_what_is_not_an_envelope_stays(value: Any, expected: Any) -> None:
    assert unwrap_envelope(value) == expected


class Event:
    def __init__(self, name: str, attributes: dict[str, Any] | None) -> None:
        self.name, self.attributes = name, attributes


def test_the_error_is_the_outcome_when_there_is_one() -> None:
    exception = [Event("other", None), Event("exception", {"exception.type": "E", "exception.message": "m"})]
    result = {"gen_ai.tool.call.result": "ok"}
    assert outcome_of(result, exception, True, "desc") == ({"error": "E", "message": "m"}, True)
    assert outcome_of({**result, "error.type": "Denied"}, (), True, "no") == (
        {"error": "Denied", "message": "no"},
        True,
    )
    assert outcome_of(result, (), True, None) == ("ok", False)  # failed, but nothing says how: the result
    assert outcome_of({"output.value": "x"}, exception, False, None) == ("x", False)
    assert outcome_of({}, (), False, None) == (MISSING, False)
