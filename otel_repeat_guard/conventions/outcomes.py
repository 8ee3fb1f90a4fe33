"""A tool call's outcome, as the no-progress detector compares it: the error if there is one, else the result.

Read in each vocabulary: ``gen_ai.tool.call.result`` (GenAI), ``output.value``
(OpenInference), ``traceloop.entity.output`` (OpenLLMetry), ``tool_response`` (pydantic-ai
format 2), ``ai.toolCall.result`` (the Vercel AI SDK); the error from an ``exception`` event (type and message), else ``error.type`` and
the span status description. A framework's envelope is unwrapped first, so a per-call id or an
echo of the input does not make every outcome distinct:

- LangGraph's ``ToolMessage`` under OpenInference (``{"type": "tool", "data": {..., "tool_call_id"}}``)
  and under OpenLLMetry (``{"output": {"lc": 1, "kwargs": {..., "tool_call_id"}}, "kwargs": ...}``):
  its ``content``;
- LlamaIndex's ``ToolOutput`` (it carries ``raw_input``): its ``content``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import xxhash
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.conventions.base import MISSING, EventLike, call_failed, event_name, first_present
from otel_repeat_guard.core.canonical import canonical_or_none, parse_exactly

RESULT_KEYS: Final = (
    "gen_ai.tool.call.result",
    "output.value",
    "traceloop.entity.output",
    "tool_response",
    "ai.toolCall.result",
)
_DEPTH: Final = 6  # envelopes nest a few levels at most


def unwrap_envelope(value: Any) -> Any:
    """The tool's own output inside a framework's envelope, else ``value`` (parsed, if it was JSON text)."""
    if isinstance(value, str):
        try:
            value = parse_exactly(value)
        except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit: compared as it is
            return value
    for _ in range(_DEPTH):
        if not isinstance(value, dict):
            return value
        if "tool_call_id" in value or "raw_input" in value:  # LangChain's ToolMessage, LlamaIndex's ToolOutput
            return value.get("content", value.get("raw_output"))
        if isinstance(value.get("data"), dict) and value.get("type") == "tool":  # OpenInference's message dict
            value = value["data"]
        elif isinstance(value.get("output"), dict):  # OpenLLMetry's callback wrapper
            value = value["output"]
        elif value.get("lc") == 1 and isinstance(value.get("kwargs"), dict):  # LangChain's serialized object
            value = value["kwargs"]
        else:
            return value
    return value


def _error(attributes: Mapping[str, Any], events: Sequence[EventLike], status_description: str | None) -> Any:
    for event in events if len(events) else ():
        if event_name(event) == "exception":
            found = event.attributes or {}
            return {"error": found.get("exception.type"), "message": found.get("exception.message")}
    kind = attributes.get("error.type")
    if kind is not None or status_description:
        return {"error": kind, "message": status_description}
    return MISSING


def outcome_of(
    attributes: Mapping[str, Any], events: Sequence[EventLike], failed: bool, status_description: str | None
) -> tuple[Any, bool]:
    """The value to compare, and whether it is an error: the error (``{"error": type, "message": ...}``)
    when the call failed, else the unwrapped result; ``MISSING`` when neither was recorded."""
    if failed:
        error = _error(attributes, events, status_description)
        if error is not MISSING:
            return error, True
    result = first_present(attributes, RESULT_KEYS)
    return (MISSING if result is MISSING else unwrap_envelope(result)), False


def outcome_and_key(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[EventLike], error: bool
) -> tuple[Any, bytes | None]:
    """The call's outcome (the error, else the result) and its key; (MISSING, None) when none was recorded."""
    status = span.status
    value, is_error = outcome_of(
        attributes, events, call_failed(error, status.status_code, attributes, events), status.description
    )
    return value, (None if value is MISSING else outcome_digest(value, is_error))


def outcome_digest(value: Any, is_error: bool = False) -> bytes | None:
    """What no-progress detection compares of an outcome; None for a value with no canonical form."""
    canonical = canonical_or_none(value)
    if canonical is None:
        return None
    return xxhash.xxh3_128_digest((b"E" if is_error else b"R") + canonical)  # an error never equals a result
