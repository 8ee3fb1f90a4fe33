"""LangChain 1.x / LangGraph: reminders into the next model call.

For ``langchain.agents.create_agent``, add the middleware::

    from otel_repeat_guard.integrations.langchain import RepeatGuardMiddleware

    agent = create_agent(model, tools, middleware=[RepeatGuardMiddleware(guard=guard, inbox=inbox)])

For LangGraph's prebuilt ``create_react_agent``, use the pre-model hook::

    from otel_repeat_guard.integrations.langchain import repeat_guard_pre_model_hook

    agent = create_react_agent(model, tools, pre_model_hook=repeat_guard_pre_model_hook(guard=guard, inbox=inbox))

Both add one ``HumanMessage`` to that model call only (``ModelRequest.override`` and
``llm_input_messages`` do not write to the graph state), after the tool messages.

At a ``stop`` reminder (``GuardConfig.stop_at``) the run ends: the middleware's ``before_model``
jumps to the end of the graph, with the stop reminder as the last message of the state (a
``HumanMessage`` named ``repeat_guard``); the pre-model hook, which cannot jump, raises
:class:`~otel_repeat_guard.RepeatGuardStop`, which carries the reminder.

LangChain's instrumentors do not all make their spans current (OpenInference does not), so
the run is found through LangChain's own run context: the span that the instrumentor's
callback handler keeps for the current LangChain run (OpenInference's ``get_span(run_id)``,
OpenLLMetry's ``spans[run_id].span``), else the current OTel span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context

from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.integrations._common import (
    check_sources,
    due_reminders,
    logger,
    reminder_message,
    stop_if_due,
)
from otel_repeat_guard.processor import RepeatGuardSpanProcessor

if TYPE_CHECKING:
    _AgentMiddleware = object

    def _hook_config(**options: Any) -> Callable[[Any], Any]:
        return lambda hook: hook
else:
    from langchain.agents.middleware import AgentMiddleware as _AgentMiddleware
    from langchain.agents.middleware import hook_config as _hook_config


def _span_of_handler(handler: object, run_id: object) -> Any:
    get_span = getattr(handler, "get_span", None)  # OpenInference's tracer
    if callable(get_span):
        span = get_span(run_id)
        if span is not None:
            return span
    spans = getattr(handler, "spans", None)  # OpenLLMetry's callback handler: run id -> SpanHolder
    if isinstance(spans, dict):
        holder = spans.get(run_id)
        return getattr(holder, "span", None)
    return None


def langchain_run_context() -> Context | None:
    """An OTel context holding the span an instrumentor keeps for the current LangChain run, if any."""
    from langchain_core.callbacks import BaseCallbackManager
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get()
    if not isinstance(config, dict):
        return None
    for manager in config.values():
        if not isinstance(manager, BaseCallbackManager) or manager.parent_run_id is None:
            continue
        for handler in [*manager.handlers, *manager.inheritable_handlers]:
            span = _span_of_handler(handler, manager.parent_run_id)
            if isinstance(span, trace.Span):
                return trace.set_span_in_context(span)
    return None


def _run_context() -> Context | None:
    try:
        return langchain_run_context()
    except Exception:  # a LangChain internals change must not break the model call
        return None


def _due(guard: RepeatGuardSpanProcessor, inbox: ReminderInbox) -> AbstractContextManager[list[Reminder]]:
    return due_reminders(guard, inbox, _run_context(), framework="langchain")


def _with(messages: list[Any], reminders: list[Reminder]) -> list[Any]:
    from langchain_core.messages import HumanMessage

    return [*messages, HumanMessage(content=reminder_message(reminders))]


class RepeatGuardMiddleware(_AgentMiddleware):
    """An ``AgentMiddleware`` whose ``wrap_model_call`` adds due reminders to the request, and whose
    ``before_model`` ends the run at a stop reminder."""

    def __init__(self, *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None) -> None:
        super().__init__()
        self._guard, self._inbox = check_sources(guard, inbox)

    @_hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        try:
            key = self._guard.current_agent_id(_run_context())
            if key is None or not any(r.tier == "stop" for r in self._inbox.peek(key)):
                return None
            from langchain_core.messages import HumanMessage

            stop = HumanMessage(content=reminder_message(self._inbox.drain(key)), name="repeat_guard")
        except Exception:
            logger.exception("repeat guard could not check for a stop; the run goes on")
            return None
        return {"messages": [stop], "jump_to": "end"}

    @_hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        update: dict[str, Any] | None = self.before_model(state, runtime)
        return update

    def _request(self, request: Any) -> Any:
        with _due(self._guard, self._inbox) as reminders:
            if reminders:
                return request.override(messages=_with(list(request.messages), reminders))
        return request

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._request(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._request(request))


def repeat_guard_pre_model_hook(
    *, guard: RepeatGuardSpanProcessor | None = None, inbox: ReminderInbox | None = None
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``pre_model_hook`` for ``create_react_agent``: returns ``llm_input_messages`` for this call."""
    guard, inbox = check_sources(guard, inbox)

    def pre_model_hook(state: dict[str, Any]) -> dict[str, Any]:
        messages = list(state["messages"])
        with _due(guard, inbox) as reminders:
            stop_if_due(reminders)  # a pre-model hook cannot jump: the stop tier ends the run with RepeatGuardStop
            if reminders:
                return {"llm_input_messages": _with(messages, reminders)}
        return {"llm_input_messages": messages}

    return pre_model_hook
