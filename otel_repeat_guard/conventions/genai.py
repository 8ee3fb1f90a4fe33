"""The OpenTelemetry GenAI semantic conventions (``gen_ai.*``).

Emitted by pydantic-ai (format 5 and later), strands-agents, google-adk and, alongside
its own vocabulary, OpenLLMetry.
"""

from __future__ import annotations

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
    call_id_of,
    event_name,
    gen_ai_agent,
    str_or_none,
    tool_name,
)
from otel_repeat_guard.conventions.requests import gen_ai_requests
from otel_repeat_guard.conventions.responses import gen_ai_input_messages

_ADK_ARGUMENTS: Final = "gcp.vertex.agent.tool_call_args"  # google-adk's legacy telemetry schema
OPERATION: Final = "gen_ai.operation.name"
EXECUTE_TOOL: Final = "execute_tool"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
AGENT_ID: Final = "gen_ai.agent.id"
IS_NESTED: Final = "gen_ai.invocation.is_nested"
AGENT_NAME: Final = "gen_ai.agent.name"
_INVOKE_AGENT = "invoke_agent"
INVOCATIONS: Final = (_INVOKE_AGENT, "invoke_workflow", "handle_conversation_turn")
"""The operations of the invocation spans (agent, workflow and conversation-turn runs), each a run of the calls
under it, whatever the span's kind: ``invoke_agent`` has a client form (``gen_ai.invoke_agent.client``, span kind
CLIENT: a remote agent, with ``gen_ai.provider.name``) and an internal form (``gen_ai.invoke_agent.internal``,
span kind INTERNAL: an in-process agent), both read here alike; ``invoke_agent`` alone is the older conventions'
operation."""


def _arguments_from_events(events: Sequence[EventLike]) -> Any:
    """strands-agents' default schema: the arguments are the ``content`` of a ``gen_ai.tool.message`` event."""
    for event in events:
        if event_name(event) == "gen_ai.tool.message":
            attributes = event.attributes or {}
            content = attributes.get("content", MISSING)
            if content is not MISSING:
                return content
    return MISSING


class GenAIConvention(BuiltInConvention):
    """Tool spans have ``gen_ai.operation.name == "execute_tool"``; agent runs are ``invoke_agent``;
    model calls are ``chat``, ``text_completion`` or ``generate_content``.

    Arguments: ``gen_ai.tool.call.arguments``, else google-adk's legacy
    ``gcp.vertex.agent.tool_call_args``, else strands-agents' ``gen_ai.tool.message`` event.
    The agent: ``gen_ai.agent.id`` on the tool span is the chain key; run spans are the invocations
    (either form, client or internal): ``gen_ai.operation.name`` ``invoke_agent``, ``invoke_workflow`` or
    ``handle_conversation_turn``, or a name starting with one (many are named so at start and get their
    attributes only at the end).
    """

    __slots__ = ()
    tool_marks = (Mark(OPERATION, EXECUTE_TOOL),)
    model_marks = tuple(Mark("gen_ai.operation.name", op) for op in ("chat", "text_completion", "generate_content"))
    agent_id_marks = tuple(Mark(OPERATION, operation) for operation in INVOCATIONS)  # as agent_run reads them
    agent_id_name_starts = INVOCATIONS

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        if attributes.get(OPERATION) != EXECUTE_TOOL:
            return None
        tool = attributes.get(TOOL_NAME)
        if not isinstance(tool, str) or not tool:
            tool = tool_name(name, attributes)
            if tool is None:
                return None
        arguments = attributes.get(TOOL_ARGUMENTS, MISSING)
        if arguments is MISSING:
            arguments = attributes.get(_ADK_ARGUMENTS, MISSING)
            if arguments is MISSING:
                arguments = _arguments_from_events(events)
        call_id = call_id_of(attributes)
        if AGENT_ID in attributes or AGENT_NAME in attributes:
            return (tool, arguments, *gen_ai_agent(attributes), False, call_id)
        return (tool, arguments, None, None, False, call_id)  # the common case, without two more calls

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        """``gen_ai.output.messages``, else the older ``gen_ai.choice`` events."""
        return gen_ai_requests(attributes, events)

    def tool_responses(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> dict[str, Any]:
        return gen_ai_input_messages(attributes)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        operation = attributes.get(OPERATION)
        if operation not in INVOCATIONS:
            operation = next((op for op in INVOCATIONS if name.startswith(op)), None)
            if operation is None:
                return None
        agent_name = str_or_none(attributes.get("gen_ai.agent.name"))
        if agent_name is None and name.startswith(f"{operation} "):
            agent_name = name[len(operation) + 1 :].strip() or None
        return AgentRun(str_or_none(attributes.get(AGENT_ID)), agent_name, attributes.get(IS_NESTED) is True)
