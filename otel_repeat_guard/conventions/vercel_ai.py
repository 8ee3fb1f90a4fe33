"""The Vercel AI SDK (``ai`` on npm): its own ``ai.*`` span vocabulary, emitted with
``experimental_telemetry: {isEnabled: true}``.

A JavaScript runtime cannot host the guard, but its spans reach the collector and so ``ingest``,
``ingest --replay`` and ``doctor``. One ``generateText`` / ``streamText`` call is one agent run (its
span, named after the call, is the run span); each of its steps is one model call
(``ai.generateText.doGenerate`` / ``ai.streamText.doStream``, with usage in ``ai.usage.*`` and
``gen_ai.usage.*`` beside it: see :mod:`otel_repeat_guard.conventions.usage`); each tool the
model asked for runs in an ``ai.toolCall`` span beside the steps, under the run span:

=============== ============================================================================
tool name       ``ai.toolCall.name``
arguments       ``ai.toolCall.args`` (JSON text; recorded unless ``recordOutputs: false``)
call id         ``ai.toolCall.id`` (the model's id, as in the step's ``ai.response.toolCalls``)
result          ``ai.toolCall.result`` (see :mod:`otel_repeat_guard.conventions.outcomes`)
requested calls ``ai.response.toolCalls`` on a step: ``[{toolCallId, toolName, input}]`` (``args``
                before AI SDK 5; ``input`` is text from ``doGenerate``, an object from ``doStream``)
agent name      ``ai.telemetry.functionId`` on the run span, else the span's name
=============== ============================================================================

All of it is recognized by span name (a lookup the router makes for every span anyway): the names are
the SDK's operation ids, the same from AI SDK 4 to 6 (and 7's ``LegacyOpenTelemetry``), whatever
``functionId`` says. AI SDK 7's default ``@ai-sdk/otel`` integration emits GenAI spans instead
(``invoke_agent``, ``chat``, ``execute_tool``): :class:`~otel_repeat_guard.conventions.GenAIConvention` reads those. A step's tool spans
may end while it is still open, and ``issues_while_open`` declares every step so: a streamed step runs
each tool as soon as the stream delivers its call; and the JavaScript SDK stamps a span's start to the
millisecond and its end as start plus duration, so a tool span that ran just after its step can seem to
end a fraction of a millisecond before it. The guard takes the run's open step as their issuer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_repeat_guard.conventions.base import (
    MISSING,
    AgentRun,
    BuiltInConvention,
    EventLike,
    Mark,
    RawToolCall,
    RequestedCall,
    str_or_none,
)

TOOL_CALL: Final = "ai.toolCall"
TOOL_NAME_KEY: Final = "ai.toolCall.name"
ARGUMENTS_KEY: Final = "ai.toolCall.args"
_RUNS: Final = ("ai.generateText", "ai.streamText")
STEPS: Final = (
    "ai.generateText.doGenerate",
    "ai.streamText.doStream",
    "ai.generateObject.doGenerate",
    "ai.streamObject.doStream",
)
_REQUESTED: Final = "ai.response.toolCalls"
_FUNCTION_ID: Final = "ai.telemetry.functionId"


def vercel_ai_tool_calls(attributes: Mapping[str, Any]) -> list[RequestedCall]:
    """The tool calls a step asked for: ``ai.response.toolCalls``, ``[{toolCallId, toolName, input | args}]``."""
    raw = attributes.get(_REQUESTED)
    if type(raw) is not str:
        return []
    try:
        calls = json.loads(raw)
    except ValueError:
        return []
    out: list[RequestedCall] = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        tool = str_or_none(call.get("toolName"))
        if tool is None:
            continue
        arguments = call.get("input", call.get("args", MISSING))
        out.append(
            RequestedCall(str_or_none(call.get("toolCallId")), tool, MISSING if arguments is None else arguments)
        )
    return out


class VercelAIConvention(BuiltInConvention):
    """Tool spans are named ``ai.toolCall``; runs ``ai.generateText`` / ``ai.streamText``; model calls are
    their steps (``….doGenerate`` / ``….doStream``, ``generateObject``'s and ``streamObject``'s too)."""

    __slots__ = ()
    tool_marks = (Mark(None, TOOL_CALL),)
    model_marks = tuple(Mark(None, step) for step in STEPS)
    issues_while_open = STEPS

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        if name != TOOL_CALL:
            return None
        tool = attributes.get(TOOL_NAME_KEY)
        if type(tool) is not str or not tool:
            return None
        call_id = attributes.get("ai.toolCall.id")
        return (
            tool,
            attributes.get(ARGUMENTS_KEY, MISSING),
            None,
            None,
            False,
            call_id if type(call_id) is str else None,
        )

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        return vercel_ai_tool_calls(attributes)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        if name not in _RUNS:
            return None
        return AgentRun(agent_name=str_or_none(attributes.get(_FUNCTION_ID)))
