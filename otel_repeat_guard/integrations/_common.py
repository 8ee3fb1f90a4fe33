"""What every framework adapter shares: which reminders are due now, and how they read."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.metrics import NoOpMeterProvider

from otel_repeat_guard.core.reminders import Reminder, RepeatGuardStop
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.installed import default_inbox, installed_guard, not_installed
from otel_repeat_guard.integrations import _unseen as unseen
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

logger = logging.getLogger("otel_repeat_guard")

REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"
_lock = threading.Lock()
_unguarded: list[RepeatGuardSpanProcessor] = []  # at most one: the guard of adapters built with none installed
_warned: set[str] = set()  # why adapters run unguarded, each said once


def unguarded() -> RepeatGuardSpanProcessor:
    """The guard an adapter built without one uses: on no tracer provider, it sees no span, so it finds no
    run and the adapter passes every call through unchanged."""
    with _lock:
        if not _unguarded:
            _unguarded.append(RepeatGuardSpanProcessor(meter_provider=NoOpMeterProvider()))
        return _unguarded[0]


def _unguarded_guard() -> RepeatGuardSpanProcessor | None:
    return _unguarded[0] if _unguarded else None


def _warn_unguarded() -> None:
    reason = not_installed()
    if reason is not None:  # zero-code setup failed: what was wrong, not a generic hint
        why = f"the repeat guard was not installed ({reason})"
    else:
        why = (
            "no repeat guard is installed for this process (install one before building adapters: configure(), "
            "OTEL_REPEAT_GUARD_ENABLED=true under opentelemetry-instrument, or pass guard=...)"
        )
    with _lock:
        if why in _warned:
            return
        _warned.add(why)
    logger.warning("framework adapters built now pass every model call through unguarded: %s", why)


def check_sources(guard: object = None, inbox: object = None) -> tuple[RepeatGuardSpanProcessor, ReminderInbox]:
    """An adapter's ``guard`` and ``inbox``, validated at construction, loudly (ValueError naming the one
    that is wrong).

    Left out, they are the process-wide ones that ``configure()`` or zero-code setup installed. With no
    guard installed, the adapter never stops the program: it passes calls through unguarded
    (:func:`unguarded`), and one warning says why (the failed setup's reason, when it failed).
    """
    if guard is None:
        guard = installed_guard()
        if guard is None:
            _warn_unguarded()
            guard = unguarded()
    inbox = default_inbox() if inbox is None else inbox
    if not isinstance(guard, RepeatGuardSpanProcessor):
        raise ValueError(f"guard must be a RepeatGuardSpanProcessor, got {guard!r}")
    if not isinstance(inbox, ReminderInbox):
        raise ValueError(f"inbox must be a ReminderInbox, got {inbox!r}")
    return guard, inbox


def check_then(then: object) -> None:
    """An adapter's ``then`` (the callback it runs after its own): None or callable, else a ValueError naming it."""
    if then is not None and not callable(then):
        raise ValueError(f"then must be callable or None, got {then!r}")


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
        if framework is not None and guard is not _unguarded_guard():  # unguarded: warned why already
            unseen.model_request(framework, agent_id is not None)
        return [] if agent_id is None else inbox.drain(agent_id)
    except Exception:
        logger.exception("repeat guard could not collect reminders; the model request goes out unchanged")
        return []


@contextmanager
def due_reminders(
    guard: RepeatGuardSpanProcessor,
    inbox: ReminderInbox,
    context: Context | None = None,
    *,
    framework: str | None = None,
) -> Iterator[list[Reminder]]:
    """The reminders due in the model request about to go out (:func:`take_reminders`), for the block that adds
    them to it. The block never breaks the request: what it raises is logged and the request goes out as it
    was, and the reminders go back to ``inbox`` for the run's next request. Only the stop tier's
    :class:`RepeatGuardStop` passes, since it ends the run on purpose."""
    reminders = take_reminders(guard, inbox, context, framework=framework)
    try:
        yield reminders
    except RepeatGuardStop:
        raise
    except Exception:
        logger.exception(
            "repeat guard could not add reminders; the model request goes out unchanged%s", _waiting(reminders)
        )
        try:
            inbox.give_back(reminders)
        except Exception:
            logger.exception("repeat guard could not keep the reminders for the run's next model request")


def _waiting(reminders: Sequence[Reminder]) -> str:
    if not reminders:
        return ""
    if len(reminders) == 1:
        return ", and its reminder waits for the run's next one"
    return f", and its {len(reminders)} reminders wait for the run's next one"


def stop_if_due(reminders: Sequence[Reminder]) -> None:
    """End the run: raise :class:`RepeatGuardStop` when a ``stop`` reminder is among ``reminders``."""
    for reminder in reminders:
        if reminder.tier == "stop":
            raise RepeatGuardStop(reminder)


def reminder_message(reminders: Sequence[Reminder]) -> str:
    """The text of the synthetic user message: each reminder in its own ``<system-reminder>`` block."""
    return "\n".join(f"{REMINDER_OPEN}\n{reminder.text}\n{REMINDER_CLOSE}" for reminder in reminders)
