"""What the Claude Agent SDK hooks and the Claude Code command hook share: the chain key of a hook's
input, which tools are left out, and the GenAI ``execute_tool`` span a tool call becomes.

Claude Code runs its tools itself (in the CLI), so no span of theirs reaches a Python processor: the
hooks' input is all the guard sees of them. Each PostToolUse (or PostToolUseFailure) input becomes one
span ending in this process, named ``execute_tool <tool>``, with ``gen_ai.agent.id`` set to the chain
key: the session, and for a subagent's call its ``agent_id`` too, so a subagent keeps a chain of its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_repeat_guard.patterns import ToolFilter
from otel_repeat_guard.reminders import Reminder

DEFAULT_EXCLUDE = ("TodoWrite",)
"""Claude Code's own bookkeeping tool: a list the model rewrites as it works is no loop. Added to the
guard's exclusions (``GuardConfig.exclude``) by both hooks unless ``exclude=`` (or, for the command hook,
``OTEL_REPEAT_GUARD_EXCLUDE``) says otherwise."""
KEY_PREFIX = "claude:"
RESULT_CHARS = 4_096
"""How much of a tool's response the span keeps (``gen_ai.tool.call.result``)."""
TOOL_EVENTS = ("PostToolUse", "PostToolUseFailure", "PermissionDenied")
"""The hook events that report a tool call: done, failed, or denied by a permission rule (each counts)."""


def chain_key(hook_input: Mapping[str, Any]) -> str:
    """``claude:<session_id>`` for the main thread, ``claude:<session_id>/<agent_id>`` inside a subagent."""
    session = str(hook_input.get("session_id") or "unknown")
    agent = hook_input.get("agent_id")
    return f"{KEY_PREFIX}{session}/{agent}" if agent else f"{KEY_PREFIX}{session}"


def session_prefix(session_id: str) -> str:
    """What every chain key of the session starts with (the main one, and its subagents' after a ``/``)."""
    return f"{KEY_PREFIX}{session_id}"


class Exclusions:
    """The tools a hook does not hand to the guard (glob patterns, as ``GuardConfig.exclude``)."""

    __slots__ = ("_filter",)

    def __init__(self, exclude: Sequence[str]) -> None:
        if isinstance(exclude, str) or not all(isinstance(p, str) and p for p in exclude):
            raise ValueError(f"exclude must be a sequence of non-empty tool-name patterns, got {exclude!r}")
        self._filter = ToolFilter((), tuple(exclude))

    def excluded(self, tool: str) -> bool:
        return not self._filter(tool)


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[:limit]


def tool_attributes(hook_input: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The GenAI attributes of the span a tool-call hook input becomes."""
    tool = str(hook_input.get("tool_name") or "")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": _text(hook_input.get("tool_input") or {}, 1 << 20),
        "gen_ai.agent.id": key,
        "gen_ai.agent.name": str(hook_input.get("agent_type") or "claude"),
        "gen_ai.provider.name": "anthropic",
        "gen_ai.conversation.id": str(hook_input.get("session_id") or ""),
    }
    call_id = hook_input.get("tool_use_id")
    if call_id:
        attributes["gen_ai.tool.call.id"] = str(call_id)
    if "tool_response" in hook_input:
        attributes["gen_ai.tool.call.result"] = _text(hook_input["tool_response"], RESULT_CHARS)
    return attributes


def failure_of(hook_input: Mapping[str, Any]) -> str | None:
    """Why the call failed (PostToolUseFailure's error, a permission denial's reason), or None."""
    event = hook_input.get("hook_event_name")
    if event == "PostToolUseFailure":
        return str(hook_input.get("error") or "the tool failed")
    if event == "PermissionDenied":
        return str(hook_input.get("reason") or "permission denied")
    return None


def record_call(tracer: Tracer, hook_input: Mapping[str, Any], key: str, context: Context | None = None) -> None:
    """End one ``execute_tool`` span for the hook's tool call (the guard decides as it ends), timed by the
    input's ``duration_ms`` when it has one. ``context`` is its parent's (None: the current one)."""
    attributes = tool_attributes(hook_input, key)
    end = time.time_ns()
    duration = hook_input.get("duration_ms")
    start = end - int(duration) * 1_000_000 if isinstance(duration, int) and duration >= 0 else end
    span = tracer.start_span(
        f"execute_tool {attributes['gen_ai.tool.name']}", context, attributes=attributes, start_time=start
    )
    failure = failure_of(hook_input)
    if failure is not None:
        span.set_attribute("error.type", str(hook_input.get("hook_event_name")))
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end(end)


def context_text(reminders: Sequence[Reminder]) -> str:
    """The ``additionalContext`` of the hook's answer: the reminders' texts, each in its own paragraph
    (Claude Code adds its own ``<system-reminder>`` frame around hook context)."""
    return "\n\n".join(reminder.text for reminder in reminders)


def answer(event: str, reminders: Sequence[Reminder]) -> dict[str, Any]:
    """The hook's JSON answer: the reminders as ``hookSpecificOutput.additionalContext``, or nothing."""
    if not reminders:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context_text(reminders)}}
