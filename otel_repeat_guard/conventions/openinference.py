"""OpenInference (Arize): ``openinference.span.kind`` TOOL and AGENT spans.

Emitted by the langchain/langgraph, openai-agents, smolagents, llama-index and other
OpenInference instrumentors.
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
    str_or_none,
    tool_name,
)
from otel_repeat_guard.conventions.requests import openinference_output_messages
from otel_repeat_guard.conventions.responses import openinference_input_messages
from otel_repeat_guard.core.canonical import parse_exactly

_KIND: Final = "openinference.span.kind"
_CALL_WRAPPER: Final = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
_REDACTED: Final = "__REDACTED__"  # what OPENINFERENCE_HIDE_INPUTS / hide_inputs records instead of the input


def unwrap_call(value: Any) -> Any:
    """The keyword arguments inside a Python call wrapper, else ``value`` itself.

    LlamaIndex's ``FunctionTool.acall`` records ``{"kwargs": {...}}``, smolagents' tools
    ``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``. The wrapper is the same
    on every call, so comparing is unaffected; a reminder should quote the arguments alone.
    """
    if not isinstance(value, str) or '"kwargs"' not in value:
        return value
    try:
        parsed = parse_exactly(value)
    except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit: compared as it is
        return value
    if (
        isinstance(parsed, dict)
        and isinstance(parsed.get("kwargs"), dict)
        and not parsed.get("args")
        and parsed.keys() <= _CALL_WRAPPER
    ):
        return parsed["kwargs"]
    return value


class OpenInferenceConvention(BuiltInConvention):
    """Tool spans have ``openinference.span.kind == "TOOL"``; agent runs ``"AGENT"``; model calls ``"LLM"``.

    The tool name is ``tool.name`` (after ``gen_ai.tool.name``), else the span name, which
    these instrumentors set to the tool's name. The arguments are ``input.value`` (the
    openai-agents instrumentor records the model's raw argument string, whitespace and all;
    canonicalization parses it). ``tool.parameters`` is the tool's schema, never read as
    arguments. A redacted input (``__REDACTED__``) counts as unknown; a Python call wrapper
    (LlamaIndex, smolagents) is unwrapped to its keyword arguments. Agent runs are named
    by ``agent.name``, else by the span name (set at start, while ``agent.name`` only
    arrives at the span's end).

    LlamaIndex's instrumentation kinds every traced method of an LLM object ``LLM``, and sets every
    attribute only at a span's end. Its ``FunctionCallingLLM._prepare_chat_with_tools`` builds the
    request and calls no model: not a model call. A workflow agent's ``run_agent_step`` step holds
    the model calls and ends before the tools it asked for run, in ``call_tool`` steps beside it, all
    under the workflow's run span: a step, never the run (nothing but its name says so while it is open).
    """

    __slots__ = ()
    tool_marks = (Mark(_KIND, "TOOL"),)
    model_marks = (Mark(_KIND, "LLM"),)
    model_request_keys = ("llm.input_messages.0.message.role", "llm.model_name", "llm.invocation_parameters")
    """Attributes of LLM spans only. The Haystack instrumentor sets the request's messages as a chat generator's
    span starts and its kind only at its end, after the client's own model-call span inside it."""
    not_model_names = ("._prepare_chat_with_tools",)
    step_names = (".run_agent_step",)

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        if attributes.get(_KIND) != "TOOL":
            return None
        tool = tool_name(name, attributes) or str_or_none(name)
        if tool is None:
            return None
        arguments = attributes.get("input.value", MISSING)
        if arguments == _REDACTED:
            arguments = MISSING
        return (tool, unwrap_call(arguments), None, None, False, call_id_of(attributes))

    def requested_calls(
        self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> list[RequestedCall]:
        return openinference_output_messages(attributes)

    def tool_responses(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> dict[str, Any]:
        return openinference_input_messages(attributes)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        if attributes.get(_KIND) != "AGENT":
            return None
        return AgentRun(agent_name=str_or_none(attributes.get("agent.name")) or str_or_none(name))


_NODE_MARK: Final = '"langgraph_node"'


def langgraph_node(attributes: Mapping[str, Any]) -> str | None:
    """The LangGraph node a model call ran in, from OpenInference's ``metadata``: its node span is one step of
    the graph's run, never the run itself (every node span gets its attributes only at its end, so the model
    call that ran in it is what says so). None for any other span: one lookup and a substring test."""
    metadata = attributes.get("metadata")
    if type(metadata) is not str or _NODE_MARK not in metadata:
        return None
    try:
        node = parse_exactly(metadata).get("langgraph_node")
    except (ValueError, AttributeError, RecursionError):
        return None
    return node if isinstance(node, str) and node else None
