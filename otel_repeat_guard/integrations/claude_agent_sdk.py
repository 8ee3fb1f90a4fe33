"""Claude Agent SDK (``claude-agent-sdk``): hooks that count Claude's tool calls and hand back the reminders.

    from otel_repeat_guard import configure
    from otel_repeat_guard.integrations.claude_agent_sdk import RepeatGuardHooks

    configure()  # or a provider of your own with the guard on it: RepeatGuardHooks(guard=..., tracer_provider=...)
    options = ClaudeAgentOptions(hooks=RepeatGuardHooks().hooks())  # or .merged_into(your_hooks)

The tools run inside the Claude Code CLI, so no span of theirs reaches this process; the hooks are
what the guard sees:

- **PostToolUse** (and **PostToolUseFailure**, **PermissionDenied**: a failed or denied call counts, as
  any call does; a call its permissions refuse gets no hook after PreToolUse, so it counts once the session's
  transcript shows its refusal or the turn ends, and the calls of one message count in the order Claude asked
  for them, however they finish: see :mod:`~otel_repeat_guard.integrations._claude_calls`) ends one GenAI
  ``execute_tool`` span here, under the current span, so the guard counts
  it and you get a trace of Claude's tool calls. Its ``gen_ai.agent.id`` is the chain key:
  ``claude:<session_id>``, and ``claude:<session_id>/<agent_id>`` inside a subagent, so a subagent's
  calls never extend its parent's chain. The reminders due then are the hook's answer:
  ``hookSpecificOutput.additionalContext``, which Claude Code adds beside the tool's own result (the
  result is never changed).
- **UserPromptSubmit** starts the session's chain afresh; **SubagentStop** drops the subagent's chain and
  **SessionEnd** every chain of the session. The SDK (0.2.189) closes its channel to the CLI before the
  CLI's SessionEnd hook runs, so when a session is done call :meth:`RepeatGuardHooks.forget_session` with
  its id (``ResultMessage.session_id``).
- **The stop tier** (``GuardConfig.stop_at``): after the stop reminder, the next identical call is
  denied in **PreToolUse** (``permissionDecision: deny``) with the stop text as the reason; a different
  call, or a new prompt, lifts it. The denied call counts too.
- ``exclude`` (default :data:`DEFAULT_EXCLUDE`, ``TodoWrite``) names tools left out: they get no span,
  so they neither count nor break a run (as ``GuardConfig.exclude`` does for spans).

Every hook catches its own errors, logs them and answers ``{}``: Claude goes on as without the guard.
Needs ``claude-agent-sdk`` 0.2.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard.core.canonical import arguments_key
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._claude import (
    DEFAULT_EXCLUDE,
    NO_INPUT,
    Exclusions,
    Unanswered,
    answer,
    arguments_of,
    chain_key,
    json_text,
    record_call,
    session_prefix,
)
from otel_repeat_guard.integrations._claude_calls import wait_for_results
from otel_repeat_guard.integrations._common import check_sources, logger, unguarded
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

__all__ = ["DEFAULT_EXCLUDE", "RepeatGuardHooks"]
TRACER_NAME = "otel_repeat_guard.integrations.claude_agent_sdk"
HookOutput = dict[str, Any]


class _Stop:
    """A stop reminder fired for this call of the chain: an identical next call is denied."""

    __slots__ = ("arguments", "text", "tool")

    def __init__(self, tool: str, arguments: bytes | None, text: str) -> None:
        self.tool, self.arguments, self.text = tool, arguments, text

    def same(self, tool: str, arguments: bytes | None) -> bool:
        return tool == self.tool and arguments is not None and arguments == self.arguments


def _call_of(hook_input: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """The call's tool and the digest of its arguments as its span carries them (None: unknown, so no call is
    identical to it): ``[]``, ``""``, ``{}`` and a missing ``tool_input`` are four different calls."""
    value = arguments_of(hook_input)
    text = None if value is NO_INPUT else json_text(value)
    return str(hook_input.get("tool_name") or ""), None if text is None else arguments_key(text)


class RepeatGuardHooks:
    """The hook callbacks for ``ClaudeAgentOptions.hooks``; one object for any number of sessions."""

    def __init__(
        self,
        *,
        guard: RepeatGuardSpanProcessor | None = None,
        inbox: ReminderInbox | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        exclude: Sequence[str] = DEFAULT_EXCLUDE,
    ) -> None:
        self._guard, self._inbox = check_sources(guard, inbox)
        provider = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
        if not isinstance(provider, TracerProvider) and self._guard is unguarded():
            provider = trace.NoOpTracerProvider()  # no guard to record for: every call passes through, as warned
        elif not isinstance(provider, TracerProvider):
            raise ValueError(
                "tracer_provider must be the SDK TracerProvider the guard is on; none is set globally "
                f"(got {provider!r}): call configure() first or pass tracer_provider=..."
            )
        self._tracer = provider.get_tracer(TRACER_NAME)
        self._exclusions = Exclusions(exclude)
        self._lock = threading.Lock()
        self._stops: dict[str, _Stop] = {}  # chain key -> the call whose identical repeat is denied
        self._keys: dict[str, set[str]] = {}  # session id -> the chain keys it has used
        self._unanswered = Unanswered()  # calls denied without a hook after them are counted later

    # -- wiring --------------------------------------------------------------------------------

    def hooks(self) -> dict[Any, list[Any]]:
        """``ClaudeAgentOptions.hooks``: one matcher (every tool) per event this object answers."""
        from claude_agent_sdk import HookMatcher

        callbacks = {
            "PreToolUse": self.pre_tool_use,
            "PostToolUse": self.post_tool_use,
            "PostToolUseFailure": self.post_tool_use,
            "PermissionDenied": self.post_tool_use,
            "UserPromptSubmit": self.user_prompt_submit,
            "Stop": self.stop,
            "SubagentStop": self.subagent_stop,
            "SessionEnd": self.session_end,
        }
        return {event: [HookMatcher(hooks=[callback])] for event, callback in callbacks.items()}

    def merged_into(self, hooks: Mapping[Any, list[Any]] | None) -> dict[Any, list[Any]]:
        """``hooks`` (yours) with these added after your matchers, event by event."""
        merged = {event: list(matchers) for event, matchers in (hooks or {}).items()}
        for event, matchers in self.hooks().items():
            merged.setdefault(event, []).extend(matchers)
        return merged

    # -- the callbacks (HookCallback: input, tool_use_id, context) -------------------------------

    async def pre_tool_use(self, hook_input: Any, tool_use_id: str | None = None, context: Any = None) -> HookOutput:
        """Deny the call that repeats the one a stop reminder fired at; else no opinion."""
        try:
            key = chain_key(hook_input)
            with self._lock:
                stop = self._stops.get(key)
            if stop is None or not stop.same(*_call_of(hook_input)):
                if not self._exclusions.excluded(str(hook_input.get("tool_name") or "")):
                    self._unanswered.opened(key, hook_input)
                return {}
            denied = {**hook_input, "hook_event_name": "PermissionDenied", "reason": stop.text}
            record_call(self._tracer, denied, key)  # it counts: the chain goes on past the stop
            self._inbox.drain(key)  # the stop text is the reason below; nothing is due after it
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": stop.text,
                }
            }
        except Exception:
            logger.exception("repeat guard failed in the PreToolUse hook; the call goes ahead")
            return {}

    async def post_tool_use(self, hook_input: Any, tool_use_id: str | None = None, context: Any = None) -> HookOutput:
        """Count the call (done, failed or denied) and answer with the reminders due now."""
        event = "PostToolUse"
        try:
            event = str(hook_input.get("hook_event_name") or event)
            tool = str(hook_input.get("tool_name") or "")
            if self._exclusions.excluded(tool):
                return {}
            key = chain_key(hook_input)
            self._remember(hook_input, key)
            waiting = self._unanswered.pending(key, hook_input)
            if len(waiting) > 1:  # a refusal asked for before this call may be on its way to the transcript
                await asyncio.to_thread(wait_for_results, waiting)
            reminders = self._count(key, self._unanswered.answered(key, hook_input))
            return answer(event, reminders) if event != "PermissionDenied" else {}
        except Exception:
            logger.exception("repeat guard failed in the %s hook; Claude goes on without it", event)
            return {}

    async def user_prompt_submit(
        self, hook_input: Any, tool_use_id: str | None = None, context: Any = None
    ) -> HookOutput:
        """A new prompt: the session's chain starts afresh (a subagent's chains are its own)."""
        try:
            key = chain_key(hook_input)
            self._settle(key)
            self._drop(key, reset=True)
        except Exception:
            logger.exception("repeat guard failed in the UserPromptSubmit hook; the prompt goes ahead")
        return {}

    async def subagent_stop(self, hook_input: Any, tool_use_id: str | None = None, context: Any = None) -> HookOutput:
        """The subagent is done: drop its chain."""
        try:
            if hook_input.get("agent_id"):
                key = chain_key(hook_input)
                self._settle(key)
                self._drop(key)
        except Exception:
            logger.exception("repeat guard failed in the SubagentStop hook")
        return {}

    async def stop(self, hook_input: Any, tool_use_id: str | None = None, context: Any = None) -> HookOutput:
        """Claude answered: its calls that no hook answered were denied, and count now."""
        try:
            self._settle(chain_key(hook_input))
        except Exception:
            logger.exception("repeat guard failed in the Stop hook")
        return {}

    async def session_end(self, hook_input: Any, tool_use_id: str | None = None, context: Any = None) -> HookOutput:
        """The session is over: drop every chain it had."""
        try:
            self.forget_session(str(hook_input.get("session_id") or ""))
        except Exception:
            logger.exception("repeat guard failed in the SessionEnd hook")
        return {}

    def forget_session(self, session_id: str) -> None:
        """Drop every chain of the session (the main one and its subagents'), as at SessionEnd."""
        with self._lock:
            keys = self._keys.pop(session_id, set())
        keys.add(session_prefix(session_id))
        for key in keys:
            self._drop(key)

    # -- state -----------------------------------------------------------------------------------

    def _remember(self, hook_input: Mapping[str, Any], key: str) -> None:
        session = str(hook_input.get("session_id") or "")
        with self._lock:
            self._keys.setdefault(session, set()).add(key)

    def _note_stop(self, key: str, hook_input: Mapping[str, Any], reminders: Sequence[Reminder]) -> None:
        stop = next((r for r in reminders if r.tier == "stop"), None)
        with self._lock:
            if stop is not None:
                self._stops[key] = _Stop(*_call_of(hook_input), stop.text)
            elif key in self._stops and not self._stops[key].same(*_call_of(hook_input)):
                del self._stops[key]

    def _count(self, key: str, calls: Sequence[tuple[Mapping[str, Any], int | None]]) -> list[Reminder]:
        """Record the calls, in order; the reminders they made due (each call's stop noted as it counts)."""
        reminders: list[Reminder] = []
        for call, end in calls:
            record_call(self._tracer, call, key, end=end)
            due = self._inbox.drain(key)
            self._note_stop(key, call, due)
            reminders.extend(due)
        return reminders

    def _settle(self, key: str) -> None:
        self._count(key, self._unanswered.rest(key))

    def _drop(self, key: str, *, reset: bool = False) -> None:
        with self._lock:
            self._stops.pop(key, None)
        if reset:
            self._guard.reset(key)
        else:
            self._guard.forget(key)
        self._inbox.drain(key)  # what was due to the old chain is no news to the next
