"""pydantic-ai's instrumentation format version 2 (``InstrumentationSettings(version=2)``).

Format 2 names every tool span ``running tool`` and records the arguments in
``tool_arguments``; it also sets ``gen_ai.operation.name == "execute_tool"``, so this
convention must come before :class:`GenAIConvention`. Formats 3 and later use the GenAI
attribute ``gen_ai.tool.call.arguments`` and need nothing extra. (Format 1 no longer
exists in pydantic-ai 1.x/2.x.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_repeat_guard.conventions.base import (
    MISSING,
    AgentRun,
    BuiltInConvention,
    EventLike,
    Mark,
    RawToolCall,
    gen_ai_agent,
    tool_name,
)


class PydanticAIV2Convention(BuiltInConvention):
    """Tool spans named ``running tool``, arguments in ``tool_arguments``; agent runs are GenAI ``invoke_agent``."""

    __slots__ = ()
    tool_marks = (Mark(None, "running tool"),)  # its model calls are GenAI "chat" spans

    def read(self, name: str, attributes: dict[str, Any], events: Sequence[EventLike]) -> RawToolCall | None:
        if name != "running tool":
            return None
        tool = tool_name(name, attributes)
        if tool is None:
            return None
        return (tool, attributes.get("tool_arguments", MISSING), *gen_ai_agent(attributes), False, None)

    def agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        return None  # format 2's "agent run" span carries gen_ai.operation.name == "invoke_agent"
