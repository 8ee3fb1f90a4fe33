"""Adapters that put the guard's reminders into agent frameworks' next model request.

Each adapter drains, from a :class:`~otel_repeat_guard.ReminderInbox`, the reminders of
the agent run that is about to call the model (matched through the current span, see
:meth:`~otel_repeat_guard.RepeatGuardSpanProcessor.current_agent_id`) and adds them as one
synthetic user message tagged ``<system-reminder>…</system-reminder>``. Tool results are
never edited. Every framework is imported only inside its own module, so the core package
needs none of them:

- :mod:`otel_repeat_guard.integrations.pydantic_ai`: a ``ProcessHistory`` capability.
- :mod:`otel_repeat_guard.integrations.langchain`: an ``AgentMiddleware`` for
  ``langchain.agents.create_agent`` and a ``pre_model_hook`` for LangGraph's
  ``create_react_agent``.
- :mod:`otel_repeat_guard.integrations.openai_agents`: a ``call_model_input_filter`` for
  ``RunConfig``.
- :mod:`otel_repeat_guard.integrations.strands`: a ``BeforeModelCallEvent`` hook provider.
- :mod:`otel_repeat_guard.integrations.google_adk`: a ``before_model_callback``.
- :mod:`otel_repeat_guard.integrations.smolagents`: a wrapper around the agent's model.
- :mod:`otel_repeat_guard.integrations.llama_index`: ``FunctionAgent`` (a ``take_step`` subclass)
  and ``ReActAgent`` (a chat formatter).
- :mod:`otel_repeat_guard.integrations.crewai`: a ``before_llm_call`` hook.
- :mod:`otel_repeat_guard.integrations.autogen`: a model-context wrapper.
- :mod:`otel_repeat_guard.integrations.haystack`: an Agent ``before_llm`` hook.
- :mod:`otel_repeat_guard.integrations.claude_agent_sdk`: hooks for ``ClaudeAgentOptions`` (the tools run in the
  Claude Code CLI: each PostToolUse hook becomes the tool span, and its answer carries the reminders);
  :mod:`otel_repeat_guard.cli.claude_code_hook` is the same as a Claude Code command hook.

Model-client adapters work under any framework that calls the model through these clients
(Semantic Kernel and Agno have no hook before each model request, so they use these):

- :mod:`otel_repeat_guard.integrations.openai_client`: ``guard_client(client)``, chat
  completions and responses, sync and async.
- :mod:`otel_repeat_guard.integrations.anthropic_client`: ``guard_client(client)``, messages.
- :mod:`otel_repeat_guard.integrations.litellm_client`: ``guard_litellm()``.

The inbox drain is atomic, so a native adapter and a client adapter both active deliver a
reminder once. An adapter whose edit of the request fails sends it unchanged and gives the reminders
back to the inbox for the run's next request (:func:`due_reminders`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_repeat_guard.integrations._common import (
        REMINDER_CLOSE,
        REMINDER_OPEN,
        due_reminders,
        reminder_message,
        take_reminders,
    )

__all__ = ["REMINDER_CLOSE", "REMINDER_OPEN", "due_reminders", "reminder_message", "take_reminders"]


def __getattr__(name: str) -> Any:
    """The adapters' shared names, loaded on first use (PEP 562; this package is never compiled): the Claude Code
    command hook imports its modules here without the processor and OpenTelemetry."""
    if name in __all__:
        from otel_repeat_guard.integrations import _common

        return getattr(_common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
