"""The span processor: thin glue that reads tool spans, asks the chain logic, records the answer."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor
from opentelemetry.trace import SpanContext, StatusCode, format_span_id, format_trace_id
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.canonical import RAW_KEY_MIN_CHARS, arguments_key, canonical_arguments, raw_key
from otel_repeat_guard.chains import ChainTracker
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import (
    DEFAULT_CONVENTIONS,
    MISSING,
    AgentRun,
    Convention,
    agent_id_prefilter,
    agent_run_key,
    failed,
    find_agent_run,
    tool_call_reader,
)
from otel_repeat_guard.metrics import GuardMetrics
from otel_repeat_guard.patterns import ToolFilter
from otel_repeat_guard.reminders import Reminder, arguments_preview, reminder_text, tier_for
from otel_repeat_guard.span_events import (
    EventSpec,
    append_to_ending_span,
    attributes_of,
    contents_of,
    copy_with_events,
)

logger = logging.getLogger("otel_repeat_guard")

ReminderCallback = Callable[[Reminder], None]
Agent = tuple[str, str | None]
"""An agent run as the guard keys it: (chain key, readable name)."""
Decision = tuple[list[EventSpec], Reminder | None]
"""What a repeated call gets: the events for its span, and a reminder for the harness (or None)."""

REPEAT_EVENT = "repeat_tool_guard.repeat"
REMINDER_EVENT = "repeat_tool_guard.reminder"
_MAX_ANCESTRY = 64
_HAS_ENDING_HOOK = hasattr(SpanProcessor, "_on_ending")


def _positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


class RepeatGuardSpanProcessor(SpanProcessor):
    """Watches tool-call spans and reminds agents that repeat the same call.

    Advisory only: it never blocks, delays or rewrites a call. Register it on the
    ``TracerProvider`` like any processor; reminders go to ``on_reminder`` on the thread
    that ends the tool span, and repetition events go on the tool span itself. With
    ``downstream`` it instead wraps those processors and hands them a copy of each span
    with the events added (for SDKs without the end-of-span hook). ``redact`` rewrites the
    canonical arguments text before a reminder quotes it (in its text, its preview and the
    reminder span event); detection always compares the real arguments.
    """

    def __init__(
        self,
        config: GuardConfig | None = None,
        on_reminder: ReminderCallback | None = None,
        *,
        meter_provider: MeterProvider | None = None,
        max_agents: int = 100_000,
        max_live_spans: int = 100_000,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
        downstream: Sequence[SpanProcessor] = (),
        redact: Callable[[str], str] | None = None,
    ) -> None:
        config = GuardConfig() if config is None else config
        if not isinstance(config, GuardConfig):
            raise ValueError(f"config must be a GuardConfig, got {config!r}")
        if on_reminder is not None and not callable(on_reminder):
            raise ValueError(f"on_reminder must be callable or None, got {on_reminder!r}")
        if redact is not None and not callable(redact):
            raise ValueError(f"redact must be callable or None, got {redact!r}")
        self._redact = redact
        self._config = config
        self._on_reminder = on_reminder
        self._max_live_spans = _positive_int("max_live_spans", max_live_spans)
        self._conventions = tuple(conventions)
        self._read_tool_call = tool_call_reader(self._conventions)
        self._may_name_agent_id = agent_id_prefilter(self._conventions)
        self._downstream = tuple(downstream)
        self._wrapping = bool(self._downstream) or not _HAS_ENDING_HOOK
        self._limits = SpanLimits()
        self._tracked = ToolFilter(config.include, config.exclude)
        self._metrics = GuardMetrics(meter_provider)
        self._chains = ChainTracker(_positive_int("max_agents", max_agents), self._metrics.run_ended)
        self._tiers = {t: tier_for(t, config.thresholds) for t in config.thresholds}
        self._live: dict[int, Span] = {}  # open spans of this process, by span id
        self._owned: dict[int, Agent] = {}  # agent-run (or local root) span id -> the chain it owns

    @property
    def config(self) -> GuardConfig:
        return self._config

    # -- harness API ---------------------------------------------------------------

    def reset(self, agent_id: str) -> None:
        """A user prompt was submitted: start the agent's chain afresh."""
        try:
            self._chains.reset(agent_id)
        except Exception:
            logger.exception("repeat guard failed in reset(%r)", agent_id)

    def forget(self, agent_id: str) -> None:
        """The agent is disposed: drop its state."""
        try:
            self._chains.forget(agent_id)
        except Exception:
            logger.exception("repeat guard failed in forget(%r)", agent_id)

    def run_length(self, agent_id: str) -> int:
        """The agent's current consecutive count, 0 if none."""
        return self._chains.run_length(agent_id)

    def current_agent_id(self, context: Context | None = None) -> str | None:
        """The chain key of the agent run that the current span (of ``context``) belongs to.

        Resolved exactly as for a tool span started right here, so a harness can match
        reminders to the run that is about to call the model:
        ``inbox.drain(guard.current_agent_id())``. None when there is no current span of
        this process, or it is not inside an agent run. (A tool span's own explicit
        ``gen_ai.agent.id`` cannot be seen from here: such harnesses know their id.)
        """
        try:
            found = self._agent_of(trace.get_current_span(context).get_span_context())
        except Exception:
            logger.exception("repeat guard failed to resolve the current agent run")
            return None
        return None if found is None else found[0]

    # -- SpanProcessor -------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            live = self._live
            live[span.context.span_id] = span
            if len(live) > self._max_live_spans:
                self._evict_oldest(live)
            _, attributes, _ = contents_of(span)
            # Most instrumentations set no attributes at start; and only an agent run with an id resets here.
            if attributes and (self._may_name_agent_id is None or self._may_name_agent_id(attributes)):
                run = self._agent_run(span.name, attributes)
                if run is not None and run.agent_id is not None:
                    self._chains.reset(run.agent_id)  # each agent run is a new prompt
        except Exception:
            logger.exception("repeat guard failed in on_start; the span is unaffected")
        for processor in self._downstream:
            processor.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        if self._wrapping:
            return
        try:
            decision = self._decide(span)
            if decision is not None:
                events, reminder = decision
                append_to_ending_span(span, events)
                self._deliver(reminder)
        except Exception:
            logger.exception("repeat guard failed at the end of span %r; the span is unaffected", span.name)

    def on_end(self, span: ReadableSpan) -> None:
        forwarded = span
        try:
            context = span.context
            if context is not None:  # stop tracking it; if it was an agent run (or local root), end its chain
                span_id = context.span_id
                self._live.pop(span_id, None)
                agent = self._owned.pop(span_id, None)
                if agent is not None:
                    self._chains.forget(agent[0])
            if self._wrapping:
                decision = self._decide(span)
                if decision is not None:
                    events, reminder = decision
                    if self._downstream:
                        forwarded = copy_with_events(span, events, self._limits)
                    self._deliver(reminder)
        except Exception:
            logger.exception("repeat guard failed in on_end for span %r; the span is unaffected", span.name)
        for processor in self._downstream:
            processor.on_end(forwarded)

    def shutdown(self) -> None:
        for processor in self._downstream:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all([processor.force_flush(timeout_millis) for processor in self._downstream])

    # -- extract, decide, record -----------------------------------------------------

    def _decide(self, span: ReadableSpan) -> Decision | None:
        name, attributes, events = contents_of(span)
        call = self._read_tool_call(name, attributes, events)  # nearly every span stops here
        if call is None:
            return None
        tool, arguments, agent_id, agent_name, error = call
        if not self._tracked[tool]:
            return None
        if agent_id is None:
            parent = span.parent
            agent = None if parent is None else self._owned.get(parent.span_id) or self._agent_of(parent)
            if agent is None:
                return None
            agent_id, agent_name = agent
        # unknown or not JSON-like arguments have no key: never identical to others
        key = raw = None
        if type(arguments) is str and len(arguments) >= RAW_KEY_MIN_CHARS:
            raw = raw_key(arguments)  # a long text received unchanged need not be canonicalized again
            key = self._chains.key_if_same_raw(agent_id, raw) or arguments_key(arguments)
        elif arguments is not MISSING:
            key = arguments_key(arguments)
        run = self._chains.observe(agent_id, tool, key, raw)
        if run < 2 or key is None:
            return None
        error = error or span.status.status_code is StatusCode.ERROR or failed(attributes, events)
        return self._record_repeat(span, tool, arguments, key, error, agent_id, agent_name, run)

    def _record_repeat(
        self,
        span: ReadableSpan,
        tool: str,
        arguments: Any,
        key: bytes,
        error: bool,
        agent_id: str,
        agent_name: str | None,
        run: int,
    ) -> Decision:
        repeat: dict[str, AttributeValue] = {
            "repeat_tool_guard.run_length": run,
            "repeat_tool_guard.agent_id": agent_id,
            "gen_ai.tool.name": tool,
            "repeat_tool_guard.arguments_digest": key.hex(),  # the key is the canonical form's digest
            "repeat_tool_guard.error": error,
        }
        events: list[EventSpec] = [(REPEAT_EVENT, repeat)]
        self._metrics.repeated_call(tool)
        tier = self._tiers.get(run)
        if tier is None:
            return events, None
        shown = canonical_arguments(arguments)  # only now: the key spared computing it on every call
        if self._redact is not None:
            shown = self._redact(shown)
        preview = arguments_preview(shown, self._config.arguments_preview_chars)
        text = reminder_text(tier, tool, run, preview)
        events.append(
            (
                REMINDER_EVENT,
                {
                    "repeat_tool_guard.run_length": run,
                    "repeat_tool_guard.threshold": run,
                    "repeat_tool_guard.tier": tier,
                    "repeat_tool_guard.reminder_text": text,
                },
            )
        )
        self._metrics.reminder(tool, tier, run)
        context = span.context
        reminder = Reminder(
            agent_id=agent_id,
            agent_name=agent_name,
            tool_name=tool,
            run_length=run,
            threshold=run,
            tier=tier,
            text=text,
            arguments_preview=preview,
            trace_id=format_trace_id(context.trace_id) if context else "0" * 32,
            span_id=format_span_id(context.span_id) if context else "0" * 16,
        )
        return events, reminder

    def _agent_run(self, name: str, attributes: Mapping[str, Any]) -> AgentRun | None:
        return find_agent_run(self._conventions, name, attributes)

    def _agent_of(self, parent: SpanContext | None) -> Agent | None:
        """The agent run that a span with this parent belongs to.

        The nearest live ancestor that some convention reads as an agent run, with its
        attributes (or, failing those, its name) read now; else the local root, the top
        of the live ancestor chain in this process. A span without a (live) parent has
        none. The first answer for an ancestor is kept until it ends, so a run's key never
        changes while it is open, however late its attributes arrive.
        """
        if parent is None or not parent.is_valid:
            return None
        owned, live = self._owned, self._live
        span_id = parent.span_id
        root: tuple[int, Span] | None = None
        for _ in range(_MAX_ANCESTRY):
            known = owned.get(span_id)
            if known is not None:
                return known
            ancestor = live.get(span_id)
            if ancestor is None:
                break
            run = self._agent_run(ancestor.name, attributes_of(ancestor))
            if run is not None:
                return self._own(span_id, run.agent_id, run.agent_name or ancestor.name)
            root = (span_id, ancestor)
            grandparent = ancestor.parent
            if grandparent is None:
                break
            span_id = grandparent.span_id
        if root is None:
            return None
        return self._own(root[0], None, root[1].name)  # no agent span: the local root stands for the run

    def _own(self, span_id: int, agent_id: str | None, name: str) -> Agent:
        agent = (agent_run_key(agent_id, name, span_id), name)
        owned = self._owned
        owned[span_id] = agent
        if len(owned) > self._max_live_spans:
            self._evict_oldest(owned)
        return agent

    def _deliver(self, reminder: Reminder | None) -> None:
        if reminder is None or self._on_reminder is None:
            return
        try:
            self._on_reminder(reminder)
        except Exception:
            logger.exception("on_reminder callback raised for agent %r; the guard carries on", reminder.agent_id)

    # -- live-span bookkeeping ---------------------------------------------------------

    @staticmethod
    def _evict_oldest(mapping: dict[int, Any]) -> None:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):  # lost a race: the next call evicts
            del mapping[next(iter(mapping))]
