"""What the Claude Agent SDK hooks and the Claude Code command hook share: the chain key of a hook's
input, which tools are left out, and the GenAI ``execute_tool`` span a tool call becomes.

Claude Code runs its tools itself (in the CLI), so no span of theirs reaches a Python processor: the
hooks' input is all the guard sees of them. Each PostToolUse (or PostToolUseFailure) input becomes one
span ending in this process, named ``execute_tool <tool>``, with ``gen_ai.agent.id`` set to the chain
key: the session, and for a subagent's call its ``agent_id`` too, so a subagent keeps a chain of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import xxhash
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
ARGUMENT_CHARS = 1 << 20
"""How much of a call's input the span keeps (``gen_ai.tool.call.arguments``), its whole's digest after it."""
DENIED = "denied: no PostToolUse followed its PreToolUse (a permission rule, or the user, refused it)"
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


def _text(value: Any, limit: int) -> str | None:
    """``value`` as JSON text, its first ``limit`` characters; None when no encoder can write it (nested past the
    stdlib's recursion limit): the attribute is then left out, and arguments left out are unknown, not equal. A
    text cut short ends with its whole's length and digest, so two that differ only past the cut still differ
    (a ``Write`` of a large file, changed near its end, is another call)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = orjson.dumps(value, default=str).decode()
        except TypeError:  # a lone surrogate (output cut inside a character), nesting past 255, a huge integer
            try:
                text = json.dumps(value, default=str)  # surrogates escaped, as Node's JSON.stringify writes them
            except (ValueError, TypeError, RecursionError):
                return None
    if len(text) <= limit:
        return text
    whole = xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}…[{len(text):,} characters in all, xxh3-128 {whole}]"


def tool_attributes(hook_input: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The GenAI attributes of the span a tool-call hook input becomes."""
    tool = str(hook_input.get("tool_name") or "")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.agent.id": key,
        "gen_ai.agent.name": str(hook_input.get("agent_type") or "claude"),
        "gen_ai.provider.name": "anthropic",
        "gen_ai.conversation.id": str(hook_input.get("session_id") or ""),
    }
    arguments = _text(hook_input.get("tool_input") or {}, ARGUMENT_CHARS)
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = arguments
    call_id = hook_input.get("tool_use_id")
    if call_id:
        attributes["gen_ai.tool.call.id"] = str(call_id)
    result = _text(hook_input["tool_response"], RESULT_CHARS) if "tool_response" in hook_input else None
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
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


class Unanswered:
    """Calls whose PreToolUse came and no PostToolUse or PostToolUseFailure yet, per chain key.

    Claude Code runs no hook after a call its permissions refuse (only PreToolUse before it; seen with
    2.1.332 under ``-p``), yet a denied call counts. So a call still unanswered when a call opened after it
    is answered, or when its chain's turn ends (Stop, SubagentStop, a new prompt), was denied: it is counted
    then, as a failed call. Should its PostToolUse come after all (parallel calls answered out of order),
    it is not counted twice. Bounded: at most ``limit`` open calls and remembered ids.
    """

    __slots__ = ("_limit", "_lock", "_open", "_settled")

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._open: dict[str, dict[str, Mapping[str, Any]]] = {}  # chain key -> tool_use_id -> its PreToolUse input
        self._settled: dict[str, None] = {}  # ids counted as denied (an ordered set)

    def opened(self, key: str, hook_input: Mapping[str, Any]) -> None:
        call_id = hook_input.get("tool_use_id")
        if call_id:
            with self._lock:
                calls = self._open.setdefault(key, {})
                calls[str(call_id)] = hook_input
                if len(calls) > self._limit:
                    calls.pop(next(iter(calls)))

    def answered(self, key: str, call_id: object) -> tuple[list[dict[str, Any]], bool]:
        """The chain's calls opened before this one and unanswered (denied: count them first, in order), and
        whether this call is still to be counted (False: it was counted as denied already)."""
        found = str(call_id or "")
        with self._lock:
            calls = self._open.get(key)
            if calls is None or found not in calls:
                already = found in self._settled
                self._settled.pop(found, None)
                return [], not already
            earlier = []
            for open_id in list(calls):
                if open_id == found:
                    del calls[open_id]
                    break
                earlier.append(self._denied(calls.pop(open_id), open_id))
            return earlier, True

    def rest(self, key: str) -> list[dict[str, Any]]:
        """The chain's turn is over: its unanswered calls, as denied calls to count."""
        with self._lock:
            calls = self._open.pop(key, {})
            return [self._denied(hook_input, call_id) for call_id, hook_input in calls.items()]

    def _denied(self, hook_input: Mapping[str, Any], call_id: str) -> dict[str, Any]:
        self._settled[call_id] = None
        if len(self._settled) > self._limit:
            self._settled.pop(next(iter(self._settled)))
        return {**hook_input, "hook_event_name": "PermissionDenied", "reason": DENIED}
