"""What the model-client adapters share: a request method that carries the due reminders.

A wrapped method drains, just before the request, the reminders of the agent run the current
span belongs to (:func:`~otel_repeat_guard.integrations._common.take_reminders`) and, when there
are some, calls through with a copy of its keyword arguments in which one argument (the
conversation: ``messages`` or ``input``) has the reminder message added. With none due it calls
through with the arguments untouched, so the request is the one an unwrapped client sends.

Two ways to wrap: one client (:func:`guard_resource`, an attribute on that client's resource
object, which looks the method up on the class at every call, so an instrumentation added or
removed later is still the one that runs; :func:`guard_copies` guards the client's copies
too, which some frameworks make per request), or every client (:func:`patch_class`, the class
attribute itself, switched off again with :func:`unpatch_class`). Both at once deliver each
reminder once: the first drain empties the inbox.

Zero-code setup switches on the adapters named in ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS``
(:func:`client_adapters`, :func:`enable_client_adapters`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_repeat_guard.core.sources import ENV_PREFIX
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import due_reminders, logger, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

CLIENT_ADAPTERS_ENV = ENV_PREFIX + "CLIENT_ADAPTERS"
CLIENT_ADAPTERS = ("openai", "anthropic", "litellm")
MARK = "__otel_repeat_guard__"

Append = Callable[[Any, str], Any]
"""``(current value of the argument, reminder text) -> new value``; never mutates the current value."""


@dataclass(frozen=True)
class Conversation:
    """Where a request method keeps the conversation, and how a reminder is added to it."""

    argument: str
    append: Append
    required: bool = True  # False: the argument may be left out (the reminder is then the whole value)


@dataclass
class Sources:
    """The guard and inbox a wrapper drains; ``None`` once switched off."""

    guard: RepeatGuardSpanProcessor | None
    inbox: ReminderInbox | None


def with_reminders(kwargs: dict[str, Any], conversation: Conversation, sources: Sources) -> dict[str, Any]:
    """``kwargs`` with the due reminders added (a copy), or ``kwargs`` itself when none are due; never raises."""
    guard, inbox = sources.guard, sources.inbox
    if guard is None or inbox is None or (conversation.required and conversation.argument not in kwargs):
        return kwargs  # nothing could carry a reminder: leave it in the inbox
    with due_reminders(guard, inbox) as reminders:
        if reminders:
            value = conversation.append(kwargs.get(conversation.argument), reminder_message(reminders))
            return {**kwargs, conversation.argument: value}
    return kwargs


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(inspect.unwrap(function))


def request_wrapper(
    call: Callable[..., Any], conversation: Conversation, sources: Sources, *, is_async: bool | None = None
) -> Callable[..., Any]:
    """``call`` (sync, or async: ``is_async``, else as ``call`` is), adding due reminders to its keyword arguments first."""
    wrapped: Callable[..., Any]
    if _is_async(call) if is_async is None else is_async:

        @functools.wraps(call)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            return await call(*args, **with_reminders(kwargs, conversation, sources))

        wrapped = wrapped_async
    else:

        @functools.wraps(call)
        def wrapped_sync(*args: Any, **kwargs: Any) -> Any:
            return call(*args, **with_reminders(kwargs, conversation, sources))

        wrapped = wrapped_sync
    setattr(wrapped, MARK, sources)
    return wrapped


def guard_resource(resource: object, names: Sequence[str], conversation: Conversation, sources: Sources) -> None:
    """Wrap the methods ``names`` of one resource object (idempotent: a second call replaces the first).

    A name the class does not have (an older SDK) is skipped. The wrapper calls the class's method as it is at call time. Cached ``with_raw_response`` and
    ``with_streaming_response`` views are dropped, so they are rebuilt around the wrapper.
    """
    cls = type(resource)
    for name in names:
        original = getattr(cls, name, None)
        if original is None:
            continue

        def call(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            return getattr(cls, _name)(resource, *args, **kwargs)

        functools.update_wrapper(call, original)
        setattr(resource, name, request_wrapper(call, conversation, sources, is_async=_is_async(original)))
    for view in ("with_raw_response", "with_streaming_response"):
        vars(resource).pop(view, None)


def guard_copies(client: object, reguard: Callable[[Any], object]) -> None:
    """Make the copies of one client (``copy``, ``with_options``) guarded as it is: ``reguard`` runs on each."""
    cls = type(client)
    for name in ("copy", "with_options"):
        original = getattr(cls, name, None)
        if original is None:
            continue

        def copy(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            new = getattr(cls, _name)(client, *args, **kwargs)
            reguard(new)
            return new

        functools.update_wrapper(copy, original)
        setattr(client, name, copy)


_patched: dict[tuple[type, str], tuple[Callable[..., Any], Any]] = {}  # (cls, name) -> (ours, the original)


def patch_class(cls: type, name: str, conversation: Conversation, sources: Sources) -> None:
    """Wrap ``cls.name`` for every instance; patching it again only changes the sources. No such method: nothing."""
    if not hasattr(cls, name):
        return
    existing = _sources_of(vars(cls).get(name))
    if existing is not None:
        existing.guard, existing.inbox = sources.guard, sources.inbox
        return
    original = vars(cls).get(name)
    wrapped = request_wrapper(getattr(cls, name), conversation, sources)
    setattr(cls, name, wrapped)
    _patched[cls, name] = (wrapped, original)


def unpatch_class(cls: type, name: str) -> None:
    """Undo :func:`patch_class`: the original method is back or, when another wrapper now sits on
    top of ours (an instrumentation's), ours passes every call through unchanged."""
    current = vars(cls).get(name)
    sources = _sources_of(current)
    if sources is None:
        return
    sources.guard = sources.inbox = None
    ours, original = _patched.get((cls, name), (None, None))
    if ours is not None and current is ours:
        if original is None:
            delattr(cls, name)  # the method was inherited
        else:
            setattr(cls, name, original)
        del _patched[cls, name]


def _sources_of(method: object) -> Sources | None:
    sources = getattr(method, MARK, None)  # also through a wrapt proxy sitting on top of ours
    return sources if isinstance(sources, Sources) else None


# -- zero-code -------------------------------------------------------------------------------


def client_adapters(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The adapters named in ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS`` (a comma list); an unknown name raises ``ValueError``."""
    raw = (os.environ if environ is None else environ).get(CLIENT_ADAPTERS_ENV, "")
    names = tuple(dict.fromkeys(name.strip().lower() for name in raw.split(",") if name.strip()))
    unknown = [name for name in names if name not in CLIENT_ADAPTERS]
    if unknown:
        raise ValueError(
            f"{CLIENT_ADAPTERS_ENV} names unknown client adapter(s) {', '.join(unknown)} in {raw!r}; "
            f"known: {', '.join(CLIENT_ADAPTERS)}"
        )
    return names


def enable_client_adapters(
    names: Sequence[str], *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> list[str]:
    """Call ``enable_globally`` of each named adapter; returns those switched on.

    A client library that is not installed is logged and skipped, so the others still work.
    """
    enabled: list[str] = []
    for name in names:
        if name not in CLIENT_ADAPTERS:
            raise ValueError(f"unknown client adapter {name!r}; known: {', '.join(CLIENT_ADAPTERS)}")
        module = importlib.import_module(f"otel_repeat_guard.integrations.{name}_client")
        try:
            module.enable_globally(guard=guard, inbox=inbox)
        except ImportError as exc:
            logger.warning(
                "%s names %s, which is not installed (%s): adapter not enabled", CLIENT_ADAPTERS_ENV, name, exc
            )
            continue
        enabled.append(name)
    return enabled
