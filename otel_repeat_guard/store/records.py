"""Turning exported spans into store rows: pure functions over ``ReadableSpan`` data.

Spans are read only through the guard's conventions (:func:`find_tool_call` and
:func:`find_agent_run`), so the store recognizes exactly the tool calls the guard does.
Run length and reminder data come from the guard's span events: the store holds what
went over the wire, not a second opinion. Every detection a call carries (a repeat, a cycle,
no progress, a parallel duplicate) becomes a :class:`DetectionRow`, with the reminder of its
kind when the call fired one; an odd event attribute is stored as unknown (None), never raised.

Agent identity. A span carrying the guard's facts (:data:`otel_repeat_guard.core.facts.RUN`) is stored under the run
the guard decided, and nothing below applies. Without them, an exporter sees one span at a time, not its
ancestors, so the agent of a tool call is taken, in order, from:

1. the tool span's own agent id (``gen_ai.agent.id`` or the convention's equivalent);
2. the guard's ``repeat_tool_guard.repeat`` event (present from the second call of a run);
3. otherwise a provisional key ``trace:<trace id>/<parent span id>``, which the exporter
   replaces with the agent-run span's key once that span (the parent) is exported too.
   The replacement uses :func:`agent_run_key_and_name`, which builds the key exactly as the guard
   does, so first calls and repeats of one agent run land on the same agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.conventions import (
    MISSING,
    AgentRun,
    Convention,
    SpanRouter,
    ToolCallReader,
    agent_run_key,
    agent_run_label,
    find_agent_run,
)
from otel_repeat_guard.conventions.base import call_failed, str_or_none
from otel_repeat_guard.core.canonical import arguments_digest, canonical_or_none
from otel_repeat_guard.core.facts import ISSUER, NESTED, REQUESTED, RUN, RUN_NAME, UNGUARDED, VARIANT, WASTED, WRAPPER
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.reminders import arguments_preview
from otel_repeat_guard.decide.blind_spots import NO_AGENT
from otel_repeat_guard.decide.delivery import UNDELIVERED_EVENT
from otel_repeat_guard.decide.recorder import (
    CYCLE_EVENT,
    NO_PROGRESS_EVENT,
    PARALLEL_DUPLICATE_EVENT,
    REMINDER_EVENT,
    REPEAT_EVENT,
    UNGUARDED_EVENT,
)
from otel_repeat_guard.spans.span_events import contents_of, end_ns, start_ns
from otel_repeat_guard.store.model_calls import read_model_call
from otel_repeat_guard.store.model_rows import AgentRunRow, ModelCallRow, UndeliveredRow
from otel_repeat_guard.store.rows import (
    CYCLE,
    LOOP_KINDS,
    NO_PROGRESS,
    PARALLEL_DUPLICATE,
    REPEAT,
    UNKNOWN_SERVICE,
    CallRow,
    DetectionRow,
    ToolCallRow,
)
from otel_repeat_guard.store.storable import int_or_none, storable_int, storable_or_none, storable_text

__all__ = [  # the rows live in store.rows and store.model_rows (no OpenTelemetry import); their names stay importable from here
    "CYCLE",
    "LOOP_KINDS",
    "NO_PROGRESS",
    "PARALLEL_DUPLICATE",
    "REPEAT",
    "UNKNOWN_SERVICE",
    "AgentRunRow",
    "CallRow",
    "DetectionRow",
    "GuardEvents",
    "ModelCallRow",
    "ToolCallRow",
    "UndeliveredRow",
    "agent_run_key_and_name",
    "agent_run_row",
    "model_call_row",
    "provisional_agent_key",
    "service_name",
    "tool_call_row",
    "undelivered_rows",
]


def undelivered_rows(events: Sequence[Any]) -> tuple[UndeliveredRow, ...]:
    """The undelivered reminders a model call's events say went out without it (odd values: unknown, kept)."""
    rows: list[UndeliveredRow] = []
    for event in events:
        if event.name != UNDELIVERED_EVENT:
            continue
        attributes = event.attributes or {}
        rows.append(
            UndeliveredRow(
                storable_text(str_or_none(attributes.get("repeat_tool_guard.reminder_span_id")) or ""),
                storable_text(str_or_none(attributes.get("gen_ai.tool.name")) or ""),
                storable_text(str_or_none(attributes.get("repeat_tool_guard.tier")) or "unknown"),
                storable_text(str_or_none(attributes.get("repeat_tool_guard.reason")) or "unknown"),
            )
        )
    return tuple(rows)


def agent_run_key_and_name(run: AgentRun, span_name: str, span_id: int) -> tuple[str, str]:
    """The chain key and readable name the guard gives an agent resolved from this run span."""
    name = run.agent_name or span_name
    return agent_run_key(run.agent_id, name, span_id), name


def provisional_agent_key(trace_id: str, parent_span_id: str | None) -> str:
    """The key of a call whose agent is not known yet (see the module docstring)."""
    return f"trace:{trace_id}/{parent_span_id or '-'}"


def service_name(span: ReadableSpan) -> str:
    value = span.resource.attributes.get("service.name") if span.resource is not None else None
    return value if isinstance(value, str) and value else UNKNOWN_SERVICE


_EVENT_KINDS = {CYCLE_EVENT: CYCLE, NO_PROGRESS_EVENT: NO_PROGRESS, PARALLEL_DUPLICATE_EVENT: PARALLEL_DUPLICATE}


class GuardEvents:
    """The guard's events on one tool span, by what the store reads of them (the last of each kind counts)."""

    __slots__ = ("detections", "reminders", "repeat", "unguarded")

    def __init__(self, events: Sequence[Any]) -> None:
        self.repeat: Mapping[str, object] = {}
        self.unguarded: Mapping[str, object] = {}
        self.detections: dict[str, Mapping[str, object]] = {}  # kind -> the detection event's attributes
        self.reminders: dict[str, Mapping[str, object]] = {}  # kind -> the reminder event's attributes
        for event in events:
            attributes = event.attributes or {}
            if event.name == REPEAT_EVENT:
                self.repeat = attributes
            elif event.name == REMINDER_EVENT:
                kind = attributes.get("repeat_tool_guard.kind", REPEAT)  # a guard before kinds: a repeat
                if kind in LOOP_KINDS:
                    self.reminders[str(kind)] = attributes
            elif event.name == UNGUARDED_EVENT:
                self.unguarded = attributes
            elif event.name in _EVENT_KINDS:
                self.detections[_EVENT_KINDS[event.name]] = attributes

    def reminder(self, kind: str) -> tuple[str | None, int | None]:
        """The tier and threshold of the call's reminder of ``kind``, if it fired one."""
        attributes = self.reminders.get(kind, {})
        tier = str_or_none(attributes.get("repeat_tool_guard.tier"))
        threshold = int_or_none(attributes.get("repeat_tool_guard.threshold"))
        return (None if tier is None else storable_text(tier)), storable_or_none(threshold)

    def variant(self, kind: str) -> str | None:
        """The wording variant of the call's reminder of ``kind``, while an experiment runs."""
        return str_or_none(self.reminders.get(kind, {}).get(VARIANT))

    def rows(self, run_length: int | None) -> tuple[DetectionRow, ...]:
        """One row per kind detected on the call (``run_length``: the call's position in its run of identical calls)."""
        kinds = set(self.detections) | set(self.reminders)
        if run_length is not None and run_length >= 2:
            kinds.add(REPEAT)
        return tuple(
            _detection(kind, self.detections.get(kind, {}), run_length, *self.reminder(kind))
            for kind in LOOP_KINDS
            if kind in kinds
        )


def _detection(
    kind: str, attributes: Mapping[str, object], run_length: int | None, tier: str | None, threshold: int | None
) -> DetectionRow:
    if kind == REPEAT:
        return DetectionRow(kind, run_length=run_length, reminder_tier=tier, reminder_threshold=threshold)
    if kind == CYCLE:
        period = storable_or_none(int_or_none(attributes.get("repeat_tool_guard.period")))
        repetitions = storable_or_none(int_or_none(attributes.get("repeat_tool_guard.repetitions")))
        return DetectionRow(
            kind,
            run_length=None if period is None or repetitions is None else storable_int(period * repetitions),
            period=period,
            repetitions=repetitions,
            cycle_tools=_tools_json(attributes.get("repeat_tool_guard.cycle_tools")),
            reminder_tier=tier,
            reminder_threshold=threshold,
        )
    if kind == NO_PROGRESS:
        digest = str_or_none(attributes.get("repeat_tool_guard.outcome_digest"))
        return DetectionRow(
            kind,
            run_length=storable_or_none(int_or_none(attributes.get("repeat_tool_guard.run_length"))),
            outcome_digest=None if digest is None else storable_text(digest),
            reminder_tier=tier,
            reminder_threshold=threshold,
        )
    return DetectionRow(kind, reminder_tier=tier, reminder_threshold=threshold)


def _tools_json(value: object) -> str | None:
    """A cycle's tools as a JSON array (ASCII, so any text is storable), or None unless a sequence of strings."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(tool, str) for tool in value):
        return None
    return json.dumps(list(value))


def tool_call_row(
    span: ReadableSpan,
    read_tool_call: ToolCallReader,
    tracked: ToolFilter,
    *,
    store_arguments: bool,
    preview_chars: int,
) -> ToolCallRow | None:
    """The row for ``span`` if ``read_tool_call`` reads it as a tool span, else None (also for a span the guard
    found inside a tool span of the same call, :data:`otel_repeat_guard.core.facts.NESTED`: that one is the row)."""
    name, attributes, events = contents_of(span)
    call = read_tool_call(name, attributes, events)
    context = span.context
    if call is None or context is None or NESTED in attributes:
        return None
    tool, arguments, agent_id, agent_name, error, _ = call
    trace_id = format_trace_id(context.trace_id)
    parent_span_id = format_span_id(span.parent.span_id) if span.parent is not None else None
    guard = GuardEvents(events)
    repeat, unguarded = guard.repeat, guard.unguarded
    is_tracked = tracked[tool]

    digest: str | None = str_or_none(repeat.get("repeat_tool_guard.arguments_digest"))
    preview: str | None = None
    if arguments is not MISSING:
        canonical = canonical_or_none(arguments)  # None: not JSON-like, the guard cannot compare it either
        if canonical is not None:
            digest = digest or arguments_digest(canonical)
            if store_arguments:
                sent = str_or_none(attributes.get(REQUESTED))  # what the model's request sent, where it differs
                shown = sent if sent is not None else canonical.decode("utf-8", "surrogatepass")
                preview = arguments_preview(shown, preview_chars)

    decided_run = str_or_none(attributes.get(RUN))  # the guard's own answer, when it recorded its facts
    event_agent = str_or_none(repeat.get("repeat_tool_guard.agent_id"))
    agent_key = decided_run or agent_id or event_agent
    if decided_run is not None:
        agent_name = str_or_none(attributes.get(RUN_NAME)) or agent_name
    elif agent_name is None and agent_key is event_agent and event_agent is not None:
        agent_name = agent_run_label(event_agent)  # the run's own name, as the guard keyed it: never the key
    known = agent_key is not None
    if agent_key is None:
        agent_key = provisional_agent_key(trace_id, parent_span_id)

    run_length = int_or_none(repeat.get("repeat_tool_guard.run_length"))
    if run_length is None and is_tracked:
        run_length = 1
    start = start_ns(span)
    end = end_ns(span) or start
    tier, threshold = guard.reminder(REPEAT)
    return ToolCallRow(
        start_ns=start,
        end_ns=end,
        service_name=service_name(span),
        trace_id=trace_id,
        span_id=format_span_id(context.span_id),
        parent_span_id=parent_span_id,
        agent_key=agent_key,
        agent_name=agent_name,
        agent_known=known,
        tool_name=tool,
        tracked=is_tracked,
        arguments_digest=digest,
        arguments_preview=preview,
        error=call_failed(error, span.status.status_code, attributes, events),
        run_length=run_length,
        reminder_tier=tier,
        reminder_threshold=threshold,
        unguarded_reason=str_or_none(unguarded.get("repeat_tool_guard.reason"))
        or str_or_none(attributes.get(UNGUARDED))  # the guard's decision, where its run was not to be found
        or (NO_AGENT if is_tracked and agent_id is None and span.parent is None else None),
        detections=guard.rows(storable_int(run_length) if run_length is not None else None),
        issuer_span_id=str_or_none(attributes.get(ISSUER)),
        charges_issuer=attributes.get(WASTED) is True,
        decided=decided_run is not None,
        reminder_variant=None if tier is None else guard.variant(REPEAT),
    ).storable()


def agent_run_row(span: ReadableSpan, conventions: Sequence[Convention]) -> AgentRunRow | None:
    """The row for ``span`` if it is an agent-run span, else None."""
    context = span.context
    if context is None:
        return None
    run = find_agent_run(conventions, span.name, span.attributes or {})
    if run is None:
        return None
    key, name = agent_run_key_and_name(run, span.name, context.span_id)
    return AgentRunRow(
        format_trace_id(context.trace_id), format_span_id(context.span_id), storable_text(key), storable_text(name)
    )


def model_call_row(
    span: ReadableSpan, router: SpanRouter, *, store_outputs: bool, preview_chars: int
) -> ModelCallRow | None:
    """The row for ``span`` if the conventions' router marks it as a model call, else None (also for a span
    the guard marked as only wrapping the model call of record, :data:`otel_repeat_guard.core.facts.WRAPPER`).

    Its agent: the run the guard decided (:data:`otel_repeat_guard.core.facts.RUN`) when its facts are on the span;
    else its own ``gen_ai.agent.id`` (and name) if it has one, else the provisional key of its parent, exactly
    as for a first tool call, so the exporter gives it its run's key when the agent-run span arrives and a
    run's model calls and tool calls share one key.
    """
    context = span.context
    if context is None:
        return None
    name, attributes, events = contents_of(span)
    if not router.route(name, attributes) & router.model_bits or attributes.get(WRAPPER) is True:
        return None  # not a model call, or the guard found it only wraps the call of record inside it
    info = read_model_call(attributes)
    trace_id = format_trace_id(context.trace_id)
    parent_span_id = format_span_id(span.parent.span_id) if span.parent is not None else None
    agent_id = str_or_none(attributes.get(RUN)) or str_or_none(attributes.get("gen_ai.agent.id"))
    agent_name = str_or_none(attributes.get(RUN_NAME)) or str_or_none(attributes.get("gen_ai.agent.name"))
    start = start_ns(span)
    end = end_ns(span) or start
    preview = None
    if store_outputs and info.output is not None:
        preview = arguments_preview(info.output, preview_chars)
    return ModelCallRow(
        start_ns=start,
        end_ns=end,
        service_name=service_name(span),
        trace_id=trace_id,
        span_id=format_span_id(context.span_id),
        parent_span_id=parent_span_id,
        agent_key=agent_id or provisional_agent_key(trace_id, parent_span_id),
        agent_name=agent_name,
        agent_known=agent_id is not None,
        model=info.model,
        provider=info.provider,
        input_tokens=info.input_tokens,
        output_tokens=info.output_tokens,
        total_tokens=info.total_tokens,
        conversation_id=info.conversation_id,
        error=call_failed(False, span.status.status_code, attributes, events),
        output_preview=preview,
        cache_read_tokens=info.cache_read_tokens,
        cache_write_tokens=info.cache_write_tokens,
        undelivered=undelivered_rows(events),
        reasoning_tokens=info.reasoning_tokens,
    ).storable()
