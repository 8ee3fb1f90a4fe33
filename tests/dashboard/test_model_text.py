"""A model's output as its text: the envelopes the instrumentations record, read back to what the model said."""

from __future__ import annotations

import json

from otel_repeat_guard.core.reminders import arguments_preview
from otel_repeat_guard.store.queries.model_text import model_text

GENAI = json.dumps(
    [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": 'Calling sql_query with {"sql": "SELECT 1"}'},
                {"type": "tool_call", "id": "c1", "name": "sql_query", "arguments": {"sql": "SELECT 1"}},
            ],
        }
    ]
)
# OpenInference's LangChain instrumentation (tests/fixtures/langchain_openinference), a tool call and no text.
LANGCHAIN = json.dumps(
    {
        "generations": [
            [
                {
                    "text": "",
                    "generation_info": None,
                    "type": "ChatGeneration",
                    "message": {
                        "lc": 1,
                        "type": "constructor",
                        "id": ["langchain", "schema", "messages", "AIMessage"],
                        "kwargs": {
                            "content": "",
                            "type": "ai",
                            "tool_calls": [{"name": "lookup", "args": {"city": "Paris"}, "id": "call_1"}],
                        },
                    },
                }
            ]
        ],
        "llm_output": None,
        "run": None,
        "type": "LLMResult",
    }
)


def test_a_genai_message_reads_as_its_text_and_its_tool_calls() -> None:
    assert model_text(GENAI) == 'Calling sql_query with {"sql": "SELECT 1"}\n→ sql_query {"sql":"SELECT 1"}'


def test_a_langchain_result_reads_as_its_generations() -> None:
    assert model_text(LANGCHAIN) == '→ lookup {"city":"Paris"}'
    answered = LANGCHAIN.replace('"text": ""', '"text": "It is sunny in Paris."')
    assert model_text(answered) == "It is sunny in Paris."


def test_an_openai_completion_reads_as_its_message() -> None:
    completion = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "1", "function": {"name": "grep", "arguments": '{"q":"x"}'}}],
                }
            }
        ]
    }
    assert model_text(json.dumps(completion)) == '→ grep {"q":"x"}'


def test_a_preview_cut_short_reads_up_to_the_cut() -> None:
    long = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "x" * 300 + ' "quoted"'}]}])
    cut = arguments_preview(long, 100)
    assert cut.endswith("more characters omitted]")
    assert model_text(cut) == "x" * (100 - len('[{"role": "assistant", "parts": [{"type": "text", "content": "')) + "…"


def test_text_in_no_known_shape_is_shown_as_stored() -> None:
    for stored in ("Here is what I found.", '{"messages": []}', "[1, 2]", "{not json", "", '{"a": "b"}'):
        assert model_text(stored) == stored
