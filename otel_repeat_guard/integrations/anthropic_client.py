"""The Anthropic Python SDK: reminders into the next ``messages`` request of one client, under any framework.

    from otel_repeat_guard.integrations.anthropic_client import guard_client

    client = guard_client(anthropic.Anthropic())  # or AsyncAnthropic(); guard= and inbox= default to the process-wide ones

Wraps that client's ``messages.create``, ``.stream`` and ``.parse``. Before each request the
reminders due to the agent run of the current span are drained and added as one text block of
``<system-reminder>`` blocks: appended to the last message when it is a user turn of
``tool_result`` blocks (after them, so user and assistant turns keep alternating), else as a
new user message. With none due, the call goes through with its arguments untouched. The
response (streamed or not) is never touched.

:func:`enable_globally` wraps the SDK's ``Messages`` classes instead, for every client, as
zero-code setup does for ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=anthropic``. Needs ``anthropic``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._clients import (
    Conversation,
    Sources,
    guard_copies,
    guard_resource,
    patch_class,
    unpatch_class,
)
from otel_repeat_guard.integrations._common import check_sources
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

Client = TypeVar("Client")
METHODS = ("create", "stream", "parse")


def _block_type(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)


def _append_message(messages: Iterable[Any], text: str) -> list[Any]:
    out = list(messages)
    last = out[-1] if out else None
    if isinstance(last, Mapping) and last.get("role") == "user":
        content = last.get("content")
        if isinstance(content, (list, tuple)) and any(_block_type(b) == "tool_result" for b in content):
            out[-1] = {**last, "content": [*content, {"type": "text", "text": text}]}
            return out
    return [*out, {"role": "user", "content": text}]


MESSAGES = Conversation("messages", _append_message)


def guard_client(
    client: Client, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> Client:
    """Add due reminders to every ``messages`` request of ``client`` (``Anthropic`` or ``AsyncAnthropic``); returns it.

    Guarding the same client again replaces the first guard (nothing is delivered twice).
    """
    sources = Sources(*check_sources(guard, inbox))
    _guard(client, sources)
    return client


def _guard(client: object, sources: Sources) -> None:
    guard_resource(client.messages, METHODS, MESSAGES, sources)  # type: ignore[attr-defined]
    guard_copies(client, lambda copy: _guard(copy, sources))


def _classes() -> list[type]:
    from anthropic.resources.messages import AsyncMessages, Messages

    return [Messages, AsyncMessages]


def enable_globally(*, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
    """Guard every Anthropic client, existing or future (the SDK's ``Messages`` classes); again: new sources."""
    guard, inbox = check_sources(guard, inbox)
    for cls in _classes():
        for name in METHODS:
            patch_class(cls, name, MESSAGES, Sources(guard, inbox))


def disable_globally() -> None:
    """Undo :func:`enable_globally` (clients guarded one by one stay guarded)."""
    for cls in _classes():
        for name in METHODS:
            unpatch_class(cls, name)
