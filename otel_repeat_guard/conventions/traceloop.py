"""OpenLLMetry / Traceloop: ``traceloop.span.kind`` tool, agent and workflow spans."""

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
    gen_ai_agent,
    str_or_none,
    tool_name,
)
from otel_repeat_guard.conventions.genai import AGENT_ID, AGENT_NAME
from otel_repeat_guard.conventions.requests import gen_ai_output_messages, traceloop_completions
from otel_repeat_guard.conventions.responses import gen_ai_input_messages, traceloop_prompts
from otel_repeat_guard.core.canonical import parse_exactly

_KIND: Final = "traceloop.span.kind"
_ARGUMENTS: Final = "gen_ai.tool.call.arguments"  # else
_ENTITY_INPUT: Final = "traceloop.entity.input"
_RUN_KINDS: Final = ("agent", "workflow")


def unwrap_langchain_inputs(value: Any) -> Any:
    """The real arguments inside OpenLLMetry's LangChain callback wrapper, else ``value`` itself.

    OpenLLMetry records ``{"input_str": <python repr>, "tags": …, "metadata": {…,
    "langgraph_step": <changes every call>}, "inputs": {<the arguments>}, "kwargs": …}``;
    hashing the wrapper would never find a repeat.
    """
    parsed = value
    if isinstance(value, (str, bytes)):
        # no text names that key unless it spells it, or escapes a letter of it: never parsed (a backslash is
        # looked for first: one memchr, where looking for "\u" stops at every "u")
        if type(value) is str and '"input_str"' not in value and ("\\" not in value or "\\u" not in value):
            return value
        try:
            parsed = parse_exactly(value)
        except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit: compared as it is
            return value
    if (
        not isinstance(parsed, dict)
        or "input_str" not in parsed
        or ("inputs" not in parsed and "metadata" not in parsed)
    ):
        return value
    inputs = parsed.get("inputs")
    if inputs is not None:
        return inputs
    input_str = parsed.get("input_str")
    return input_str if isinstance(input_str, str) else MISSING


def unwrap_mcp_input(value: Any, tool: str) -> Any:
    """The arguments inside OpenLLMetry's MCP client record ``{"tool_name": <tool>, "arguments": {...}}``."""
    parsed = value
    if isinstance(value, (str, bytes)):
        named = b'"tool_name"' in value if isinstance(value, bytes) else '"tool_name"' in value  # as UTF-8 would
        if not named:
            return value
        try:
            parsed = parse_exactly(value)
        except (ValueError, RecursionError):
            return value
    if isinstance(parsed, dict) and parsed.keys() == {"tool_name", "arguments"} and parsed["tool_name"] == tool:
        return parsed["arguments"]
    return value


class TraceloopConvention(BuiltInConvention):
    """Tool spans have ``traceloop.span.kind == "tool"``; agent runs ``agent`` or ``workflow``; model
    calls carry ``llm.request.type`` ``chat`` or ``completion``.

    Arguments come from ``gen_ai.tool.call.arguments`` or ``traceloop.entity.input`` with
    the LangChain wrapper unwrapped. With content tracing off
    (``TRACELOOP_TRACE_CONTENT=false``) neither is recorded and the arguments are unknown.
    """

    __slots__ = ()
    tool_marks = (Mark(_KIND, "tool"),)
    model_marks = (Mark("llm.request.type", "chat"), Mark("llm.request.type", "completion"))
    """The two unwrappers' keys: an object with neither is the arguments as they are."""
    agent_id_marks = tuple(Mark(_KIND, kind) for kind in _RUN_KINDS)  # the kinds agent_run reads

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        if attributes.get(_KIND) != "tool":
            return None
        tool = tool_name(name, attributes)
        if tool is None:
            return None
        arguments = attributes.get(_ARGUMENTS, MISSING)  # first_present, inline: the dict's own lookups
        if arguments is MISSING:
            arguments = attributes.get(_ENTITY_INPUT, MISSING)
        if arguments is not MISSING:
            arguments = unwrap_mcp_input(unwrap_langchain_inputs(arguments), tool)
        if AGENT_ID in attributes or AGENT_NAME in attributes:
            return (tool, arguments, *gen_ai_agent(attributes), False, call_id_of(attributes))
        return (tool, arguments, None, None, False, call_id_of(attributes))  # the common case, as GenAI's read

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        """``gen_ai.output.messages`` (0.62 and later), else ``gen_ai.completion.{i}.tool_calls.{j}.*``."""
        return gen_ai_output_messages(attributes) or traceloop_completions(attributes)

    def tool_responses(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> dict[str, Any]:
        return gen_ai_input_messages(attributes) or traceloop_prompts(attributes)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        if attributes.get(_KIND) not in _RUN_KINDS:
            return None
        agent_name = (
            str_or_none(attributes.get("gen_ai.agent.name"))
            or str_or_none(attributes.get("traceloop.entity.name"))
            or str_or_none(name)
        )
        return AgentRun(agent_id=str_or_none(attributes.get("gen_ai.agent.id")), agent_name=agent_name)
