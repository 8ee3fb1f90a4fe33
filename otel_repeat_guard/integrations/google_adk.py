"""Google ADK: a ``before_model_callback`` that adds due reminders to the next model call.

    from otel_repeat_guard.integrations.google_adk import repeat_guard_before_model_callback

    agent = LlmAgent(name="weather_agent", model=model, tools=tools,
                     before_model_callback=repeat_guard_before_model_callback(guard=guard, inbox=inbox))

ADK runs the callback with the model call's span current (``call_llm``; in its schema 2, the calling
agent span), so the run is found through the span context. The reminders go into that
one request as a new ``Content(role="user")`` appended to ``llm_request.contents``, after the
function responses, which are left as they are. ADK rebuilds ``contents`` from the session
for every model call and the callback does not write to the session, so the reminder
reaches this call only and is not in the session's events.

An agent that already has a callback: pass it as ``then`` (it runs after, and sees the
reminder already added; what it returns is returned, so it can still answer instead of the
model), or list both, ours first: ``before_model_callback=[ours, yours]``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import check_sources, check_then, due_reminders, reminder_message
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

BeforeModelCallback = Callable[[Any, Any], Awaitable[Any]]


def _binds_by_keyword(callback: Callable[..., Any]) -> bool:
    """ADK passes ``callback_context=`` and ``llm_request=`` by keyword when the signature allows it."""
    try:
        inspect.signature(callback).bind(callback_context=None, llm_request=None)
    except (TypeError, ValueError):
        return False
    return True


def repeat_guard_before_model_callback(
    *,
    guard: RepeatGuardSpanProcessor | None = None,
    inbox: ReminderInbox | None = None,
    then: Callable[..., Any] | None = None,
) -> BeforeModelCallback:
    """An async ``before_model_callback``: ``(callback_context, llm_request) -> LlmResponse | None``."""
    guard, inbox = check_sources(guard, inbox)
    check_then(then)
    from google.genai import types

    by_keyword = then is not None and _binds_by_keyword(then)

    async def before_model_callback(callback_context: Any, llm_request: Any) -> Any:
        with due_reminders(guard, inbox, framework="google-adk") as reminders:
            if reminders:
                message = types.Content(role="user", parts=[types.Part(text=reminder_message(reminders))])
                llm_request.contents = [*(llm_request.contents or ()), message]
        if then is None:
            return None
        if by_keyword:
            result = then(callback_context=callback_context, llm_request=llm_request)
        else:
            result = then(callback_context, llm_request)
        return await result if inspect.isawaitable(result) else result

    return before_model_callback
