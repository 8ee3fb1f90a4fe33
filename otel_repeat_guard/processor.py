"""The span processor: thin glue that reads spans, asks the chain logic, records the answer.

The path of one span: ``on_start`` tracks it (``runs``) and, for a model call, marks the run
and counts the calls its previous step requested that no tool span answered; ``_on_ending``
reads a tool span through the conventions (extract), resolves its run and asks the chain
(decide), and puts the answer on the span, the metrics and the harness's callback (record).
The common GenAI tool span takes the same three steps in one method (``_plain_tool_call``);
a property test holds it to the general path's answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xxhash
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor
from opentelemetry.trace import SpanContext, StatusCode

from otel_repeat_guard.baggage import run_in
from otel_repeat_guard.blind_spots import NO_AGENT, NO_ARGUMENTS, CallAudit, WarnOnce
from otel_repeat_guard.canonical import RAW_KEY_MIN_CHARS, arguments_key, canonical_or_none, raw_key
from otel_repeat_guard.chains import ChainTracker
from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.conventions import (
    DEFAULT_CONVENTIONS,
    MISSING,
    Convention,
    EventLike,
    RawToolCall,
    SpanRouter,
    failed,
)
from otel_repeat_guard.conventions.genai import (
    AGENT_ID,
    AGENT_NAME,
    EXECUTE_TOOL,
    OPERATION,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    GenAIConvention,
)
from otel_repeat_guard.conventions.outcomes import outcome_of
from otel_repeat_guard.conventions.usage import token_usage
from otel_repeat_guard.detectors import Call, CycleDetector, Detector, NoProgressDetector
from otel_repeat_guard.metrics import GuardMetrics
from otel_repeat_guard.patterns import ToolFilter
from otel_repeat_guard.recorder import (
    PARALLEL_DUPLICATE_EVENT,
    REDACTION_FAILED,
    REMINDER_EVENT,
    REPEAT_EVENT,
    UNGUARDED_EVENT,
    Decision,
    Recorder,
)
from otel_repeat_guard.redis_store import RedisChainStore
from otel_repeat_guard.reminders import Reminder
from otel_repeat_guard.requested import PendingSteps, Step, drop_oldest, may_request
from otel_repeat_guard.runs import BAGGAGE, Run, RunResolver, evict_oldest
from otel_repeat_guard.span_events import EventSpec, append_to_ending_span, copy_with_events, ending_of, start_of

logger = logging.getLogger("otel_repeat_guard")

ReminderCallback = Callable[[Reminder], None]
__all__ = [
    "REDACTION_FAILED",
    "REMINDER_EVENT",
    "REPEAT_EVENT",
    "UNGUARDED_EVENT",
    "Decision",
    "ReminderCallback",
    "RepeatGuardSpanProcessor",
]
_GENERAL: Any = object()
"""What the plain-span reading answers for a span it leaves to the conventions."""
UNKNOWN_TOOL = "(unknown)"
"""The tool name of a call the model asked for when its request's content was not recorded."""


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
    with the events added. ``redact`` rewrites the canonical arguments text before a
    reminder quotes it (in its text, its preview and the reminder span event); detection
    always compares the real arguments.
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
        audit: Callable[[CallAudit], None] | None = None,
    ) -> None:
        config = GuardConfig() if config is None else config
        if not isinstance(config, GuardConfig):
            raise ValueError(f"config must be a GuardConfig, got {config!r}")
        if on_reminder is not None and not callable(on_reminder):
            raise ValueError(f"on_reminder must be callable or None, got {on_reminder!r}")
        if redact is not None and not callable(redact):
            raise ValueError(f"redact must be callable or None, got {redact!r}")
        self._audit = audit  # how each recognised call was seen, for `otel-repeat-guard doctor`
        self._wrapped_events: dict[int, list[EventSpec]] = {}  # wrapping mode: events for spans still open
        self._config = config
        self._on_reminder = on_reminder
        self._conventions = tuple(conventions)
        self._router = SpanRouter(self._conventions)
        self._route = self._router.route
        self._model_bits = self._router.model_bits
        self._tool_bits = self._router.tool_bits
        self._tool_readers = tuple(self._router.tool_reader(mask) for mask in range(self._tool_bits + 1))
        self._downstream = tuple(downstream)
        self._wrapping = bool(self._downstream)
        self._limits = SpanLimits()
        self._tracked = ToolFilter(config.include, config.exclude)
        self._metrics = GuardMetrics(meter_provider)
        self._recorder = Recorder(config, self._metrics, redact)
        max_agents = _positive_int("max_agents", max_agents)
        detectors = _detectors(config)
        self._detecting = detectors is not None
        self._detecting_outcomes = bool(config.no_progress_thresholds)
        self._collapse_parallel = config.collapse_parallel
        self._chains: ChainTracker
        if config.shared_store:  # the same class's interface, its state in Redis (this process's: the fallback)
            self._chains = RedisChainStore.from_config(
                config,
                max_agents,
                self._metrics.run_ended,
                detectors=detectors,
                on_reminder_outcome=self._metrics.reminder_outcome,
                meter_provider=meter_provider,
            )
        else:
            self._chains = ChainTracker(
                max_agents,
                self._metrics.run_ended,
                detectors=detectors,
                on_reminder_outcome=self._metrics.reminder_outcome,
            )
        self._runs = RunResolver(
            self._conventions,
            _positive_int("max_live_spans", max_live_spans),
            self._run_ended,
            is_model_call=lambda name, attributes: bool(self._route(name, attributes) & self._model_bits),
        )
        self._steps = PendingSteps(max_agents)
        self._model_runs: dict[int, Run] = {}  # open model-call span id -> its run
        self._warn = WarnOnce(logger)
        self._follow_remote = config.follows_remote_runs  # a span under a remote parent: the baggage's run
        # A GenAI tool span is read in place (see _plain_tool_call) when GenAI is the first convention asked
        # about it (it carries no mark of one before) and nothing opt-in needs more of it than the repeat chain.
        before = self._router.marks_before(GenAIConvention)
        self._plain_genai = before is not None and not (self._detecting or self._collapse_parallel or audit is not None)
        self._names_before_genai, self._marks_before_genai = before or (frozenset(), ())

    @property
    def config(self) -> GuardConfig:
        return self._config

    # -- harness API ---------------------------------------------------------------

    def reset(self, agent_id: str) -> None:
        """A user prompt was submitted: start the agent's chain afresh.

        ``agent_id`` is a chain key (``Reminder.agent_id``), or a ``gen_ai.agent.id``: then the
        chains of every open run of that agent start afresh too.
        """
        try:
            for key in (agent_id, *self._runs.runs_of_agent(agent_id)):
                self._chains.reset(key)
        except Exception:
            logger.exception("repeat guard failed in reset(%r)", agent_id)

    def forget(self, agent_id: str) -> None:
        """The agent is disposed: drop its state (a chain key, or a ``gen_ai.agent.id`` and its open runs)."""
        try:
            for key in (agent_id, *self._runs.runs_of_agent(agent_id)):
                self._chains.forget(key)
                self._steps.forget(key)
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
        this process. (A tool span's own explicit ``gen_ai.agent.id`` cannot be seen from
        here: such harnesses know their id.)
        """
        try:
            run = self._runs.resolve(trace.get_current_span(context).get_span_context())
        except Exception:
            logger.exception("repeat guard failed to resolve the current agent run")
            return None
        return None if run is None else run.key

    def model_call_due(self, context: Context | None = None) -> str | None:
        """A model request is about to go out from the current span (of ``context``).

        Counts now what the run's last model call requested that no tool span answered (runtimes
        that run tools without spans), so those calls' reminders are in the inbox before this
        request, with their events on the current span; then returns the run's chain key, as
        :meth:`current_agent_id` does. Adapters call this before they drain the inbox.
        """
        try:
            current = trace.get_current_span(context)
            run = self._runs.resolve(current.get_span_context())  # as for a tool span started here
            if run is None:
                return None
            events, reminders = self._count_unanswered(run) if self._steps.steps else ([], [])
            if events and current.is_recording():
                for name, attributes in events:
                    current.add_event(name, attributes)
            self._deliver(reminders)
        except Exception:
            logger.exception("repeat guard failed to prepare the next model call")
            return None
        return run.key

    # -- SpanProcessor -------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            span_id, name, attributes = start_of(span)
            if self._follow_remote:
                self._remote_start(span, parent_context, attributes)
            runs = self._runs  # the live-span bookkeeping of runs.py, written here without a call (every span)
            live = runs.live
            live[span_id] = span
            if len(live) > runs.max_live_spans:
                evict_oldest(live)
            if attributes:  # most instrumentations set none at start
                agent_id = runs.agent_id_at_start(name, attributes)
                if agent_id is not None:
                    self._chains.reset(agent_id)  # each agent run is a new prompt for a harness keyed by that id
                if self._route(name, attributes) & self._model_bits:
                    self._model_call_starts(span)
        except Exception:
            logger.exception("repeat guard failed in on_start; the span is unaffected")
        for processor in self._downstream:
            processor.on_start(span, parent_context=parent_context)

    def _remote_start(self, span: Span, parent_context: Context | None, attributes: Mapping[str, Any]) -> None:
        """A span whose parent is in another process belongs to the run its baggage names, if any."""
        parent = span.parent
        if parent is not None and parent.is_remote:
            run_key = run_in(parent_context)
            if run_key is not None:
                self._runs.remote_child(span, parent, run_key, attributes)

    def _on_ending(self, span: Span) -> None:
        if self._wrapping:  # the guard decides in on_end and hands on copies; the hook itself is passed on
            for processor in self._downstream:
                processor._on_ending(span)  # noqa: SLF001 - the SDK's end-of-span hook, as the provider calls it
            return
        try:
            decision = self._decide(span)
            if decision is not None:
                events, reminders = decision
                append_to_ending_span(span, events)
                self._deliver(reminders)
        except Exception:
            logger.exception("repeat guard failed at the end of span %r; the span is unaffected", span.name)

    def on_end(self, span: ReadableSpan) -> None:
        forwarded = span
        try:
            context = span.context
            if self._wrapping:
                decision = self._decide(span)
                earlier = self._wrapped_events.pop(context.span_id, None) if self._wrapped_events and context else None
                if decision is not None or earlier:
                    events, reminders = decision or ([], [])
                    forwarded = copy_with_events(span, (earlier or []) + events, self._limits)
                    self._deliver(reminders)
            if context is not None:  # stop tracking it; if it stood for a run, the run's chain ends
                runs, span_id = self._runs, context.span_id
                runs.live.pop(span_id, None)
                if span_id in runs.owned or span_id in runs.marked:
                    runs.ended(span_id)
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
        name, attributes, events, parent, ended = ending_of(span)
        if self._plain_genai and attributes.get(OPERATION) == EXECUTE_TOOL and name not in self._names_before_genai:
            decided = self._plain_tool_call(span, attributes, events, parent, ended)
            if decided is not _GENERAL:
                return decided  # type: ignore[no-any-return]
        mask = self._route(name, attributes)
        if not mask:  # nearly every span stops here
            return self._run_span_ends(span) if self._steps.steps else None
        reader = self._tool_readers[mask & self._tool_bits]
        call = None if reader is None else reader(name, attributes, events)
        if call is not None:
            return self._tool_call_ends(span, call, attributes, events)
        if mask & self._model_bits:
            return self._model_call_ends(span, mask, name, attributes, events, parent)
        return None

    def _plain_tool_call(
        self,
        span: ReadableSpan,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        parent: SpanContext | None,
        ended: int | None,
    ) -> Any:
        """The common tool span read in place, exactly as the conventions and _tool_call_ends would read it, in
        one call instead of eight: a GenAI tool span with its tool's name and short arguments text, no agent of
        its own, straight under the span of its run, nothing pending. Anything else answers _GENERAL."""
        tool = attributes.get(TOOL_NAME)
        arguments = attributes.get(TOOL_ARGUMENTS)
        steps, chains = self._steps, self._chains
        if (
            tool.__class__ is not str
            or not tool
            or arguments.__class__ is not str
            or len(arguments) >= RAW_KEY_MIN_CHARS
            or AGENT_ID in attributes
            or AGENT_NAME in attributes
            or steps.steps  # a model step to answer, or
            or steps.counted  # calls counted from requests (their call ids): the general path
            or chains.pending
        ):
            return _GENERAL
        for mark, marked in self._marks_before_genai:  # OpenLLMetry's traceloop.span.kind, by default
            if attributes.get(mark) == marked:
                return _GENERAL
        run = None if parent is None else self._runs.owned.get(parent.span_id)
        if run is None or not (self._tracked.answers.get(tool) or self._tracked[tool]):
            return _GENERAL
        ends = steps.tool_ends
        ends[run.key] = ended or 0
        if len(ends) > steps.max_runs:
            drop_oldest(ends)
        key = arguments_key(arguments)
        length = chains.observe(run.key, tool, key)
        if length < 2:
            return None
        return self._record(run, tool, arguments, key, length, None, None, span, attributes, events, False, None, None)

    def _tool_call_ends(
        self, span: ReadableSpan, call: RawToolCall, attributes: Mapping[str, Any], events: Sequence[EventLike]
    ) -> Decision | None:
        tool, arguments, agent_id, agent_name, error, call_id = call
        run = self._run_of(span, agent_id, agent_name)
        tracked = self._tracked[tool]
        if run is None:
            if tracked:  # the span stays as it is: the store sees a parentless call without an agent for itself
                self._unguarded(NO_AGENT, tool, span, "tool_span" if arguments is not MISSING else "none")
            return None
        if call_id is not None and self._steps.was_counted(run.key, call_id):
            return None  # counted from its request already, before this late tool span ended
        steps = self._steps  # this run's tools have spans: a model span that ends later is answered already
        ends = steps.tool_ends
        ends[run.key] = span.end_time or 0
        if len(ends) > steps.max_runs:
            drop_oldest(ends)
        step = self._answered_step(span, run) if steps.steps else None
        if not tracked:
            return None
        source = "tool_span"
        if arguments is MISSING:
            requested = None if step is None else step.by_id(call_id) if call_id else step.by_name(tool)
            if requested is not None:  # the arguments the model asked with
                arguments, source = requested.arguments, "model_request"
            if arguments is MISSING:
                decision = self._unguarded(NO_ARGUMENTS, tool, span, "none", run)
                counted = self._count(run, tool, MISSING, span, attributes, events, error)  # it still breaks runs
                if counted is not None:
                    _merge(decision, counted)
                return decision
        if self._audit is not None:
            self._audit(CallAudit(_scope(span), tool, source, run.how, None))
        counted = self._count(run, tool, arguments, span, attributes, events, error)
        if counted is not None and step is not None:
            self._wasted(step, tool, counted)
        return counted

    def _answered_step(self, span: ReadableSpan, run: Run) -> Step | None:
        """A tool span of ``run`` ended: the run's last model step is answered by tool spans (returned).
        A tool span keyed by its own agent id answers the step of the run its parent stands for, where
        that run's model calls keep their steps, when its own key has none."""
        step = self._steps.answered(run.key)
        if step is None and run.how == "agent_id":
            enclosing = self._run_of(span, None, None)
            if enclosing is not None:
                step = self._steps.answered(enclosing.key)
        return step

    def _run_of(self, span: ReadableSpan, agent_id: str | None, agent_name: str | None) -> Run | None:
        """The tool span's run: its explicit agent id, else (nearly always) the span straight above it
        that stands for a run (one lookup), else what the resolver finds among its ancestors."""
        if agent_id:
            return Run(agent_id, agent_name or agent_id, how="agent_id")
        parent = span.parent
        run = self._runs.owned.get(parent.span_id) if parent is not None else None
        return run if run is not None else self._runs.resolve(parent)

    def _count(
        self,
        run: Run,
        tool: str,
        arguments: Any,
        span: ReadableSpan | None,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        error: bool,
        call_id: str | None = None,
        context: SpanContext | None = None,
    ) -> Decision | None:
        """Decide: count one tracked call in its run (every detector), and word what it extends.

        ``span`` is the call's own tool span, None for a call with no tool span (its events go on
        the span ``context`` names the requesting model span of).
        """
        chains = self._chains
        raw = None  # unknown or not JSON-like arguments have no key: never identical to others
        if type(arguments) is str and len(arguments) >= RAW_KEY_MIN_CHARS:
            raw = raw_key(arguments)  # a long text received unchanged need not be canonicalized again
            key = chains.key_if_same_raw(run.key, raw) or arguments_key(arguments)
        else:
            key = None if arguments is MISSING else arguments_key(arguments)
        call = outcome = None
        if self._collapse_parallel or chains.pending or self._detecting:
            call, outcome = self._opt_in(run, tool, key, span, attributes, events, error)
            if call is None and key is not None:  # the extra copy of a call made twice in one step: one call for all
                return [self._recorder.parallel_duplicate(tool, key)], []
        length = chains.observe(run.key, tool, key, raw)
        if length < 2 and call is None:
            return None  # nearly every call: no repeat, no detector to ask
        return self._record(
            run, tool, arguments, key, length, call, outcome, span, attributes, events, error, call_id, context
        )

    def _record(
        self,
        run: Run,
        tool: str,
        arguments: Any,
        key: bytes | None,
        length: int,
        call: Call | None,
        outcome: Any,
        span: ReadableSpan | None,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        error: bool,
        call_id: str | None,
        context: SpanContext | None,
    ) -> Decision | None:
        """Word a counted call that repeats (``length`` >= 2) or that a detector may speak for (``call``)."""
        chains = self._chains
        if span is not None:
            context = span.context
        decision: Decision = ([], [])
        if length >= 2 and key is not None:
            if span is not None and not error:
                error = span.status.status_code is StatusCode.ERROR or failed(attributes, events)
            took = span.end_time - span.start_time if span is not None and span.end_time and span.start_time else 0
            repeat = self._recorder.repeat(run, tool, arguments, key, length, error, context, call_id, took)
            _merge(decision, repeat)
        if call is not None and self._detecting:
            for found in chains.detect(run.key, call):
                _merge(decision, self._recorder.detection(run, tool, arguments, found, outcome, context, call_id))
        for reminder in decision[1]:
            chains.reminded(run.key, reminder.kind, reminder.tier, reminder.period)
        return decision if decision[0] else None

    def _opt_in(
        self,
        run: Run,
        tool: str,
        key: bytes | None,
        span: ReadableSpan | None,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        error: bool,
    ) -> tuple[Call | None, Any]:
        """What the opt-in work needs before the call is counted: the call as detectors see it (None for
        a parallel duplicate, which is not counted), its outcome, and the outcome of reminders waiting for it."""
        chains = self._chains
        outcome = outcome_key = None
        if self._detecting_outcomes and span is not None:
            outcome, outcome_key = _outcome(span, attributes, events, error)
        call = Call(tool, key, outcome_key)
        if self._collapse_parallel and span is not None and key is not None:
            parent = span.parent.span_id if span.parent is not None else None
            if chains.parallel_duplicate(run.key, call, parent, span.start_time or 0, span.end_time or 0):
                return None, outcome
        if chains.pending:
            chains.settle(run.key, tool, key, call)  # what the run's last reminders led to: the metric
        return call, outcome

    # -- model calls, and the calls they requested -------------------------------------

    def _model_call_starts(self, span: Span) -> None:
        """Mark the run's enclosing spans; the calls the run's last step requested without a
        tool span are counted now, before the model is asked again, with their events on this span."""
        run, events, reminders = self._next_model_call(span.parent)
        if run is None:
            return
        model_runs = self._model_runs
        model_runs[span.context.span_id] = run
        if len(model_runs) > self._runs.max_live_spans:
            evict_oldest(model_runs)
        if events and self._wrapping:
            self._wrapped_events[span.context.span_id] = events  # added to the copy handed on at its end
        else:
            for name, attributes in events:
                span.add_event(name, attributes)  # the span is open: the public API works
        self._deliver(reminders)

    def _next_model_call(self, parent: SpanContext | None) -> tuple[Run | None, list[EventSpec], list[Reminder]]:
        """A model call starts under ``parent``: mark the run's enclosing spans, and count the calls its
        last step requested that no tool span answered."""
        self._runs.mark_model_call(parent)
        run = self._runs.resolve(parent)
        if run is None or not self._steps.steps:
            return run, [], []
        return run, *self._count_unanswered(run)

    def _model_call_ends(
        self,
        span: ReadableSpan,
        mask: int,
        name: str,
        attributes: Any,
        events: Sequence[Any],
        parent: SpanContext | None,
    ) -> Decision | None:
        """Keep what the model requested, unread, as its run's last step.

        A model call nested in this one (the client's span under a framework's) already left
        its step, with the content: that step stays. A span marked as a model call only after it
        started (Haystack's synchronous components, Semantic Kernel's ``chat``) is handled as
        starting now: the run's unanswered calls are counted, their events on it.
        """
        run = context = None
        if self._model_runs:  # empty where model spans get their attributes late: no lookup, no context read
            context = span.context
            run = None if context is None else self._model_runs.pop(context.span_id, None)
        late = run is None
        if late and parent is not None and parent.span_id not in self._runs.marked:  # marked once per run span
            self._runs.mark_model_call(parent)  # its enclosing spans, for runs without agent spans
        keep = may_request(attributes, events)
        if not keep and not (late and self._steps.steps):
            return None  # a text answer, nothing pending: nothing to keep, nothing to count
        context = context or span.context
        if context is None:
            return None
        if run is None:
            run = self._runs.resolve(parent)
            if run is None:
                return None
        started = span.start_time or 0
        if self._steps.latest_end(run.key) >= started:
            return None  # the run's last step came from a model call inside this one
        decision: Decision | None = None
        if late and self._steps.steps:
            counted, reminders = self._count_unanswered(run)
            decision = (counted, reminders) if counted else None
        read = self._router.request_reader(mask) if keep else None
        if read is not None:
            self._steps.add(
                run.key, Step(read, name, attributes, events, context, _scope(span), span.end_time or 0), started
            )
        return decision

    def _run_span_ends(self, span: ReadableSpan) -> Decision | None:
        """A span that stood for a run ends: count what its last step requested without tool spans."""
        context = span.context
        run = None if context is None else self._runs.owner(context.span_id)
        if run is None or run.how in ("enclosing_span", BAGGAGE):  # an enclosing span may end before its tools run
            return None
        events, reminders = self._count_unanswered(run)
        return (events, reminders) if events else None

    def _count_unanswered(self, run: Run) -> Decision:
        events: list[EventSpec] = []
        reminders: list[Reminder] = []
        step, calls = self._steps.unanswered(run.key)
        if step is None:
            return events, reminders
        if not calls and step.asked_for_tools():  # content capture off: the model asked, but for what is unknown
            self._unguarded(NO_ARGUMENTS, UNKNOWN_TOOL, None, "none", run, step.scope)
        for call in calls:
            if not self._tracked[call.tool_name]:
                continue
            if call.arguments is MISSING:
                more, _ = self._unguarded(NO_ARGUMENTS, call.tool_name, None, "none", run, step.scope)
                events += more
            elif self._audit is not None:
                self._audit(CallAudit(step.scope, call.tool_name, "model_request_only", run.how, None))
            counted = self._count(
                run, call.tool_name, call.arguments, None, {}, (), False, call.call_id, step.span_context
            )
            if counted is not None:
                self._wasted(step, call.tool_name, counted)
                events += counted[0]
                reminders += counted[1]
        return events, reminders

    def _wasted(self, step: Step, tool: str, counted: Decision) -> None:
        """A call that repeats or extends a loop: the tokens of the model call that asked for it are wasted,
        each model call's once. (Not for a parallel duplicate: the same model call asked for the original.)"""
        if not step.wasted and counted[0][0][0] != PARALLEL_DUPLICATE_EVENT:
            step.wasted = True
            self._metrics.wasted_tokens(tool, *token_usage(step.attributes))

    def _run_ended(self, run: Run) -> None:
        self._chains.forget(run.key)
        self._steps.forget(run.key)

    # -- reporting -----------------------------------------------------------------------

    def _unguarded(
        self,
        reason: str,
        tool: str,
        span: ReadableSpan | None,
        source: str,
        run: Run | None = None,
        scope: str | None = None,
    ) -> Decision:
        """A recognised tool call the guard cannot compare: count it, say why on its span, and say once per
        scope what fixes it."""
        self._metrics.unguarded(reason, tool)
        scope = _scope(span) if scope is None else scope
        if self._audit is not None:
            self._audit(CallAudit(scope, tool, source, "none" if run is None else run.how, reason))
        self._warn(reason, scope, tool)
        return [(UNGUARDED_EVENT, {"repeat_tool_guard.reason": reason, "gen_ai.tool.name": tool})], []

    def _deliver(self, reminders: list[Reminder]) -> None:
        if self._on_reminder is None:
            return
        for reminder in reminders:
            try:
                self._on_reminder(reminder)
            except Exception:
                logger.exception("on_reminder callback raised for agent %r; the guard carries on", reminder.agent_id)


def _scope(span: ReadableSpan | None) -> str:
    scope = None if span is None else span.instrumentation_scope
    return "" if scope is None else scope.name


def _merge(into: Decision, more: Decision) -> None:
    into[0].extend(more[0])
    into[1].extend(more[1])


def _detectors(config: GuardConfig) -> Callable[[], tuple[Detector, ...]] | None:
    """What makes a run's opt-in detectors, or None when none is configured."""
    cycle, no_progress = config.cycle_thresholds, config.no_progress_thresholds
    if not cycle and not no_progress:
        return None
    period = config.max_cycle_period

    def make() -> tuple[Detector, ...]:
        made: list[Detector] = []
        if cycle:
            made.append(CycleDetector(cycle, period))
        if no_progress:
            made.append(NoProgressDetector(no_progress))
        return tuple(made)

    return make


def _outcome(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[EventLike], error: bool
) -> tuple[Any, bytes | None]:
    """The call's outcome (the error, else the result) and its key; (MISSING, None) when none was recorded."""
    status = span.status
    failed_ = error or status.status_code is StatusCode.ERROR or failed(attributes, events)
    value, is_error = outcome_of(attributes, events, failed_, status.description)
    if value is MISSING:
        return value, None
    canonical = canonical_or_none(value)
    if canonical is None:
        return value, None
    return value, xxhash.xxh3_128_digest((b"E" if is_error else b"R") + canonical)  # an error never equals a result
