"""How tool calls and agents are read from span data, one convention at a time.

A convention sees only a span's name, attributes and events (plain Python values), so
adding support for another instrumentation is one small class, not an edit across the
processor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""The arguments value of a tool call whose arguments were not recorded."""


class EventLike(Protocol):
    """The part of a span event a convention may read."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call read off a tool span."""

    tool_name: str
    arguments: Any = MISSING
    agent_id: str | None = None
    agent_name: str | None = None
    error: bool = False


@dataclass(frozen=True, slots=True)
class AgentRun:
    """What an agent-run span says about its agent; both fields may be unknown."""

    agent_id: str | None = None
    agent_name: str | None = None


class Convention(Protocol):
    """Reads tool calls and agent runs in one instrumentation's vocabulary."""

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        """The tool call if this span is a tool span in this convention, else None."""
        ...

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        """The agent if this span is an agent-run span in this convention, else None."""
        ...


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class GenAIConvention:
    """The OpenTelemetry GenAI semantic conventions (``gen_ai.*``)."""

    __slots__ = ()

    def tool_call(self, name: str, attributes: Mapping[str, Any], events: Sequence[EventLike]) -> ToolCall | None:
        if attributes.get("gen_ai.operation.name") != "execute_tool":
            return None
        tool = _str_or_none(attributes.get("gen_ai.tool.name"))
        if tool is None and name.startswith("execute_tool "):
            tool = name[len("execute_tool ") :].strip() or None
        if tool is None:
            return None
        return ToolCall(
            tool_name=tool,
            arguments=attributes.get("gen_ai.tool.call.arguments", MISSING),
            agent_id=_str_or_none(attributes.get("gen_ai.agent.id")),
            agent_name=_str_or_none(attributes.get("gen_ai.agent.name")),
            error="error.type" in attributes,
        )

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        if attributes.get("gen_ai.operation.name") != "invoke_agent" and not name.startswith("invoke_agent"):
            return None
        agent_name = _str_or_none(attributes.get("gen_ai.agent.name"))
        if agent_name is None and name.startswith("invoke_agent "):
            agent_name = name[len("invoke_agent ") :].strip() or None
        return AgentRun(agent_id=_str_or_none(attributes.get("gen_ai.agent.id")), agent_name=agent_name)


DEFAULT_CONVENTIONS: tuple[Convention, ...] = (GenAIConvention(),)


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
