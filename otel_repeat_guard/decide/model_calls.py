"""The model-call side of the guard's decisions: the run of each open model call, each run's last step (what the
model asked for), the calls counted from those requests when no tool span answers them, and the tokens a wasted
call cost the model call that issued it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import SpanContext, format_span_id

from otel_repeat_guard.conventions import MISSING, SpanRouter
from otel_repeat_guard.conventions.openinference import langgraph_node
from otel_repeat_guard.conventions.usage import usage_of
from otel_repeat_guard.core.facts import ISSUER
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.rules import put_bounded
from otel_repeat_guard.decide.awaited import AwaitedOutcomes
from otel_repeat_guard.decide.blind_spots import NO_ARGUMENTS, NO_RESULT
from otel_repeat_guard.decide.decision import CountedCall, Decision
from otel_repeat_guard.decide.delivery import Deliveries
from otel_repeat_guard.decide.late_results import LateResults
from otel_repeat_guard.decide.metrics import GuardMetrics
from otel_repeat_guard.decide.progress import Results
from otel_repeat_guard.decide.recorder import PARALLEL_DUPLICATE_EVENT, call_event
from otel_repeat_guard.decide.reporting import BlindSpots
from otel_repeat_guard.spans import span_events as times
from otel_repeat_guard.spans.agents import model_facts
from otel_repeat_guard.spans.requested import PendingSteps, Step, may_request
from otel_repeat_guard.spans.run import BAGGAGE, Run
from otel_repeat_guard.spans.runs import RunResolver
from otel_repeat_guard.spans.span_events import SPAN_ID, Attributes, context_of, scope_of

UNKNOWN_TOOL: Final = "(unknown)"
"""The tool name of a call the model asked for when its request's content was not recorded."""


class Parts(NamedTuple):
    """What the model-call side shares with the guard: each part owns its state, this side asks it."""

    router: SpanRouter
    runs: RunResolver
    steps: PendingSteps
    awaited: AwaitedOutcomes
    blind: BlindSpots
    metrics: GuardMetrics
    tracked: ToolFilter
    facts: bool
    results: Results | None = None
    """Under ``progress: results``: the tools whose calls compare results (a call from a request shows none)."""
    late: LateResults | None = None
    """Under ``progress: results``: the calls whose results come with their run's next request."""


class ModelCalls:
    """Model spans as they start and end, and the runs' calls counted from their requests. ``count`` counts one
    call in its run (the guard's ``_count``), so a call from a request is counted as one from a tool span."""

    __slots__ = (
        "_awaited",
        "_blind",
        "_count",
        "_deliveries",
        "_facts",
        "_issues_while_open",
        "_late",
        "_metrics",
        "_open",
        "_results",
        "_router",
        "_runs",
        "_steps",
        "_tracked",
    )

    def __init__(
        self, parts: Parts, count: Callable[[CountedCall], Decision | None], deliveries: Deliveries | None = None
    ) -> None:
        self._router, self._runs, self._steps, self._awaited = parts.router, parts.runs, parts.steps, parts.awaited
        self._blind, self._metrics, self._tracked, self._facts = parts.blind, parts.metrics, parts.tracked, parts.facts
        self._count = count
        self._results, self._late = parts.results, parts.late
        self._deliveries = deliveries  # the reminders handed on, until taken (decide/delivery.py)
        self._issues_while_open = parts.router.issues_while_open  # model calls whose tool spans may end in them
        self._open: dict[int, Run] = {}  # open model-call span id -> its run

    def after_fork(self) -> None:
        """In a forked child: no model call open (they were the parent's)."""
        self._open.clear()
        if self._late is not None:
            self._late.after_fork()

    def started(self, span: Span, name: str, attributes: Attributes) -> Decision | None:
        """A model call started: it marks its run, and counts what the run's last step requested without tool
        spans (its events go on this span); one that issues tool calls while open waits for its end."""
        parent = span.parent
        self._runs.mark_model_call(parent)
        run = self._runs.resolve(parent, langgraph_node(attributes))
        if run is None:
            return None
        put_bounded(self._open, span.context[SPAN_ID], run, self._runs.max_live_spans)
        if name in self._issues_while_open:  # the issuer of the tool spans that end in it; the last step waits
            self._steps.opened(run.key, span.context, name, scope_of(span), times.start_ns(span))
            return None  # for its end: a coarse clock can start it before the last step's tool span ends
        return self.count_unanswered(run) if self._steps.any_step() else None

    def ended(
        self,
        span: ReadableSpan,
        mask: int,
        name: str,
        attributes: Attributes,
        events: Sequence[Any],
        parent: SpanContext | None,
    ) -> Decision | None:
        """A model span ended: its run (a fact on the span), and what it requested, kept unread as the run's
        last step.

        A model call nested in this one (the client's span under a framework's) already left its step,
        with the content: that step stays, and this span is marked its wrapper (``WRAPPER``). A span marked
        as a model call only after it started (Haystack's synchronous components, Semantic Kernel's ``chat``)
        is handled as starting now: the run's unanswered calls are counted, their events on it. So is a step
        declared ``issues_while_open``, which issued the tool spans that ended while it was open: what it
        wasted is counted now that its usage is known.
        """
        context = context_of(span)
        if context is None:
            return None
        span_id = context[SPAN_ID]
        started_run = self._open.pop(span_id, None) if self._open else None
        opened = self._steps.closed(span_id) if self._steps.any_open() else None
        if opened is not None and opened.wasted_tool is not None:  # charged while open: its usage is known now
            self._tokens_wasted(opened.wasted_tool, opened.scope, attributes)
        wraps = self._runs.wraps_model_call(span_id)  # taken out as it ends, facts or not
        late = started_run is None
        due = late or opened is not None  # the run's unanswered calls are counted now, not at its start
        if late:  # its enclosing spans, for runs without agent spans (at once when they were marked before)
            self._runs.mark_model_call(parent)
        keep = may_request(attributes, events)
        # a text answer, nothing pending
        results = self._late
        idle = not keep and not (due and self._steps.any_step()) and not self._awaited.any_run()
        idle = idle and (results is None or not results.any_run())
        deliveries = self._deliveries
        watched = deliveries is not None and bool(deliveries.runs)  # reminders handed on, not known taken
        if idle and not self._facts and not watched:
            return None  # not even its run to resolve: nothing records it
        run = started_run or self._runs.resolve(parent, langgraph_node(attributes))
        if run is None:
            return None
        started = times.start_ns(span) if watched or not idle else 0  # read only where it is asked for
        inside = opened is None and not idle and self._steps.latest_end(run.key) >= started  # from a call inside
        read = self._router.request_reader(mask) if keep and not inside else None  # this one's step, if any
        decision = Decision([], [], model_facts(run, attributes, wraps and read is None) if self._facts else None)
        if watched and deliveries is not None:  # what went out without the run's reminders: on this span
            decision.events.extend(deliveries.model_call_ended(run.key, started, scope_of(span)))
        if inside:
            return decision
        if due and self._steps.any_step():
            decision.merge(self.count_unanswered(run))
        if self._awaited.awaits(run.key):
            decision.merge(self._awaited.answered(run, mask, name, attributes, events, context))
        if results is not None and results.awaits(run.key):  # progress: results from the tool messages it carries
            decision.merge(results.answered(run, mask, name, attributes, events, span))
        if read is not None:
            step = Step(read, name, attributes, events, context, scope_of(span), times.end_ns(span))
            step.wasted = opened is not None and opened.wasted  # charged while it was open
            self._steps.add(run.key, step, started)
        return decision

    def run_ended(self, span: ReadableSpan) -> Decision | None:
        """A span that stood for a run ends: count what its last step requested without tool spans."""
        context = context_of(span)
        run = None if context is None else self._runs.owner(context[SPAN_ID])
        if run is None or run.how in ("enclosing_span", BAGGAGE):  # an enclosing span may end before its tools run
            return None
        decision = self.count_unanswered(run)
        return decision if decision.events else None

    def count_unanswered(self, run: Run) -> Decision:
        """The calls the run's last step requested that no tool span answered, counted as the run's calls: each
        gets a ``repeat_tool_guard.call`` event (the store's row for it), repeats their own events too."""
        decision = Decision([], [])
        step, calls = self._steps.unanswered(run.key)
        if step is None:
            return decision
        if not calls and step.asked_for_tools():  # content capture off: the model asked, but for what is unknown
            self._blind.unguarded(NO_ARGUMENTS, UNKNOWN_TOOL, step.scope, "none", run.how)
        issuer = format_span_id(step.span_context[SPAN_ID])
        for call in calls:
            if not self._tracked[call.tool_name]:
                continue
            if call.arguments is MISSING:
                decision.events.append(self._blind.unguarded(NO_ARGUMENTS, call.tool_name, step.scope, "none", run.how))
            elif self._results is not None and self._results.compares(call.tool_name):  # its result is not seen
                unseen = self._blind.unguarded(NO_RESULT, call.tool_name, step.scope, "model_request_only", run.how)
                decision.events.append(unseen)
            else:
                self._blind.compared(step.scope, call.tool_name, "model_request_only", run.how)
            facts: dict[str, Any] | None = {ISSUER: issuer} if self._facts else None
            requested = CountedCall(
                run, call.tool_name, call.arguments, call_id=call.call_id, context=step.span_context, facts=facts
            )
            counted = self._count(requested)
            if counted is not None:
                self.charge(step, call.tool_name, counted, facts)
                decision.merge(counted)
            if facts is not None:
                decision.events.append(call_event(run, call, counted, facts))
        return decision

    def charge(self, step: Step, tool: str, counted: Decision, facts: dict[str, Any] | None) -> None:
        """A call that repeats or extends a loop wastes its issuer's tokens; not a parallel duplicate's: the same
        model call asked for the original."""
        if counted.events[0][0] != PARALLEL_DUPLICATE_EVENT:
            step.charge(tool, facts, self._tokens_wasted)

    def _tokens_wasted(self, tool: str, scope: str, attributes: Mapping[str, Any]) -> None:
        """The tokens of the model call that issued a wasted call to ``tool``, to the metric. A model call that
        records no usage adds nothing, and its scope is warned of once: its wasted tokens are unknown, not 0."""
        usage = usage_of(attributes)
        if usage.input is None and usage.output is None:
            self._blind.warn.no_usage(scope)
        self._metrics.wasted_tokens(tool, usage)
