"""LiteLLM: reminders into the next ``completion`` / ``acompletion`` request, for every caller (CrewAI, ...).

    from otel_repeat_guard.integrations.litellm_client import guard_litellm

    guard_litellm()  # guard= and inbox= default to the process-wide ones; call it before the agent starts

Before each request the reminders due to the agent run of the current span are drained and
added to a copy of ``messages`` as one user message of ``<system-reminder>`` blocks, after the
tool results. With none due, the request goes out unchanged. It takes two parts, because
LiteLLM's SDK has a supported request-changing hook for async calls only:

- ``litellm.acompletion``: a ``CustomLogger`` in ``litellm.callbacks`` (:func:`repeat_guard_logger`)
  whose ``async_pre_call_deployment_hook`` returns the request with the reminder added. LiteLLM
  documents that hook for changing a request just before it is sent, and runs it in the
  caller's task, where the current span is the agent's.
- ``litellm.completion`` (sync): LiteLLM runs no hook there that may change the messages
  (``log_pre_api_call`` is for logging and sees the request after it was built;
  ``async_pre_request_hook`` runs on the Anthropic messages route only; prompt-management hooks
  only run with a ``prompt_id``), so :func:`guard_litellm` replaces the module attribute
  ``litellm.completion`` with a wrapper. Code that took the function itself earlier
  (``from litellm import completion``) keeps the unwrapped one: call :func:`guard_litellm` first.
  LiteLLM's ``acompletion`` does not call through that attribute, so async calls are not seen twice.

:func:`enable_globally` is :func:`guard_litellm` with the process-wide guard and inbox (LiteLLM
has no client objects: it is process-wide either way), as zero-code setup does for
``OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=litellm``. A reminder reaches the model once, even with the
openai client adapter on as well (LiteLLM's OpenAI provider calls the ``openai`` SDK): the
first to drain the inbox delivers it. Needs ``litellm`` with ``async_pre_call_deployment_hook``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._clients import MARK, Conversation, Sources, request_wrapper, with_reminders
from otel_repeat_guard.integrations._common import check_sources
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

CHAT_CALL_TYPES = frozenset({"completion", "acompletion"})


def _append_message(messages: Iterable[Any], text: str) -> list[Any]:
    return [*messages, {"role": "user", "content": text}]


MESSAGES = Conversation("messages", _append_message)
_logger_class: list[type] = []
_wrapper: list[Any] = []  # our wrapper of litellm.completion, while installed


def _call_type_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type))


def repeat_guard_logger(*, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> Any:
    """A LiteLLM ``CustomLogger`` that adds due reminders to each ``acompletion`` request.

    Add it yourself (``litellm.callbacks.append(...)``) to guard async calls only; sync
    ``litellm.completion`` needs :func:`guard_litellm`.
    """
    sources = Sources(*check_sources(guard, inbox))
    if not _logger_class:
        from litellm.integrations.custom_logger import CustomLogger

        class RepeatGuardLogger(CustomLogger):  # type: ignore[misc]  # untyped base class
            """Adds the repeat guard's due reminders to chat requests, just before they are sent."""

            sources: Sources

            async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> Any:
                if _call_type_name(call_type) not in CHAT_CALL_TYPES:
                    return None
                changed = with_reminders(kwargs, MESSAGES, self.sources)
                return None if changed is kwargs else changed

        _logger_class.append(RepeatGuardLogger)
    logger = _logger_class[0]()
    logger.sources = sources
    return logger


def guard_litellm(*, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
    """Add due reminders to every ``litellm.completion`` and ``litellm.acompletion`` request of this process.

    Calling it again replaces the guard and inbox (one logger, one wrapper: nothing is delivered twice).
    """
    import litellm

    guard, inbox = check_sources(guard, inbox)
    logger = _installed_logger(litellm)
    if logger is None:
        litellm.callbacks.append(repeat_guard_logger(guard=guard, inbox=inbox))
    else:
        logger.sources.guard, logger.sources.inbox = guard, inbox
    sources = getattr(litellm.completion, MARK, None)  # ours, or a wrapper on top of ours
    if isinstance(sources, Sources):
        sources.guard, sources.inbox = guard, inbox
    else:
        _wrapper[:] = [request_wrapper(litellm.completion, MESSAGES, Sources(guard, inbox), is_async=False)]
        litellm.completion = _wrapper[0]


def _installed_logger(litellm: Any) -> Any:
    cls = _logger_class[0] if _logger_class else None
    return next((c for c in litellm.callbacks if cls is not None and isinstance(c, cls)), None)


def unguard_litellm() -> None:
    """Undo :func:`guard_litellm`."""
    import litellm

    logger = _installed_logger(litellm)
    if logger is not None:
        litellm.callbacks.remove(logger)
    sources = getattr(litellm.completion, MARK, None)
    if isinstance(sources, Sources):
        sources.guard = sources.inbox = None  # passes every call through, should another wrapper sit on top
    if _wrapper and litellm.completion is _wrapper[0]:
        litellm.completion = _wrapper.pop().__wrapped__


def enable_globally(*, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
    """:func:`guard_litellm`, under the name every client adapter has for zero-code setup."""
    guard_litellm(guard=guard, inbox=inbox)


def disable_globally() -> None:
    """:func:`unguard_litellm`."""
    unguard_litellm()
