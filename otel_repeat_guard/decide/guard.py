"""The guard's decisions: one entry per span kind, each returning a :class:`Decision`.

The processor (:mod:`otel_repeat_guard.processor`) holds the SDK's hooks and hands every span
here. A span that ends is read once (:meth:`Guard.ended`): a tool span becomes a call of its run
(:meth:`Guard.tool_call`); a model span the run's last step, and a span that stood for a run counts what its
last step requested without tool spans (both on the model-call side, :mod:`otel_repeat_guard.decide.model_calls`). Each decision carries the **facts** every other part shows (the run,
the model call that issued a call, whether it charged that call's tokens as wasted) as span
attributes (see :mod:`otel_repeat_guard.decide.recorder`), so the store, the metrics and ``doctor`` use the
guard's answer and never derive it again.

There is one tool path: the router picks a span's reader once per shape (its vocabulary's marks), and
:meth:`Guard.tool_call` decides. Once it has the call's run, it takes the plain case (nothing pending, nothing
opt-in), which counts the call without the general body's questions about model steps; ``fast_path=False`` on
the processor sends every call through the general body, and a property test holds the two equal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import SpanContext, format_span_id

from otel_repeat_guard.conventions import MISSING, Convention, EventLike, RawToolCall, SpanRouter
from otel_repeat_guard.conventions.base import call_failed
from otel_repeat_guard.core.canonical import RAW_KEY_MIN_CHARS, arguments_key, raw_key
from otel_repeat_guard.core.chains import ChainStore
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Call, detectors_for
from otel_repeat_guard.core.facts import ISSUER, UNGUARDED
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.policy import with_result
from otel_repeat_guard.decide.awaited import AwaitedOutcomes
from otel_repeat_guard.decide.blind_spots import NO_AGENT, NO_ARGUMENTS, CallAudit, WarnOnce
from otel_repeat_guard.decide.decision import CountedCall, Decision
from otel_repeat_guard.decide.delivery import Deliveries
from otel_repeat_guard.decide.late_results import LateResults
from otel_repeat_guard.decide.metrics import GuardMetrics
from otel_repeat_guard.decide.model_calls import ModelCalls, Parts
from otel_repeat_guard.decide.opt_in import opt_in
from otel_repeat_guard.decide.progress import Results
from otel_repeat_guard.decide.questions import RunQuestions
from otel_repeat_guard.decide.quoting import quoted
from otel_repeat_guard.decide.recorder import Recorder
from otel_repeat_guard.decide.reporting import BlindSpots
from otel_repeat_guard.decide.shown import ShownReminders
from otel_repeat_guard.inputs import checked_guard_options
from otel_repeat_guard.spans import span_events as times  # the span's times, whole nanoseconds (start_ns, end_ns)
from otel_repeat_guard.spans.agents import AgentChains
from otel_repeat_guard.spans.nesting import nested_facts
from otel_repeat_guard.spans.requested import PendingSteps, Step
from otel_repeat_guard.spans.run import Run
from otel_repeat_guard.spans.runs import RunResolver
from otel_repeat_guard.spans.span_events import SPAN_ID, Attributes, marks_of, rest_of, timing_of
from otel_repeat_guard.state.stores import chain_store

logger = logging.getLogger("otel_repeat_guard")


class GuardOptions(NamedTuple):
    """The processor's options for its guard, as the application gave them (the guard checks them: a ValueError
    names the one that is wrong)."""

    meter_provider: MeterProvider | None
    max_agents: Any  # any value: the guard checks it (``object`` fails a compiled NamedTuple's annotations)
    max_live_spans: Any
    conventions: Sequence[Convention]
    redact: Callable[[str], str] | None
    audit: Callable[[CallAudit], None] | None
    fast_path: bool = True
    record_facts: bool = True


class Guard:
    """Decides, once per span, what it means: its run, the call, its issuer, what it wasted, and what to say."""

    def __init__(self, config: GuardConfig, options: GuardOptions) -> None:
        meter_provider, _, _, conventions, redact, audit, fast_path, record_facts = options
        max_agents, max_live_spans = checked_guard_options(
            config, redact, audit, options.max_agents, options.max_live_spans
        )
        self.config = config
        self.facts = record_facts  # facts on spans, and an event per call counted from a request
        self._conventions = tuple(conventions)
        self._router = router = SpanRouter(self._conventions)
        self.model_bits = router.model_bits
        self._tool_bits = router.tool_bits
        self._call_bits = router.tool_bits | router.model_bits  # what an ending span is read for
        self._tool_readers = router.tool_readers()
        self.tracked = ToolFilter(config.include, config.exclude)
        self.metrics = GuardMetrics(meter_provider)
        self._recorder = Recorder(config, self.metrics, redact)
        detectors = detectors_for(config)
        self._detecting = detectors is not None
        self._collapse_parallel = config.collapse_parallel
        self.shown = ShownReminders(max_agents)  # reminder outcomes as evaluations, once given a sink (shown.py)
        outcomes = self.shown.wrap(self.metrics.reminder_outcome)
        self.chains: ChainStore = chain_store(
            config, max_agents, self.metrics.run_ended, outcomes, detectors, meter_provider
        )
        self.runs = RunResolver(
            self._conventions,
            max_live_spans,
            self._run_over,
            is_model_call=router.is_model_call,
            read_tool=router.open_tool_reader(),
        )
        self.steps = PendingSteps(max_agents, baggage_runs=config.follows_remote_runs)
        self._awaited = AwaitedOutcomes(router, self.chains, self._recorder, max_agents)
        self.agents = AgentChains(max_live_spans, self.runs)  # the runs an agent id's calls and questions reach
        self.blind = BlindSpots(self.metrics.unguarded, audit, WarnOnce(logger))
        results = Results.of(config)  # None unless some tool's calls compare results (progress: results)
        self._late = None if results is None else LateResults(results, router, self.chains, self.blind, max_agents)
        self.deliveries = Deliveries(meter_provider, logger, max_agents)  # reminders no adapter took
        parts = Parts(
            router,
            self.runs,
            self.steps,
            self._awaited,
            self.blind,
            self.metrics,
            self.tracked,
            self.facts,
            results,
            self._late,
        )
        self.models = ModelCalls(parts, self._count, self.deliveries)
        self.questions = RunQuestions(self.chains, self.shown, self.steps, self.agents, self.runs, self.models)
        self._plain = fast_path and not (self._detecting or self._collapse_parallel or audit is not None)
        """Whether a call may take the plain case of :meth:`tool_call`: nothing opt-in asks more of it."""

    def after_fork(self) -> None:
        """In a forked child (:mod:`otel_repeat_guard.forks`): every part starts afresh, the configuration stays."""
        parts = (
            self.runs,
            self.chains,
            self.steps,
            self.agents,
            self.metrics,
            self.blind.warn,
            self._awaited,
            self.models,
            self.shown,
            self.deliveries,
        )
        for part in parts:
            part.after_fork()

    # -- a span starts -------------------------------------------------------------------

    def started(self, span: Span, name: str, attributes: Attributes) -> Decision | None:
        """A span started with attributes: an agent run resets its agent's chain; a model call marks its run
        and counts what the run's last step requested without tool spans (its events go on this span)."""
        router = self._router
        mask = router.route(name, attributes)  # its model marks and agent-run marks, in one pass
        if router.may_name_agent_id(name, attributes, mask):
            agent_id = self.runs.agent_id_at_start(name, attributes)
            if agent_id is not None:  # each agent run is a new prompt for a harness keyed by that id
                self.chains.reset(agent_id)
                over = self.agents.started(agent_id)
                if over is not None:
                    self._over(over)
        return self.models.started(span, name, attributes) if mask & self.model_bits else None

    # -- a span ends ---------------------------------------------------------------------

    def ended(self, span: ReadableSpan) -> Decision | None:
        """Read an ending span once and decide what it is; None for nearly every span."""
        name, attributes = marks_of(span)
        mask = self._router.route(name, attributes) & self._call_bits  # not the agent-run mark
        if not mask:  # nearly every span stops here
            return self.models.run_ended(span) if self.steps.any_step() else None
        events, parent, ended = rest_of(span)
        reader = self._tool_readers[mask & self._tool_bits]
        call = None if reader is None else reader.read(name, attributes, events)
        if call is not None:
            return self.tool_call(span, call, attributes, events, parent, ended)
        if mask & self.model_bits:
            return self.models.ended(span, mask, name, attributes, events, parent)
        return None

    def tool_call(
        self,
        span: ReadableSpan,
        call: RawToolCall,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        parent: SpanContext | None,
        ended: int | None,
    ) -> Decision | None:
        """A tool span ended: count the call in its run, and say which model call issued it.

        Its run is found once, and a tool span of the same call above it counts it instead (counted once). Then the
        plain case, nearly every call: nothing opt-in, no model step pending, no reminder of the run waiting for
        this call, its arguments recorded. It is counted as the general body would count it, without the body's
        questions about model steps; ``fast_path=False`` sends every call through the body. ``parent`` and
        ``ended`` are the span's, as :func:`~otel_repeat_guard.spans.span_events.rest_of` read them."""
        tool, arguments, agent_id, agent_name, error, call_id = call
        run = self.agents.run_of(parent, agent_id, agent_name)
        tracked = self.tracked[tool]
        if run is None:
            return self._no_run(tool, span, arguments) if tracked else None
        outer = self.runs.same_call_above(parent, run, tool, arguments, call_id, attributes)
        if outer is not None or (call_id is not None and self.steps.was_counted(run.key, call_id)):
            # the enclosing tool span of the same call counts it, or it was counted from its request already
            return self._quiet(run.facts if outer is None else nested_facts(run.facts, outer))
        if tracked and self._plain and arguments is not MISSING and self._nothing_pending(run):
            return self._count_plain(run, call, span, attributes, events, ended)
        steps = self.steps  # this run's tools have spans: a model span that ends later is answered already
        steps.tool_ended(run, ended or 0)
        step = self._answered_step(span, run, call_id) if steps.any_step() or steps.any_open() else None
        facts = None
        if self.facts:
            facts = run.facts
            if step is not None:
                facts[ISSUER] = format_span_id(step.span_context[SPAN_ID])
        if not tracked:
            return self._quiet(facts)
        source = "tool_span"
        if arguments is MISSING:
            requested = None if step is None else step.by_id(call_id) if call_id else step.by_name(tool)
            if requested is None or requested.arguments is MISSING:
                decision = Decision([self.blind.unguarded(NO_ARGUMENTS, tool, span, "none", run.how)], [], facts)
                unknown = CountedCall(run, tool, MISSING, span, attributes, events, error=error)
                counted = self._count(unknown)  # it still breaks runs
                decision.merge(counted)
                return decision
            arguments, source = requested.arguments, "model_request"  # the arguments the model asked with
            call_id = call_id or requested.call_id
        quote = MISSING if step is None or source != "tool_span" else quoted(step, tool, call_id, arguments, facts)
        compared = CountedCall(run, tool, arguments, span, attributes, events, error=error, facts=facts, quote=quote)
        if self._late is None:
            result, blind = None, None
            self.blind.compared(span, tool, source, run.how)
        else:  # progress: results: its result, or the run's last one until the next request brings its own
            result, blind = self._late.result_of(compared, source, call_id, step is not None)
        counted = self._count(compared, awaits=call_id, result=result)
        if counted is not None and step is not None:
            self.models.charge(step, tool, counted, facts)
        if blind is not None:  # counted by its arguments alone, as without progress: a blind spot, said on its span
            counted = counted or Decision([], [], facts)
            counted.events.append(blind)
        return self._quiet(facts) if counted is None else counted

    def _nothing_pending(self, run: Run) -> bool:
        """Whether a call of ``run`` may take the plain case: no model step to answer, no call counted from a
        request, no step open, and no reminder of the run waiting for this call's outcome."""
        return self.steps.idle() and not (self.chains.pending and self.chains.waiting(run.key))

    def _count_plain(
        self,
        run: Run,
        call: RawToolCall,
        span: ReadableSpan,
        attributes: Mapping[str, Any],
        events: Sequence[EventLike],
        ended: int | None,
    ) -> Decision | None:
        """Count a plain call in its run, as :meth:`_count` would with nothing opt-in and nothing pending; its
        :class:`CountedCall` is made only for a repeat (or under ``progress: results``), not for every call."""
        self.steps.tool_ended(run, ended or 0)
        tool, arguments, error = call[0], call[1], call[4]
        key, raw = self._key_of(run, arguments)
        if self._late is not None:
            counted = CountedCall(run, tool, arguments, span, attributes, events, key=key, error=error)
            return self._count_plain_results(self._late, counted, raw)
        length = self.chains.observe(run.key, tool, key, raw)
        if length < 2:  # nearly every call: its run's facts alone, the run's shared dict
            return self._quiet(run.kept_facts)
        facts = run.facts if self.facts else None  # its own: a reminder's variant may join them
        return self.repeated(
            CountedCall(run, tool, arguments, span, attributes, events, key=key, error=error, facts=facts), length
        )

    def _count_plain_results(self, late: LateResults, call: CountedCall, raw: bytes | None) -> Decision | None:
        """:meth:`_count_plain` under ``progress: results``: the chain key takes the result's digest, and a call
        whose result is not recorded is a ``no_result`` blind spot, as in the general body."""
        run = call.run
        result, blind = late.result_of(call, "tool_span", None, False)
        chained = call.key
        if result is not None and chained is not None:
            chained, raw = with_result(chained, result), None
        length = self.chains.observe(run.key, call.tool, chained, raw)
        call.facts = run.facts if self.facts else None
        decision = self.repeated(call, length) if length >= 2 else None
        if blind is None:
            return self._quiet(call.facts) if decision is None else decision
        decision = decision or Decision([], [], call.facts)
        decision.events.append(blind)
        return decision

    def _no_run(self, tool: str, span: ReadableSpan, arguments: Any) -> Decision | None:
        """A tracked call with no run to count it in (its parent in another process, a replay's trace without its
        root, or none): counted as not compared, and said on its span as a fact, never an event (the chain
        semantics keep such a span's events as they were)."""
        self.blind.unguarded(NO_AGENT, tool, span, "tool_span" if arguments is not MISSING else "none", "none")
        return Decision([], [], {UNGUARDED: NO_AGENT}) if self.facts else None

    def _answered_step(self, span: ReadableSpan, run: Run, call_id: str | None) -> Step | None:
        """A tool span of ``run`` ended: the run's last model step is answered by tool spans (returned). A tool
        span keyed by its own agent id answers the step of the run its parent stands for, where that run's
        model calls keep their steps, when its own key has none. A step still open (``issues_while_open``)
        that started before it issued it, unless the last step asked for its call id."""
        step = self.steps.answered(run.key)
        if self.steps.any_open() and (step is None or call_id is None or step.by_id(call_id) is None):
            step = self.steps.open_issuer(run.key, times.start_ns(span)) or step
        if step is None and run.how == "agent_id":
            enclosing = self.agents.run_of(span.parent, None, None)
            if enclosing is not None:
                step = self.steps.answered(enclosing.key)
        return step

    def _count(self, call: CountedCall, awaits: str | None = None, result: bytes | None = None) -> Decision | None:
        """Count one tracked call in its run (every detector), and word what it extends; None when it extends
        nothing. ``awaits`` (else the call's ``call_id``) is the id under which the run's next model request
        carries the call's outcome back, if no span records it. ``result``: under ``progress: results``, the
        digest of the call's result, which its chain key takes."""
        chains, run = self.chains, call.run
        call.key, raw = self._key_of(run, call.arguments)
        chained = call.key
        if result is not None and chained is not None:  # progress: results: the same result too
            chained, raw = with_result(chained, result), None  # the raw key keys arguments alone
        detected = outcome = None
        if self._collapse_parallel or chains.pending or self._detecting:
            self.shown.settling(run.key)
            detected, outcome = opt_in(chains, self.config, call, awaits or call.call_id, chained)
            self.shown.settling(None)
            if detected is None and call.key is not None:  # the extra copy of a call made twice in one step
                return Decision([self._recorder.parallel_duplicate(call.tool, call.key)], [], call.facts)
            if detected is not None and detected.awaits is not None:
                self._awaited.waits(run.key)
        length = chains.observe(run.key, call.tool, chained, raw)
        if length < 2 and detected is None:
            return None  # nearly every call: no repeat, no detector to ask
        return self.repeated(call, length, detected, outcome)

    def _key_of(self, run: Run, arguments: Any) -> tuple[bytes | None, bytes | None]:
        """The call's arguments key, and the raw key of a long text (received unchanged, it need not be
        canonicalized again); unknown or not JSON-like arguments have no key: never identical to others."""
        if type(arguments) is str and len(arguments) >= RAW_KEY_MIN_CHARS:
            raw = raw_key(arguments)
            return self.chains.key_if_same_raw(run.key, raw) or arguments_key(arguments), raw
        return (None if arguments is MISSING else arguments_key(arguments)), None

    def repeated(
        self, call: CountedCall, length: int, detected: Call | None = None, outcome: Any = None
    ) -> Decision | None:
        """Word a counted call that repeats (``length`` >= 2) or that a detector may speak for (``detected``: the
        call as detectors see it, with its ``outcome``)."""
        took, status, span = 0, None, call.span
        if span is not None:
            start, end, status, call.context = timing_of(span)
            took = end - start if end and start else 0
        decision = None
        key = call.key
        if length >= 2 and key is not None:
            call.error = call_failed(call.error, status, call.attributes, call.events)
            decision = self._recorder.repeat(call, key, length, took)
        if detected is not None and self._detecting:
            for found in self.chains.detect(call.run.key, detected):
                if decision is None:
                    decision = Decision([], [], call.facts)
                decision.merge(self._recorder.detection(call, found, outcome))
        if decision is None or not decision.events:
            return None
        for reminder in decision.reminders:
            self.chains.reminded(call.run.key, reminder.kind, reminder.tier, reminder.period)
            self.shown.shown(call.run.key, reminder.kind, reminder.tier, call.context)
        return decision

    # -- model calls, and the calls they requested -------------------------------------

    def _quiet(self, facts: dict[str, Any] | None) -> Decision | None:
        """A call that extends nothing: only its facts, when they are recorded."""
        return Decision([], [], facts) if self.facts else None

    def _run_over(self, run: Run) -> None:
        over = self.agents.ended(run)
        if over is not None:
            self._over(over)

    def _over(self, key: str) -> None:
        self.shown.settling(key)
        if self.deliveries.runs:
            self.deliveries.run_ended(key, "")  # counted and said; no span left to carry its event
        self.chains.forget(key)
        self.shown.settling(None)
        self.steps.forget(key)
        self._awaited.forget(key)
        if self._late is not None:
            self._late.forget(key)
