"""What the Claude Agent SDK hooks and the Claude Code command hook share: the chain key of a hook's
input, which tools are left out, and the GenAI ``execute_tool`` span a tool call becomes.

Claude Code runs its tools itself (in the CLI), so no span of theirs reaches a Python processor: the
hooks' input is all the guard sees of them. Each PostToolUse (or PostToolUseFailure) input becomes one
span ending in this process, named ``execute_tool <tool>``, with ``gen_ai.agent.id`` set to the chain
key: the session, and for a subagent's call its ``agent_id`` too, so a subagent keeps a chain of its own.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
import xxhash

from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.integrations._claude_calls import OpenCall, due

if TYPE_CHECKING:  # OpenTelemetry only where a call becomes a span: the command hook's fast path has none
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer

DEFAULT_EXCLUDE = ("TodoWrite",)
"""Claude Code's own bookkeeping tool: a list the model rewrites as it works is no loop. Added to the
guard's exclusions (``GuardConfig.exclude``) by both hooks unless ``exclude=`` (or, for the command hook,
``OTEL_REPEAT_GUARD_EXCLUDE``) says otherwise."""
KEY_PREFIX = "claude:"
RESULT_CHARS = 4_096
"""How much of a tool's response the span keeps (``gen_ai.tool.call.result``)."""
ARGUMENT_CHARS = 1 << 20
"""How much of a call's input the span keeps (``gen_ai.tool.call.arguments``), its whole's digest after it."""
TOOL_EVENTS = ("PostToolUse", "PostToolUseFailure", "PermissionDenied")
"""The hook events that report a tool call: done, failed, or denied by a permission rule (each counts)."""


def key_part(text: str) -> str:
    """One part of a chain key: ``%`` and ``/`` percent-encoded, so no part holds the separator and each key
    reads back to one session and agent only (a session ``S/d1`` is never subagent ``d1`` of session ``S``).
    Ids as Claude Code writes them (UUIDs, hex agent ids) are unchanged."""
    return text.replace("%", "%25").replace("/", "%2F")


def chain_key(hook_input: Mapping[str, Any]) -> str:
    """``claude:<session_id>`` for the main thread, ``claude:<session_id>/<agent_id>`` inside a subagent, each id
    through :func:`key_part`."""
    session = session_prefix(str(hook_input.get("session_id") or "unknown"))
    agent = hook_input.get("agent_id")
    return f"{session}/{key_part(str(agent))}" if agent else session


def session_prefix(session_id: str) -> str:
    """The session's main chain key, which each of its subagents' keys starts with, followed by a ``/``."""
    return f"{KEY_PREFIX}{key_part(session_id)}"


NO_INPUT = object()


def arguments_of(hook_input: Mapping[str, Any]) -> Any:
    """The call's ``tool_input`` as Claude Code sent it, any JSON value (``[]``, ``""``, ``{}`` and ``null``
    are different calls), or :data:`NO_INPUT` when the event has none (its arguments are unknown)."""
    return hook_input.get("tool_input", NO_INPUT)


class Exclusions:
    """The tools a hook does not hand to the guard (glob patterns, as ``GuardConfig.exclude``)."""

    __slots__ = ("_filter",)

    def __init__(self, exclude: Sequence[str]) -> None:
        if isinstance(exclude, str) or not all(isinstance(p, str) and p for p in exclude):
            raise ValueError(f"exclude must be a sequence of non-empty tool-name patterns, got {exclude!r}")
        self._filter = ToolFilter((), tuple(exclude))

    def excluded(self, tool: str) -> bool:
        return not self._filter(tool)


def json_text(value: Any) -> str | None:
    """``value`` as JSON text; None when no encoder can write it (nested past the stdlib's recursion limit)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # a lone surrogate (output cut inside a character), nesting past 255, a huge integer
        try:
            return json.dumps(value, default=str)  # surrogates escaped, as Node's JSON.stringify writes them
        except (ValueError, TypeError, RecursionError):
            return None


def _text(value: Any, limit: int) -> str | None:
    """``value`` as JSON text (a string as itself), its first ``limit`` characters; None when no encoder can write
    it (nested past the stdlib's recursion limit): the attribute is then left out, and arguments left out are
    unknown, not equal. A text cut short ends with its whole's length and digest, so two that differ only past the
    cut still differ (a ``Write`` of a large file, changed near its end, is another call)."""
    return _cut(value if isinstance(value, str) else json_text(value), limit)


def _json_cut(value: Any, limit: int) -> str | None:
    """:func:`_text` of ``value``'s JSON text, a string too (quoted): a tool input ``"{}"`` is not ``{}``."""
    return _cut(json_text(value), limit)


def _cut(text: str | None, limit: int) -> str | None:
    if text is None:
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
    value = arguments_of(hook_input)  # JSON text of the value, a string quoted: the span's arguments are JSON
    arguments = None if value is NO_INPUT else _json_cut(value, ARGUMENT_CHARS)
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


def record_call(
    tracer: Tracer, hook_input: Mapping[str, Any], key: str, context: Context | None = None, end: int | None = None
) -> None:
    """End one ``execute_tool`` span for the hook's tool call (the guard decides as it ends), timed by the
    input's ``duration_ms`` when it has one. ``context`` is its parent's (None: the current one); ``end`` when
    the call ended, in ns since the epoch (None: now; a call counted after a later one ended before)."""
    from opentelemetry.trace import Status, StatusCode

    attributes = tool_attributes(hook_input, key)
    start, end = call_times(hook_input, end)
    span = tracer.start_span(
        f"execute_tool {attributes['gen_ai.tool.name']}", context, attributes=attributes, start_time=start
    )
    failure = failure_of(hook_input)
    if failure is not None:
        span.set_attribute("error.type", str(hook_input.get("hook_event_name")))
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end(end)


def call_times(hook_input: Mapping[str, Any], end: int | None) -> tuple[int, int]:
    """When the call started and ended, in ns since the epoch: it ended at ``end`` (None: now), and started
    ``duration_ms`` before when the input has one."""
    end = time.time_ns() if end is None else end
    duration = hook_input.get("duration_ms")
    return (end - int(duration) * 1_000_000 if isinstance(duration, int) and duration >= 0 else end), end


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
    """The open calls of each chain, in process (the Agent SDK hooks): PreToolUse opens a call, and
    :func:`~otel_repeat_guard.integrations._claude_calls.due` says when it counts (answered, refused, or the
    turn over; a batch in the order Claude asked for its calls). A call counted without its PostToolUse is
    remembered, so a PostToolUse that comes after all does not count it twice. Bounded: at most ``limit``
    open calls per chain and remembered ids."""

    __slots__ = ("_limit", "_lock", "_open", "_settled")

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._open: dict[str, dict[str, OpenCall]] = {}  # chain key -> tool_use_id -> the call, as opened
        self._settled: dict[str, None] = {}  # ids counted without their PostToolUse (an ordered set)

    def opened(self, key: str, hook_input: Mapping[str, Any]) -> None:
        call_id = hook_input.get("tool_use_id")
        if call_id:
            with self._lock:
                put_bounded(
                    self._open.setdefault(key, {}), str(call_id), OpenCall(str(call_id), hook_input), self._limit
                )

    def pending(self, key: str, hook_input: Mapping[str, Any]) -> list[OpenCall]:
        """A copy of the chain's open calls, this one answered: what :func:`wait_for_results` looks at."""
        found = str(hook_input.get("tool_use_id") or "")
        with self._lock:
            calls = [call.copy() for call in self._open.get(key, {}).values()]
        for call in calls:
            if call.call_id == found:
                call.answer = hook_input
        return calls

    def answered(self, key: str, hook_input: Mapping[str, Any]) -> list[tuple[dict[str, Any], int | None]]:
        """The chain's calls that count now that this one is answered (it among them, or not yet: a call
        Claude asked for before it still runs), each with the time it ended (None: now). A call never opened
        counts at once, after them; one counted already as refused does not count again."""
        found = str(hook_input.get("tool_use_id") or "")
        with self._lock:
            calls = self._open.get(key, {})
            if found in calls:
                calls[found].answer, calls[found].answered_ns = hook_input, time.time_ns()
                return self._due(key, turn_over=False)
            counted = self._due(key, turn_over=False) if calls else []
            if found and found in self._settled:
                del self._settled[found]
                return counted
            return [*counted, (dict(hook_input), None)]

    def rest(self, key: str) -> list[tuple[dict[str, Any], int | None]]:
        """The chain's turn is over: its open calls, every one to count now."""
        with self._lock:
            counted = self._due(key, turn_over=True)
            self._open.pop(key, None)
            return counted

    def _due(self, key: str, *, turn_over: bool) -> list[tuple[dict[str, Any], int | None]]:
        calls = self._open.get(key, {})
        found = due(list(calls.values()), turn_over)
        for call_id in found.closed:
            del calls[call_id]
        for call_id in found.refused:
            put_bounded(self._settled, call_id, None, self._limit)
        return found.counted


def service_name(environ: Mapping[str, str]) -> str:
    """The hook's ``service.name``, on both paths (the span path's resource says it, whatever the SDK's default):
    ``OTEL_SERVICE_NAME``, else ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``, else
    ``unknown_service:<the interpreter's file name>``, as the SDK's default resource has it (recent versions)."""
    named = environ.get("OTEL_SERVICE_NAME")
    if named:
        return named
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() != "service.name":
            continue
        from urllib.parse import unquote  # here: a hook's call without that attribute imports none of urllib

        if unquote(value.strip()):
            named = unquote(value.strip())  # the last one counts, as the SDK's dict keeps it
    if named:
        return named
    return f"{'unknown_service'}:{os.path.basename(sys.executable)}" if sys.executable else "unknown_service"
