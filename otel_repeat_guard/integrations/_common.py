"""What every framework adapter shares: which reminders are due now, and how they read."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.context import Context

from otel_repeat_guard.inbox import ReminderInbox
from otel_repeat_guard.installed import default_inbox, installed_guard
from otel_repeat_guard.integrations import _unseen as unseen
from otel_repeat_guard.processor import RepeatGuardSpanProcessor
from otel_repeat_guard.reminders import Reminder, RepeatGuardStop

logger = logging.getLogger("otel_repeat_guard")

REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"


def check_sources(guard: object = None, inbox: object = None) -> tuple[RepeatGuardSpanProcessor, ReminderInbox]:
    """An adapter's ``guard`` and ``inbox``, validated at construction, loudly.

    Left out, they are the process-wide ones that ``configure()`` or zero-code setup installed.
    """
    if guard is None:
        guard = installed_guard()
        if guard is None:
            raise ValueError(
                "guard is required: no guard is installed for this process (use configure(), "
                "OTEL_REPEAT_GUARD_ENABLED=true under opentelemetry-instrument, or pass guard=...)"
            )
    inbox = default_inbox() if inbox is None else inbox
    if not isinstance(guard, RepeatGuardSpanProcessor):
        raise ValueError(f"guard must be a RepeatGuardSpanProcessor, got {guard!r}")
    if not isinstance(inbox, ReminderInbox):
        raise ValueError(f"inbox must be a ReminderInbox, got {inbox!r}")
    return guard, inbox


def take_reminders(
    guard: RepeatGuardSpanProcessor,
    inbox: ReminderInbox,
    context: Context | None = None,
    *,
    framework: str | None = None,
) -> list[Reminder]:
    """Drain the reminders of the agent run the current span (of ``context``) belongs to; never raises.

    First the guard counts what the run's last model call requested without tool spans
    (:meth:`RepeatGuardSpanProcessor.model_call_due`), so their reminders are due in this request.
    A ``framework``'s adapter whose runs the guard never finds warns once, naming the instrumentation
    to turn on (:mod:`otel_repeat_guard.integrations._unseen`).
    """
    try:
        agent_id = guard.model_call_due(context)
        if framework is not None:
            unseen.model_request(framework, agent_id is not None)
        return [] if agent_id is None else inbox.drain(agent_id)
    except Exception:
        logger.exception("repeat guard could not collect reminders; the model request goes out unchanged")
        return []


def stop_if_due(reminders: Sequence[Reminder]) -> None:
    """End the run: raise :class:`RepeatGuardStop` when a ``stop`` reminder is among ``reminders``."""
    for reminder in reminders:
        if reminder.tier == "stop":
            raise RepeatGuardStop(reminder)


def reminder_message(reminders: Sequence[Reminder]) -> str:
    """The text of the synthetic user message: each reminder in its own ``<system-reminder>`` block."""
    return "\n".join(f"{REMINDER_OPEN}\n{reminder.text}\n{REMINDER_CLOSE}" for reminder in reminders)
