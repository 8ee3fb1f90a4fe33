"""pydantic-ai: a history processor that adds due reminders to the next model request.

    from otel_repeat_guard.integrations.pydantic_ai import repeat_guard_capability

    agent = Agent(model, capabilities=[repeat_guard_capability(guard=guard, inbox=inbox)])

The reminder is added as a ``UserPromptPart`` after the tool results of the last
``ModelRequest`` (pydantic-ai keeps processed history, so it stays in the conversation
where it was delivered, once). At a ``stop`` reminder (``GuardConfig.stop_at``) the run ends:
``agent.run`` raises :class:`~otel_repeat_guard.RepeatGuardStop`, which carries the reminder.
Needs ``pydantic-ai`` (or ``pydantic-ai-slim``) 1.x/2.x.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, due_reminders, reminder_message, stop_if_due
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

HistoryProcessor = Callable[[list[Any]], Awaitable[list[Any]]]


def repeat_guard_history_processor(
    *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> HistoryProcessor:
    """An async history processor ``(messages) -> messages`` for ``ProcessHistory``.

    Async on purpose: pydantic-ai runs sync processors on a worker thread, where the
    current span (which identifies the agent run) is not set.
    """
    guard, inbox = check_sources(guard, inbox)
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    async def add_reminders(messages: list[Any]) -> list[Any]:
        with due_reminders(guard, inbox, framework="pydantic-ai") as reminders:
            if reminders:
                stop_if_due(reminders)  # the stop tier ends the run: agent.run raises RepeatGuardStop
                part = UserPromptPart(content=reminder_message(reminders))
                last = messages[-1] if messages else None
                if isinstance(last, ModelRequest):
                    return [*messages[:-1], dataclasses.replace(last, parts=[*last.parts, part])]
                return [*messages, ModelRequest(parts=[part])]
        return messages

    return add_reminders


def repeat_guard_capability(
    *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> Any:
    """A ``pydantic_ai.capabilities.ProcessHistory`` capability running the processor above."""
    from pydantic_ai.capabilities import ProcessHistory

    return ProcessHistory(repeat_guard_history_processor(guard=guard, inbox=inbox))
