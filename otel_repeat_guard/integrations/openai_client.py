"""The OpenAI Python SDK: reminders into the next request of one client, under any framework.

    from otel_repeat_guard.integrations.openai_client import guard_client

    client = guard_client(openai.OpenAI())  # or AsyncOpenAI(); guard= and inbox= default to the process-wide ones

Wraps that client's ``chat.completions.create`` and ``.parse`` (``messages``) and
``responses.create`` and ``.parse`` (``input``); the SDK's ``.stream()`` helpers and the
``with_raw_response`` / ``with_streaming_response`` views go through them. Before each request
the reminders due to the agent run of the current span are drained and added as one user
message ``{"role": "user", "content": "<system-reminder>…"}`` after the rest of the
conversation (a string ``input`` becomes a user message first). With none due, the call goes
through with its arguments untouched. A streamed request is changed the same way; the response
is never touched. A copy made by ``client.with_options(...)`` is guarded as well.

:func:`enable_globally` wraps the SDK's resource classes instead, for every client, as
zero-code setup does for ``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=openai``. A reminder reaches the
model once, however many adapters (native, per client, global) are on: each drains the inbox.
Needs ``openai`` 1.66 or later (the Responses API).
"""

from __future__ import annotations

from collections.abc import Iterable
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
METHODS = ("create", "parse")


def _reminder(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _append_message(messages: Iterable[Any], text: str) -> list[Any]:
    return [*messages, _reminder(text)]


def _append_input(value: Any, text: str) -> list[Any]:
    if isinstance(value, str):
        return [_reminder(value), _reminder(text)]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        return [*value, _reminder(text)]
    return [_reminder(text)]  # left out (a conversation continued by previous_response_id)


CHAT = Conversation("messages", _append_message)
RESPONSES = Conversation("input", _append_input, required=False)


def guard_client(
    client: Client, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> Client:
    """Add due reminders to every ``chat.completions`` and ``responses`` request of ``client``; returns ``client``.

    Works for ``OpenAI`` and ``AsyncOpenAI`` (and their Azure twins). Guarding the same client
    again replaces the first guard (one wrapper per method, so nothing is delivered twice).
    """
    sources = Sources(*check_sources(guard, inbox))
    _guard(client, sources)
    return client


def _guard(client: object, sources: Sources) -> None:
    guard_resource(client.chat.completions, METHODS, CHAT, sources)  # type: ignore[attr-defined]
    guard_resource(client.responses, METHODS, RESPONSES, sources)  # type: ignore[attr-defined]
    guard_copies(client, lambda copy: _guard(copy, sources))


def _classes() -> list[tuple[type, Conversation]]:
    from openai.resources.chat.completions import AsyncCompletions, Completions
    from openai.resources.responses import AsyncResponses, Responses

    return [(Completions, CHAT), (AsyncCompletions, CHAT), (Responses, RESPONSES), (AsyncResponses, RESPONSES)]


def enable_globally(*, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
    """Guard every OpenAI client, existing or future (the SDK's resource classes); again: new sources."""
    sources = Sources(*check_sources(guard, inbox))
    for cls, conversation in _classes():
        for name in METHODS:
            patch_class(cls, name, conversation, Sources(sources.guard, sources.inbox))


def disable_globally() -> None:
    """Undo :func:`enable_globally` (clients guarded one by one stay guarded)."""
    for cls, _ in _classes():
        for name in METHODS:
            unpatch_class(cls, name)
