"""How tool calls and agents are read from span data, one vocabulary per module.

The default set covers the OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry
(Traceloop) and pydantic-ai's format 2. Pass ``conventions=[...]`` to
``RepeatGuardSpanProcessor`` to add your own, e.g. an :class:`AttributeConvention`, or
any object with the :class:`Convention` methods: ``[my_convention, *DEFAULT_CONVENTIONS]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_repeat_guard.conventions.base import MISSING, AgentRun, Convention, EventLike, ToolCall, agent_run_key
from otel_repeat_guard.conventions.declarative import AttributeConvention, SpanMatcher
from otel_repeat_guard.conventions.genai import GenAIConvention
from otel_repeat_guard.conventions.openinference import OpenInferenceConvention
from otel_repeat_guard.conventions.pydantic_ai import PydanticAIV2Convention
from otel_repeat_guard.conventions.traceloop import TraceloopConvention, unwrap_langchain_inputs

DEFAULT_CONVENTIONS: tuple[Convention, ...] = (
    PydanticAIV2Convention(),  # by span name only; before GenAI, whose attributes its tool spans also carry
    TraceloopConvention(),  # before GenAI: OpenLLMetry's gen_ai.tool.call.arguments is a wrapper to unwrap
    GenAIConvention(),
    OpenInferenceConvention(),
)
"""Every built-in vocabulary, in the order they are asked (the first that recognizes a span wins)."""


_BUILT_IN: tuple[type, ...] = (PydanticAIV2Convention, TraceloopConvention, GenAIConvention, OpenInferenceConvention)

ToolRouter = Callable[[str, Mapping[str, Any]], Sequence[Convention]]
AgentIdPrefilter = Callable[[Mapping[str, Any]], bool]


def _may_name_a_built_in_agent_id(attributes: Mapping[str, Any]) -> bool:
    """False when no built-in convention would read an agent id here (only gen_ai.agent.id carries one)."""
    return "gen_ai.agent.id" in attributes


def prefilters(conventions: Sequence[Convention]) -> tuple[ToolRouter, AgentIdPrefilter | None]:
    """Fast pre-checks: which conventions to ask about a span, and whether it may name an agent id.

    Asking every convention in turn costs a method call each, per span. For a set made only
    of built-in conventions, three dict lookups and a name comparison say which of them can
    recognize the span as a tool span (none, for nearly all spans), in their configured
    order. A set with any user convention is asked in full.
    """
    conventions = tuple(conventions)
    if not all(type(convention) in _BUILT_IN for convention in conventions):
        return (lambda name, attributes: conventions), None
    routes = tuple(
        tuple(c for c in conventions if mask & (1 << _BUILT_IN.index(type(c)))) for mask in range(1 << len(_BUILT_IN))
    )

    def route(name: str, attributes: Mapping[str, Any]) -> Sequence[Convention]:
        # One bit per built-in vocabulary whose tool-span mark the span carries, in _BUILT_IN's order.
        return routes[
            (name == "running tool")
            | (attributes.get("traceloop.span.kind") == "tool") << 1
            | (attributes.get("gen_ai.operation.name") == "execute_tool") << 2
            | (attributes.get("openinference.span.kind") == "TOOL") << 3
        ]

    return route, _may_name_a_built_in_agent_id


def find_tool_call(
    conventions: Sequence[Convention], name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]
) -> ToolCall | None:
    """The tool call read by the first convention that recognizes the span, if any."""
    for convention in conventions:
        call = convention.tool_call(name, attributes, events)
        if call is not None:
            return call
    return None


def find_agent_run(conventions: Sequence[Convention], name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
    """The agent run read by the first convention that recognizes the span, if any."""
    for convention in conventions:
        run = convention.agent_run(name, attributes)
        if run is not None:
            return run
    return None


__all__ = [
    "DEFAULT_CONVENTIONS",
    "MISSING",
    "AgentRun",
    "AttributeConvention",
    "Convention",
    "EventLike",
    "GenAIConvention",
    "OpenInferenceConvention",
    "PydanticAIV2Convention",
    "SpanMatcher",
    "ToolCall",
    "ToolRouter",
    "TraceloopConvention",
    "agent_run_key",
    "find_agent_run",
    "find_tool_call",
    "prefilters",
    "unwrap_langchain_inputs",
]
