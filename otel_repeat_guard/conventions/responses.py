"""Reading the tool results a model request carries back (its ``tool`` messages), by call id, in each vocabulary.

A runtime whose tool spans record no result (MCP over stdio, CrewAI and Haystack under OpenLLMetry, which
record no tool span at all) still sends each result back to the model, in the next request's messages:
the outcome that no-progress detection compares. Read only for a run whose calls await their outcome.

- GenAI (``gen_ai.input.messages``, OpenLLMetry 0.62 and later too): parts of ``type`` ``tool_call_response``
  (``id``, ``response``), or a chat-completions ``tool`` message (``tool_call_id``, ``content``);
- OpenInference: ``llm.input_messages.{i}.message.{role,tool_call_id,content}``;
- OpenLLMetry before 0.62: ``gen_ai.prompt.{i}.{role,tool_call_id,content}``.

A message that is not a tool's answer, or a call id that is not text, is passed over; the last answer
given for an id counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from otel_repeat_guard.conventions.base import MISSING, str_or_none
from otel_repeat_guard.conventions.requests import flattened, parsed

_INPUT_MESSAGES: Final = "gen_ai.input.messages"
_OPENINFERENCE: Final = re.compile(r"llm\.input_messages\.(\d+)\.message\.(role|tool_call_id|content)")
_TRACELOOP: Final = re.compile(r"gen_ai\.prompt\.(\d+)\.(role|tool_call_id|content)")

ToolResponses = dict[str, Any]
"""Call id -> the result the request carries back for it (text, or the part's JSON value)."""


def gen_ai_input_messages(attributes: Mapping[str, Any]) -> ToolResponses:
    """``gen_ai.input.messages``: ``tool_call_response`` parts, and chat-completions ``tool`` messages."""
    raw = attributes.get(_INPUT_MESSAGES)
    if raw is None or (isinstance(raw, str) and "tool" not in raw):
        return {}  # no message of a tool's: nothing to parse
    messages = parsed(raw)
    out: ToolResponses = {}
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping):
            continue
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call_response":
                _answer(out, part.get("id"), part.get("response", MISSING))
        if message.get("role") == "tool" and "tool_call_id" in message:
            _answer(out, message.get("tool_call_id"), message.get("content", MISSING))
    return out


def _answer(out: ToolResponses, call_id: Any, response: Any) -> None:
    key = str_or_none(call_id)
    if key is not None and response is not MISSING and response is not None:
        out[key] = response


def _flattened(attributes: Mapping[str, Any], pattern: re.Pattern[str]) -> ToolResponses:
    """Messages spelt out one attribute per field, ``<prefix>.{i}.<field>``: the tool messages' answers."""
    out: ToolResponses = {}
    for message in flattened(attributes, pattern):
        if message.get("role") == "tool":
            _answer(out, message.get("tool_call_id"), message.get("content"))
    return out


def openinference_input_messages(attributes: Mapping[str, Any]) -> ToolResponses:
    """OpenInference: ``llm.input_messages.{i}.message.{role,tool_call_id,content}``."""
    return _flattened(attributes, _OPENINFERENCE)


def traceloop_prompts(attributes: Mapping[str, Any]) -> ToolResponses:
    """OpenLLMetry before 0.62: ``gen_ai.prompt.{i}.{role,tool_call_id,content}``."""
    return _flattened(attributes, _TRACELOOP)
