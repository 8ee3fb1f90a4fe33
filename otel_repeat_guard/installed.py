"""The process-wide guard and reminder inbox, for code that did not build the guard itself.

``configure()`` and the zero-code entry point install a guard here; framework adapters
default to :func:`installed_guard` and :func:`default_inbox` when they are not handed
their own, so ``opentelemetry-instrument python agent.py`` needs no code changes.
"""

from __future__ import annotations

import os
import threading

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

_lock = threading.Lock()
_inbox: list[ReminderInbox] = [ReminderInbox()]  # one item: replaced, never rebound
_guard: RepeatGuardSpanProcessor | None = None
_not_installed: list[str] = []  # at most one item: why zero-code setup installed no guard


def _after_fork() -> None:
    """In a forked child: a fresh lock (a thread of the parent's may have held this one)."""
    global _lock  # noqa: PLW0603 - the module's own lock, renewed
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork)


def default_inbox() -> ReminderInbox:
    """The process-wide inbox that a guard installed by ``configure()`` or zero-code setup fills."""
    return _inbox[0]


def use_default_inbox(inbox: ReminderInbox) -> None:
    """Make ``inbox`` the process-wide one (zero-code setup with a shared store: a Redis inbox, so an
    agent process drains what a worker raised)."""
    with _lock:
        _inbox[0] = inbox


def installed_guard() -> RepeatGuardSpanProcessor | None:
    """The guard installed for this process, or None if there is none."""
    return _guard


def set_installed_guard(guard: RepeatGuardSpanProcessor | None) -> RepeatGuardSpanProcessor | None:
    """Make ``guard`` the process-wide guard (None uninstalls); returns the previous one."""
    global _guard
    with _lock:
        previous, _guard = _guard, guard
    return previous


def set_not_installed(reason: str | None) -> None:
    """Zero-code setup was asked for a guard and installed none, for ``reason`` (None: forget it). Framework
    adapters built without a guard name it when they pass calls through unguarded."""
    with _lock:
        _not_installed[:] = [] if reason is None else [reason]


def not_installed() -> str | None:
    """Why zero-code setup installed no guard, or None if it did not try or did not fail."""
    return _not_installed[0] if _not_installed else None
