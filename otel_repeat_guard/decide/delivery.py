"""Reminders the guard handed on that no adapter took: counted, said once, and put on the span of the model
call that went out without them (docs/semantics.md, "Undelivered").

A reminder handed to a :class:`~otel_repeat_guard.decide.inbox.ReminderInbox` waits there until an adapter (or
the harness) drains it before the run's next model request. It is **undelivered** when it is still in the inbox
as the run's next model call ends (a model call that started after it was handed on), or as its run ends. Each
is counted on ``repeat_tool_guard.undelivered_reminders`` (by ``repeat_tool_guard.tier`` and ``reason``), said
on that model call's span as a ``repeat_tool_guard.undelivered`` event (the store's row for it), and warned of
once per guard and reason, with the adapter that would deliver it for the framework seen.

Reasons: ``no_adapter`` (no adapter asked for the run's reminders), ``no_run`` (an adapter asked, but the guard
found no agent run from where the request went out: the client adapters' requirement), ``not_added`` (an
adapter of the run asked, but the reminder stayed: its edit failed, or it drained another run), ``run_ended``
(the run ended first).

Only reminders handed to an in-process inbox are watched (the guard's ``on_reminder`` is that inbox's ``put``):
a callback of the harness's own takes its reminders as it is called, and a shared inbox is drained in another
process.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.decide.inbox import RedisReminderInbox, ReminderInbox
from otel_repeat_guard.spans.span_events import EventSpec
from otel_repeat_guard.version import __version__

UNDELIVERED_REMINDERS: Final = "repeat_tool_guard.undelivered_reminders"
UNDELIVERED_EVENT: Final = "repeat_tool_guard.undelivered"
NO_ADAPTER: Final = "no_adapter"
NO_RUN: Final = "no_run"
NOT_ADDED: Final = "not_added"
RUN_ENDED: Final = "run_ended"
REASONS: Final = (NO_ADAPTER, NO_RUN, NOT_ADDED, RUN_ENDED)
MAX_HANDED: Final = 64
"""Reminders watched per run (the inbox keeps 16 per run): past it, the oldest is no longer watched."""

CLIENT_REQUIREMENT: Final = (
    "a client adapter (OTEL_REPEAT_GUARD_CLIENT_ADAPTERS, guard_client()) finds the run from the span current "
    "where the request goes out, so the framework's instrumentation must make its spans current there "
    "(OpenInference's LangChain instrumentation does not)"
)

# (instrumentation scope prefix, the framework, the adapter that delivers its reminders), most specific first.
_ADAPTERS: Final = (
    (
        ("openinference.instrumentation.langchain", "opentelemetry.instrumentation.langchain"),
        "LangChain",
        "create_agent(..., middleware=[RepeatGuardMiddleware()]) or create_react_agent(..., "
        "pre_model_hook=repeat_guard_pre_model_hook()) from otel_repeat_guard.integrations.langchain",
    ),
    (
        ("openinference.instrumentation.openai_agents", "openai.agents", "openai-agents"),
        "the OpenAI Agents SDK",
        "RunConfig(call_model_input_filter=repeat_guard_input_filter()) from otel_repeat_guard.integrations.openai_agents",
    ),
    (
        ("openinference.instrumentation.crewai", "crewai"),
        "CrewAI",
        "register_repeat_guard_hook() from otel_repeat_guard.integrations.crewai, before kickoff()",
    ),
    (
        ("openinference.instrumentation.smolagents", "smolagents"),
        "smolagents",
        "RepeatGuardModel(model) from otel_repeat_guard.integrations.smolagents",
    ),
    (
        ("openinference.instrumentation.llama_index", "llama_index"),
        "LlamaIndex",
        "RepeatGuardFunctionAgent or RepeatGuardReActChatFormatter from otel_repeat_guard.integrations.llama_index",
    ),
    (
        ("openinference.instrumentation.haystack", "haystack"),
        "Haystack",
        'Agent(..., hooks={"before_llm": [RepeatGuardHook()]}) from otel_repeat_guard.integrations.haystack',
    ),
    (
        ("autogen",),
        "AutoGen",
        "AssistantAgent(..., model_context=RepeatGuardModelContext()) from otel_repeat_guard.integrations.autogen",
    ),
    (
        ("pydantic-ai", "pydantic_ai"),
        "pydantic-ai",
        "Agent(..., capabilities=[repeat_guard_capability()]) from otel_repeat_guard.integrations.pydantic_ai",
    ),
    (
        ("strands",),
        "Strands",
        "Agent(..., hooks=[RepeatGuardHooks()]) from otel_repeat_guard.integrations.strands",
    ),
    (
        ("gcp.vertex.agent", "google.adk"),
        "google-adk",
        "LlmAgent(..., before_model_callback=repeat_guard_before_model_callback()) from "
        "otel_repeat_guard.integrations.google_adk",
    ),
    (
        ("openinference.instrumentation.openai", "opentelemetry.instrumentation.openai"),
        "the OpenAI SDK",
        "guard_client(client) from otel_repeat_guard.integrations.openai_client (or "
        "OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=openai under zero-code setup)",
    ),
    (
        ("openinference.instrumentation.anthropic", "opentelemetry.instrumentation.anthropic"),
        "the Anthropic SDK",
        "guard_client(client) from otel_repeat_guard.integrations.anthropic_client (or "
        "OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=anthropic under zero-code setup)",
    ),
    (
        ("openinference.instrumentation.litellm", "opentelemetry.instrumentation.litellm"),
        "LiteLLM",
        "guard_litellm() from otel_repeat_guard.integrations.litellm_client (or "
        "OTEL_REPEAT_GUARD_CLIENT_ADAPTERS=litellm under zero-code setup)",
    ),
)
_ANY_ADAPTER: Final = "the adapter of your framework (docs/runtimes.md, 'Turn it on, per framework')"


def adapter_for(scope: str) -> tuple[str | None, str]:
    """The framework that instrumentation ``scope`` belongs to (None: not known), and the adapter that delivers
    its reminders."""
    for prefixes, framework, adapter in _ADAPTERS:
        if scope.startswith(prefixes):
            return framework, adapter
    return None, _ANY_ADAPTER


def fix_for(reason: str, scope: str) -> str:
    """What makes the reminders of runs seen through instrumentation ``scope`` reach the model."""
    framework, adapter = adapter_for(scope)
    seen = f"for {framework}, " if framework is not None else ""
    if reason == NO_RUN:
        return f"{CLIENT_REQUIREMENT}; {seen}use {adapter}"
    if reason == NOT_ADDED:
        return f"see the adapter's error logged before this; {seen}the adapter is {adapter}"
    return f"{seen}turn on {adapter}"


def explain(reason: str) -> str:
    """What the reason means, in a sentence."""
    if reason == NO_RUN:
        return "an adapter asked for the run's reminders, but found no agent run where its model request went out"
    if reason == NOT_ADDED:
        return "an adapter of the run asked for its reminders, but this one stayed in the inbox"
    if reason == RUN_ENDED:
        return "the run ended before a model call took it"
    return "no adapter asked for the run's reminders before its next model call"


class Handed(NamedTuple):
    reminder: Reminder
    at_ns: int  # when it was handed on (the wall clock, as spans' times)


def _reason(handed: Handed, asked: int, asked_without_run: int) -> str:
    """Why a reminder handed on at ``handed.at_ns`` stayed: when an adapter last asked for its run's reminders,
    and when one last asked and found no run (0: never)."""
    if asked >= handed.at_ns:
        return NOT_ADDED
    if asked_without_run >= handed.at_ns:
        return NO_RUN
    return NO_ADAPTER


def watched_inbox(on_reminder: object) -> ReminderInbox | None:
    """The in-process inbox whose ``put`` is ``on_reminder``, if it is one (a shared inbox is drained elsewhere)."""
    inbox = getattr(on_reminder, "__self__", None)
    if isinstance(inbox, ReminderInbox) and not isinstance(inbox, RedisReminderInbox):
        return inbox if getattr(on_reminder, "__name__", "") == "put" else None
    return None


class Deliveries:
    """The reminders handed to an in-process inbox, per run, until taken or declared undelivered."""

    __slots__ = ("_asked", "_asked_without_run", "_counts", "_inbox", "_limit", "_lock", "_logger", "_warned", "runs")

    def __init__(self, meter_provider: MeterProvider | None, logger: logging.Logger, limit: int) -> None:
        self.runs: dict[str, list[Handed]] = {}
        """Run key -> its reminders handed on and not known taken; test its truth for "any watched"."""
        self._inbox: weakref.ref[ReminderInbox] | None = None  # weak: the meter holds this, not the inbox
        self._asked: dict[str, int] = {}  # run key -> when an adapter last asked for its reminders
        self._asked_without_run = 0  # when an adapter last asked and found no run
        self._counts: dict[tuple[str, str], int] = {}
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._logger, self._limit = logger, limit
        meter = (meter_provider or get_meter_provider()).get_meter("otel_repeat_guard", __version__)
        meter.create_observable_counter(
            UNDELIVERED_REMINDERS,
            callbacks=[self._observe],
            unit="{reminder}",
            description="Reminders handed on that no adapter took before the run's next model call ended (or the "
            "run ended), by tier and reason (no_adapter, no_run, not_added, run_ended).",
        )

    def watch(self, inbox: ReminderInbox) -> None:
        """Reminders go to ``inbox``: watch whether they are taken from it."""
        self._inbox = weakref.ref(inbox)

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        self.runs.clear()
        self._asked.clear()
        self._counts.clear()

    def handed(self, reminder: Reminder) -> None:
        """The guard handed ``reminder`` on to the inbox."""
        if self._inbox is None:
            return
        with self._lock:
            handed = self.runs.get(reminder.agent_id)
            if handed is None:
                if len(self.runs) >= self._limit:
                    oldest = next(iter(self.runs))
                    self.runs.pop(oldest)
                    self._asked.pop(oldest, None)
                handed = self.runs[reminder.agent_id] = []
            handed.append(Handed(reminder, time.time_ns()))
            del handed[:-MAX_HANDED]

    def asked(self, run_key: str | None) -> None:
        """An adapter asked for the reminders due in a model request about to go out: for run ``run_key``, or
        (None) it found no run."""
        if not self.runs:
            return
        now = time.time_ns()
        if run_key is None:
            self._asked_without_run = now
        elif run_key in self.runs:
            self._asked[run_key] = now

    def model_call_ended(self, run_key: str, started_ns: int, scope: str) -> list[EventSpec]:
        """A model call of the run, started at ``started_ns`` by the span clock, ended: the reminders handed on
        before it started and still in the inbox are undelivered (their events, for its span)."""
        with self._lock:
            handed = self.runs.get(run_key)
            if not handed:
                return []
            due = [h for h in handed if h.at_ns < started_ns]
            if not due:
                return []
            kept = [h for h in handed if h.at_ns >= started_ns]
            asked = self._asked.get(run_key, 0)
            if kept:
                self.runs[run_key] = kept
            else:
                self.runs.pop(run_key, None)
                self._asked.pop(run_key, None)
        without_run = self._asked_without_run
        return self._undelivered(run_key, due, scope, lambda h: _reason(h, asked, without_run))

    def run_ended(self, run_key: str, scope: str) -> list[EventSpec]:
        """The run ended: what it was handed and did not take is undelivered."""
        with self._lock:
            handed = self.runs.pop(run_key, None)
            self._asked.pop(run_key, None)
        if not handed:
            return []
        return self._undelivered(run_key, handed, scope, lambda h: RUN_ENDED)

    def _undelivered(
        self, run_key: str, handed: list[Handed], scope: str, reason_of: Callable[[Handed], str]
    ) -> list[EventSpec]:
        inbox = None if self._inbox is None else self._inbox()
        if inbox is None:
            return []
        try:
            waiting = inbox.peek(run_key)
        except Exception:
            self._logger.warning("repeat guard could not check its inbox for undelivered reminders", exc_info=True)
            return []
        events: list[EventSpec] = []
        for h in handed:
            if not any(r is h.reminder or r == h.reminder for r in waiting):
                continue  # taken
            reason = reason_of(h)
            reminder = h.reminder
            with self._lock:
                key = (reminder.tier, reason)
                self._counts[key] = self._counts.get(key, 0) + 1
            self._warn(reason, scope, reminder)
            attributes: dict[str, AttributeValue] = {
                "repeat_tool_guard.tier": reminder.tier,
                "repeat_tool_guard.reason": reason,
                "repeat_tool_guard.kind": reminder.kind,
                "repeat_tool_guard.threshold": reminder.threshold,
                "gen_ai.tool.name": reminder.tool_name,
                "repeat_tool_guard.reminder_span_id": reminder.span_id,
            }
            events.append((UNDELIVERED_EVENT, attributes))
        return events

    def _warn(self, reason: str, scope: str, reminder: Reminder) -> None:
        framework = adapter_for(scope)[0] or scope
        with self._lock:
            if (reason, framework) in self._warned or len(self._warned) >= self._limit:
                return
            self._warned.add((reason, framework))
        self._logger.warning(
            "repeat guard: a %s reminder for tool %r did not reach the model: %s (%s). To deliver it: %s.",
            reminder.tier,
            reminder.tool_name,
            explain(reason),
            reason,
            fix_for(reason, scope),
        )

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._counts.items())
        return [Observation(n, {"repeat_tool_guard.tier": tier, "reason": reason}) for (tier, reason), n in totals]
