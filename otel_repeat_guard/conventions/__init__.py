"""How tool calls and agents are read from span data, one vocabulary per module.

The default set covers the OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry
(Traceloop) and pydantic-ai's format 2. Pass ``conventions=[...]`` to
``RepeatGuardSpanProcessor`` to add your own, e.g. an :class:`AttributeConvention`, or
any object with the :class:`Convention` methods: ``[my_convention, *DEFAULT_CONVENTIONS]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_repeat_guard.conventions.base import (
    MISSING,
    AgentRun,
    BuiltInConvention,
    Convention,
    EventLike,
    RawToolCall,
    ToolCall,
    agent_run_key,
    failed,
)
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

ToolCallReader = Callable[[str, Mapping[str, Any], Sequence[EventLike]], RawToolCall | None]
AgentIdPrefilter = Callable[[Mapping[str, Any]], bool]


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


def _only_built_in(conventions: Sequence[Convention]) -> bool:
    return all(type(convention) in _BUILT_IN for convention in conventions)


def tool_call_reader(conventions: Sequence[Convention]) -> ToolCallReader:
    """:func:`find_tool_call` over ``conventions`` for the hot path, answering a plain tuple.

    Asking every convention costs a method call each, per span. For a set made only of
    built-in conventions, three dict lookups and a name comparison say which of them carry
    their tool-span mark (none, for nearly every span), and only those are asked, in their
    configured order. A set with any user convention is asked in full.
    """
    conventions = tuple(conventions)
    if not _only_built_in(conventions):
        return lambda name, attributes, events: find_tool_call(conventions, name, attributes, events)
    readers = tuple(
        _first_of(
            tuple(
                c.read
                for c in conventions
                if mask & (1 << _BUILT_IN.index(type(c))) and isinstance(c, BuiltInConvention)
            )
        )
        for mask in range(1 << len(_BUILT_IN))
    )

    def read(name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        # One bit per built-in vocabulary whose tool-span mark the span carries, in _BUILT_IN's order.
        reader = readers[
            (name == "running tool")
            | (attributes.get("traceloop.span.kind") == "tool") << 1
            | (attributes.get("gen_ai.operation.name") == "execute_tool") << 2
            | (attributes.get("openinference.span.kind") == "TOOL") << 3
        ]
        return None if reader is None else reader(name, attributes, events)

    return read


def _first_of(readers: tuple[ToolCallReader, ...]) -> ToolCallReader | None:
    """One reader asking ``readers`` in turn; None for none."""
    if len(readers) <= 1:
        return readers[0] if readers else None

    def first(name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        for reader in readers:
            call = reader(name, attributes, events)
            if call is not None:
                return call
        return None

    return first


def _may_name_a_built_in_agent_id(attributes: Mapping[str, Any]) -> bool:
    return "gen_ai.agent.id" in attributes  # the only attribute a built-in convention reads an agent id from


def agent_id_prefilter(conventions: Sequence[Convention]) -> AgentIdPrefilter | None:
    """A cheap test that is False when no convention in the set would read an agent id off
    the attributes; None when that cannot be known (a user convention is in the set)."""
    return _may_name_a_built_in_agent_id if _only_built_in(conventions) else None


__all__ = [
    "DEFAULT_CONVENTIONS",
    "MISSING",
    "AgentIdPrefilter",
    "AgentRun",
    "AttributeConvention",
    "Convention",
    "EventLike",
    "GenAIConvention",
    "OpenInferenceConvention",
    "PydanticAIV2Convention",
    "RawToolCall",
    "SpanMatcher",
    "ToolCall",
    "ToolCallReader",
    "TraceloopConvention",
    "agent_id_prefilter",
    "agent_run_key",
    "failed",
    "find_agent_run",
    "find_tool_call",
    "tool_call_reader",
    "unwrap_langchain_inputs",
]
