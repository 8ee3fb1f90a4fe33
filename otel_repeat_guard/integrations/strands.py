"""strands-agents: a hook provider that adds due reminders to the next model call.

    from otel_repeat_guard.integrations.strands import RepeatGuardHooks

    agent = Agent(model=model, tools=tools, hooks=[RepeatGuardHooks(guard=guard, inbox=inbox)])

On ``BeforeModelCallEvent`` (fired with the event-loop cycle span current, so the run is
found through the span context) it drains the run's reminders and adds them as one text
block of ``<system-reminder>`` blocks at the end of the last user message, after its
``toolResult`` blocks (strands keeps tool results in a user message, and Bedrock wants user
and assistant turns to alternate); the ``toolResult`` blocks are left as they are. If the
last message is not a user message, the reminder is a new user message.

The reminder PERSISTS in ``agent.messages``: the event's only way to the request is the
agent's conversation, so it stays in the history where it was delivered, once (as with
pydantic-ai), is seen again by later model calls and survives a retried model call. A
session manager has already stored that tool-result message, so a restored session lacks
the reminder. Needs ``strands-agents`` 1.x.
"""

from __future__ import annotations

from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor


def add_reminder(messages: list[Any], text: str) -> None:
    """Put ``text`` in ``messages`` (strands ``Messages``, edited in place) after the last tool results."""
    block = {"text": text}
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "user" and isinstance(last.get("content"), list):
        messages[-1] = {**last, "content": [*last["content"], block]}  # a new message: the old one is untouched
    else:
        messages.append({"role": "user", "content": [block]})


class RepeatGuardHooks:
    """A strands ``HookProvider``: its ``BeforeModelCallEvent`` callback adds due reminders to the history."""

    def __init__(self, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
        self._guard, self._inbox = check_sources(guard, inbox)

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        from strands.hooks import BeforeModelCallEvent

        registry.add_callback(BeforeModelCallEvent, self.before_model_call)

    def before_model_call(self, event: Any) -> None:
        """Drain the current run's reminders into ``event.agent.messages``; never raises."""
        with due_reminders(self._guard, self._inbox, framework="strands") as reminders:
            if reminders:
                add_reminder(event.agent.messages, reminder_message(reminders))
