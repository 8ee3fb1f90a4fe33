"""CrewAI 1.x: a ``before_llm_call`` hook that adds due reminders to the next model call.

    from otel_repeat_guard.integrations.crewai import register_repeat_guard_hook

    register_repeat_guard_hook(guard=guard, inbox=inbox)  # before kickoff(): executors copy the hooks when built

CrewAI's LLM-call hooks are process-wide (``crewai.hooks.register_before_llm_call_hook``; each
agent executor copies the registered hooks when it is built). The hook runs in the agent's
thread just before each model call, while the agent's span is current, so the run is found
through the span context; other crews' runs find no reminders and are left alone. The reminder
is appended to ``context.messages`` as one user message, after the tool results: for an agent
that list is the executor's conversation, so the message stays in the history where it was
delivered, once (as CrewAI's hooks are meant to modify it, in place). To register it
differently (the ``@before_llm_call(agents=[...])`` filter, or a crew-scoped hook method), use
:func:`repeat_guard_llm_hook`, which only builds the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

LLMHook = Callable[[Any], None]


def repeat_guard_llm_hook(
    *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> LLMHook:
    """A ``before_llm_call`` hook ``(LLMCallHookContext) -> None``; it never blocks the call and never raises."""
    guard, inbox = check_sources(guard, inbox)

    def add_reminders(context: Any) -> None:
        with due_reminders(guard, inbox, framework="crewai") as reminders:
            if reminders:
                context.messages.append({"role": "user", "content": reminder_message(reminders)})

    return add_reminders


def register_repeat_guard_hook(
    *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> LLMHook:
    """Build the hook and register it globally; returns it, for ``unregister_before_llm_call_hook``."""
    from crewai.hooks import register_before_llm_call_hook

    hook = repeat_guard_llm_hook(guard=guard, inbox=inbox)
    register_before_llm_call_hook(hook)
    return hook
