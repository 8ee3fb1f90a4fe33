"""The SQL that reads the store's rows out of the exporter's ``otel_traces``: tool calls and model calls.

It reads what the guard recorded on each span, as the embedded store does (``store.records``): its facts
(``repeat_tool_guard.run``, ``.run_name``, ``.issuer``, ``.wasted``: the agent run, the model call that
issued a tool call, whether that call charged the model call's tokens) and its events (the run length, the
reminders, the cycle, no-progress and parallel-duplicate detections, why a call could not be compared).
Every attribute is a string in that table. A tool span with neither facts nor guard events was made where
no guard ran: ``seen`` is 0 and the dashboard lists it among the blind spots.

Each fragment filters on ``Timestamp`` (the span's start) and ``ServiceName`` first, the table's partition
and ordering key, then on the call's end. Values are parameters: ``{name:Type}`` bound by ClickHouse. Every
text it hands on is valid UTF-8 (``toValidUTF8``): the Collector stores the bytes it was given, and one odd
byte must not cost a page its rows.
"""

from __future__ import annotations

from otel_repeat_guard.conventions.base import EXECUTE_TOOL_PREFIX, TOOL_NAME_KEYS
from otel_repeat_guard.conventions.genai import INVOCATIONS
from otel_repeat_guard.conventions.usage import (
    CACHE_READ,
    CACHE_WRITE,
    INPUT,
    MAX_TOKENS,
    OUTPUT,
    REASONING,
    TOTAL,
    Figure,
)
from otel_repeat_guard.conventions.vercel_ai import ARGUMENTS_KEY as VERCEL_ARGUMENTS
from otel_repeat_guard.conventions.vercel_ai import STEPS as VERCEL_STEPS
from otel_repeat_guard.conventions.vercel_ai import TOOL_CALL as VERCEL_TOOL
from otel_repeat_guard.conventions.vercel_ai import TOOL_NAME_KEY as VERCEL_TOOL_NAME
from otel_repeat_guard.core.facts import CALL_EVENT, ISSUER, NESTED, RUN, RUN_NAME, VARIANT, WASTED, WRAPPER
from otel_repeat_guard.decide.blind_spots import NO_GUARD
from otel_repeat_guard.decide.recorder import (
    CYCLE_EVENT,
    NO_PROGRESS_EVENT,
    PARALLEL_DUPLICATE_EVENT,
    REMINDER_EVENT,
    REPEAT_EVENT,
    UNGUARDED_EVENT,
)
from otel_repeat_guard.store.model_calls import (
    CONVERSATION_KEYS,
    MODEL_KEYS,
    OUTPUT_KEYS,
    PROVIDER_KEYS,
)

NOT_SEEN = NO_GUARD
"""The blind-spot reason of a tool span the guard never saw (no facts, no events)."""

SLACK_NS = 86_400 * 1_000_000_000
"""How long before a range's first end a call may have started and still end inside it (the scan's margin)."""

TABLE = "{db:Identifier}.{tbl:Identifier}"


def like(pattern: str) -> str:
    """A tool-name pattern (``*``: any run of characters, the rest literal) as a LIKE pattern."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


# The last event named ``name`` (0: none; ClickHouse then reads an empty map), and one of its attributes.
_FAILED = (
    "(StatusCode = 'Error' OR mapContains(SpanAttributes, 'error.type') OR SpanAttributes['gen_ai.tool.status'] = 'error'"
    " OR SpanAttributes['gen_ai.task.status'] = 'failure' OR has(Events.Name, 'exception'))"
)
"""Whether a tool or model call failed, as ``conventions.base.call_failed`` says: the one rule, in SQL."""
_LAST = "arrayLastIndex(n -> n = '{name}', Events.Name)"


def _event(name: str, alias: str) -> str:
    return f"Events.Attributes[{_LAST.format(name=name)}] AS {alias}"


def _reminder(kind: str, alias: str, key: str = "repeat_tool_guard.tier") -> str:
    """The tier (or another ``key``) of the span's last reminder of ``kind`` (a reminder without a kind is a
    repeat's), or NULL."""
    kinds = "('', 'repeat')" if kind == "repeat" else f"('{kind}')"
    index = (
        f"arrayLastIndex((n, a) -> n = '{REMINDER_EVENT}' AND a['repeat_tool_guard.kind'] IN {kinds}, "
        "Events.Name, Events.Attributes)"
    )
    return f"nullIf(Events.Attributes[{index}]['{key}'], '') AS {alias}"


SCAN = f"""
    FROM {TABLE}
    WHERE Timestamp >= fromUnixTimestamp64Nano({{scan_lo:Int64}}) AND Timestamp <= fromUnixTimestamp64Nano({{scan_hi:Int64}})
      {{services}}
"""
"""The bounded scan every fragment starts with; ``{services}`` is empty or the service condition."""

SERVICE_CONDITION = "AND ServiceName IN {services:Array(String)}"

# The conventions' marks (GenAI, OpenInference, OpenLLMetry, the Vercel AI SDK's), as the guard's router reads them.
TOOL_SPAN = f"""(SpanAttributes['gen_ai.operation.name'] = 'execute_tool'
           OR SpanAttributes['openinference.span.kind'] = 'TOOL' OR SpanAttributes['traceloop.span.kind'] = 'tool'
           OR SpanName = '{VERCEL_TOOL}')"""
MODEL_SPAN = f"""(SpanAttributes['gen_ai.operation.name'] IN ('chat', 'text_completion', 'generate_content')
           OR (SpanAttributes['openinference.span.kind'] = 'LLM' AND NOT endsWith(SpanName, '._prepare_chat_with_tools'))
           OR SpanAttributes['llm.request.type'] IN ('chat', 'completion') OR SpanName IN {VERCEL_STEPS})"""

_SPAN_COLUMNS = """
        toUnixTimestamp64Nano(Timestamp) AS start_ns,
        start_ns + toInt64(Duration) AS end_ns,
        toInt64(Duration) AS duration_ns,
        toValidUTF8(if(ServiceName = '', 'unknown_service', toString(ServiceName))) AS service_name,
        toUnixTimestamp64Nano(Timestamp) AS span_ns,"""
"""Every call's times and service, as the embedded store keeps them, and its row's ``Timestamp`` (``span_ns``)."""

ALL_TRACKED = "toUInt8(1)"
"""``{tracked}`` when every tool is tracked (no ``OTEL_REPEAT_GUARD_INCLUDE``/``_EXCLUDE`` pattern)."""


def tracked_condition(include: int, exclude: int) -> str:
    """Whether a call's tool is tracked, for ``include`` and ``exclude`` LIKE patterns bound as ``track_in<i>``
    and ``track_ex<i>`` (one comparison each: a lambda over an array per row costs more than the rest)."""
    parts = []
    if include:
        parts.append("(" + " OR ".join(f"tool_name LIKE {{track_in{i}:String}}" for i in range(include)) + ")")
    if exclude:
        parts.append("NOT (" + " OR ".join(f"tool_name LIKE {{track_ex{i}:String}}" for i in range(exclude)) + ")")
    return f"toUInt8({' AND '.join(parts)})" if parts else ALL_TRACKED


CONFIGURED = """
        {tracked} AS tracked,
        ifNull(guard_run_length, if(tracked, toNullable(toInt64(1)), NULL)) AS run_length,
        multiIf(guard_unguarded IS NOT NULL, guard_unguarded, tracked AND orphan, 'no_agent', NULL) AS unguarded_reason"""
"""A call's columns that follow the guard's configuration (tracked tools): from its stored ones, ``tool_name``,
``guard_run_length`` (the guard's run length), ``guard_unguarded`` (its reason) and ``orphan`` (a root span
naming no agent). ``{tracked}`` is :func:`tracked_condition`'s."""

_TOOL_NAME = f"""coalesce({", ".join(f"nullIf(SpanAttributes['{key}'], '')" for key in TOOL_NAME_KEYS)},
                 if(startsWith(SpanName, '{EXECUTE_TOOL_PREFIX}'),
                    nullIf(trimBoth(substring(SpanName, {len(EXECUTE_TOOL_PREFIX) + 1})), ''), NULL),
                 if(SpanName = '{VERCEL_TOOL}', nullIf(SpanAttributes['{VERCEL_TOOL_NAME}'], ''), NULL),
                 if(SpanAttributes['openinference.span.kind'] = 'TOOL', toString(SpanName), ''))"""
"""A tool span's tool, as the conventions read it (``conventions.base.tool_name``; OpenInference's reader falls back
on the span's name): '' when it names none, and the guard and the store then see no call."""

_KEY_NAME = "^(.+)#" + "[0-9a-f]" * 16 + "$"  # conventions.agent_run_label, as a regex: a key's name part

TOOL_SPANS = f"""
    SELECT{_SPAN_COLUMNS}
        TraceId AS trace_id, SpanId AS span_id, ParentSpanId AS parent_span_id,
        toValidUTF8({_TOOL_NAME}) AS tool_name,
        SpanAttributes['{RUN}'] AS run_fact,
        {_event(REPEAT_EVENT, "rep")},
        {_event(UNGUARDED_EVENT, "ung")},
        {_event(CYCLE_EVENT, "cyc")},
        {_event(NO_PROGRESS_EVENT, "nop")},
        toValidUTF8(multiIf(
            run_fact != '', run_fact, SpanAttributes['gen_ai.agent.id'] != '', SpanAttributes['gen_ai.agent.id'],
            rep['repeat_tool_guard.agent_id'] != '', rep['repeat_tool_guard.agent_id'],
            concat('trace:', TraceId, '/', if(ParentSpanId = '', '-', ParentSpanId)))) AS agent_key,
        toValidUTF8(if(run_fact != '' AND SpanAttributes['{RUN_NAME}'] != '', SpanAttributes['{RUN_NAME}'],
           coalesce(nullIf(SpanAttributes['gen_ai.agent.name'], ''),
                    if(run_fact = '' AND SpanAttributes['gen_ai.agent.id'] = '',
                       nullIf(extract(rep['repeat_tool_guard.agent_id'], '{_KEY_NAME}'), ''), NULL))
        )) AS agent_name,
        ifNull(agent_name, agent_key) AS agent,
        toInt64OrNull(rep['repeat_tool_guard.run_length']) AS guard_run_length,
        nullIf(ung['repeat_tool_guard.reason'], '') AS guard_unguarded,
        SpanAttributes['gen_ai.agent.id'] = '' AND ParentSpanId = '' AS orphan,{CONFIGURED},
        {_reminder("repeat", "reminder_tier")},
        toValidUTF8({_reminder("repeat", "", VARIANT).removesuffix(" AS ")}) AS reminder_variant,
        run_fact != '' OR arrayExists(n -> startsWith(n, 'repeat_tool_guard.'), Events.Name) AS seen,
        {_FAILED} AS error,
        nullIf(rep['repeat_tool_guard.arguments_digest'], '') AS arguments_digest,
        toValidUTF8(coalesce(nullIf(SpanAttributes['gen_ai.tool.call.arguments'], ''),
                             nullIf(SpanAttributes['input.value'], ''), nullIf(SpanAttributes['traceloop.entity.input'], ''),
                             SpanAttributes['{VERCEL_ARGUMENTS}'])) AS arguments,
        SpanAttributes['{ISSUER}'] AS issuer,
        SpanAttributes['{WASTED}'] = 'true' AS wasted,
        {_reminder("cycle", "cycle_tier")},
        {_reminder("no_progress", "np_tier")},
        {_reminder("parallel_duplicate", "pd_tier")},
        has(Events.Name, '{CYCLE_EVENT}') OR cycle_tier IS NOT NULL AS is_cycle,
        toInt64OrNull(cyc['repeat_tool_guard.period']) AS period,
        toInt64OrNull(cyc['repeat_tool_guard.repetitions']) AS repetitions,
        period * repetitions AS cycle_length,
        has(Events.Name, '{NO_PROGRESS_EVENT}') OR np_tier IS NOT NULL AS is_np,
        toInt64OrNull(nop['repeat_tool_guard.run_length']) AS np_length,
        has(Events.Name, '{PARALLEL_DUPLICATE_EVENT}') OR pd_tier IS NOT NULL AS is_pd
    {SCAN}
      AND {TOOL_SPAN} AND NOT mapContains(SpanAttributes, '{NESTED}') AND tool_name != ''
"""
"""One row per tool span, with the store's ``tool_calls`` columns and each detection kind's figures (none for a
span inside a tool span of the same call: that one is the row, ``facts.NESTED``)."""

_NO_EVENT = "CAST(map(), 'Map(LowCardinality(String), String)')"
_NO_TEXT, _NO_COUNT = "CAST(NULL, 'Nullable(String)')", "CAST(NULL, 'Nullable(Int64)')"

REQUESTED_CALLS = f"""
    SELECT
        toUnixTimestamp64Nano(ev_ts) AS start_ns,
        start_ns AS end_ns,
        toInt64(0) AS duration_ns,
        toValidUTF8(if(ServiceName = '', 'unknown_service', toString(ServiceName))) AS service_name,
        toUnixTimestamp64Nano(Timestamp) AS span_ns,
        TraceId AS trace_id, concat(SpanId, '/', toString(ev_index - 1)) AS span_id, SpanId AS parent_span_id,
        toValidUTF8(ev['gen_ai.tool.name']) AS tool_name,
        ev['{RUN}'] AS run_fact,
        ev AS rep, {_NO_EVENT} AS ung, {_NO_EVENT} AS cyc, {_NO_EVENT} AS nop,
        toValidUTF8(run_fact) AS agent_key,
        toValidUTF8(nullIf(ev['{RUN_NAME}'], '')) AS agent_name,
        ifNull(agent_name, agent_key) AS agent,
        toInt64OrNull(ev['repeat_tool_guard.run_length']) AS guard_run_length,
        {_NO_TEXT} AS guard_unguarded,
        toUInt8(0) AS orphan,{CONFIGURED},
        nullIf(ev['repeat_tool_guard.tier'], '') AS reminder_tier,
        toValidUTF8(nullIf(ev['{VARIANT}'], '')) AS reminder_variant,
        toUInt8(1) AS seen,
        toUInt8(0) AS error,
        nullIf(ev['repeat_tool_guard.arguments_digest'], '') AS arguments_digest,
        '' AS arguments,
        ev['{ISSUER}'] AS issuer,
        ev['{WASTED}'] = 'true' AS wasted,
        {_NO_TEXT} AS cycle_tier, {_NO_TEXT} AS np_tier, {_NO_TEXT} AS pd_tier,
        toUInt8(0) AS is_cycle, {_NO_COUNT} AS period, {_NO_COUNT} AS repetitions, {_NO_COUNT} AS cycle_length,
        toUInt8(0) AS is_np, {_NO_COUNT} AS np_length, toUInt8(0) AS is_pd
    FROM {TABLE}
    ARRAY JOIN Events.Name AS ev_name, Events.Attributes AS ev, Events.Timestamp AS ev_ts, arrayEnumerate(Events.Name) AS ev_index
    WHERE Timestamp >= fromUnixTimestamp64Nano({{scan_lo:Int64}}) AND Timestamp <= fromUnixTimestamp64Nano({{scan_hi:Int64}})
      {{services}}
      AND has(Events.Name, '{CALL_EVENT}') AND ev_name = '{CALL_EVENT}' AND tool_name != '' AND run_fact != ''
"""
"""One row per call the guard counted from a model's request (a ``repeat_tool_guard.call`` event, on whatever span
carries it), keyed ``<span id>/<index>`` as the embedded store keys it (``store.requested_rows``); its
repeat figures only (a late no-progress detection on another span is not joined here)."""

TOOL_CALLS = TOOL_SPANS + "    UNION ALL" + REQUESTED_CALLS
"""Every call: the tool spans', then those counted from requests."""


def _counted(key: str) -> str:
    """``key``'s text as an integer from 0 to ``MAX_TOKENS``, else NULL."""
    value = f"toInt64OrNull(SpanAttributes['{key}'])"
    return f"if({value} BETWEEN 0 AND {MAX_TOKENS}, {value}, NULL)"


def _figure(figure: Figure) -> str:
    """``figure`` (the usage reader's, constants) as ``usage.figure_of`` reads it: the first of its totals whose
    text is an integer from 0 to ``MAX_TOKENS``, else the sum of its known parts (NULL when none is known or the
    sum is past it). The table's text keeps no type, so a count written as a string or a whole float counts here,
    where the embedded store reads none."""
    total = "coalesce(" + ", ".join(_counted(key) for key in figure.totals) + ")"
    if not figure.parts:
        return total
    parts = [_counted(key) for key in figure.parts]
    summed = " + ".join(f"ifNull({part}, 0)" for part in parts)
    known = f"coalesce({', '.join(parts)}) IS NOT NULL AND ({summed}) <= {MAX_TOKENS}"
    return f"ifNull({total}, if({known}, {summed}, NULL))"


def _text(keys: tuple[str, ...]) -> str:
    """The first of ``keys`` (the store's reader's, constants) with a non-empty text, else NULL; valid UTF-8."""
    return "toValidUTF8(coalesce(" + ", ".join(f"nullIf(SpanAttributes['{key}'], '')" for key in keys) + "))"


MODEL_CALLS = f"""
    SELECT{_SPAN_COLUMNS}
        TraceId AS trace_id, SpanId AS span_id,
        toValidUTF8(multiIf(SpanAttributes['{RUN}'] != '', SpanAttributes['{RUN}'],
                            SpanAttributes['gen_ai.agent.id'] != '', SpanAttributes['gen_ai.agent.id'],
                            concat('trace:', TraceId, '/', if(ParentSpanId = '', '-', ParentSpanId)))) AS agent_key,
        {_text((RUN_NAME, "gen_ai.agent.name"))} AS agent_name,
        ifNull(agent_name, agent_key) AS agent,
        {_text(MODEL_KEYS)} AS model,
        {_text(PROVIDER_KEYS)} AS provider,
        {_figure(INPUT)} AS input_tokens,
        {_figure(OUTPUT)} AS output_tokens,
        {_figure(CACHE_READ)} AS cache_read_tokens,
        {_figure(CACHE_WRITE)} AS cache_write_tokens,
        {_figure(REASONING)} AS reasoning_tokens,
        ifNull(input_tokens + output_tokens, {_figure(TOTAL)}) AS total_tokens,
        {_text(CONVERSATION_KEYS)} AS conversation_id,
        {_FAILED} AS error,
        {_text(OUTPUT_KEYS)} AS output
    {SCAN}
      AND {MODEL_SPAN}
      AND SpanAttributes['{WRAPPER}'] != 'true'
"""
"""One row per model-call span, with the store's ``model_calls`` columns (none for a framework's span that only
wraps its client's, ``facts.WRAPPER``)."""

_OPERATION = "SpanAttributes['gen_ai.operation.name']"
_NAMED = f"trim(substring(SpanName, length({_OPERATION}) + 2))"  # "invoke_agent weather" -> "weather"

AGENT_RUNS = f"""
    SELECT toValidUTF8(concat(multiIf(SpanAttributes['gen_ai.agent.id'] != '', SpanAttributes['gen_ai.agent.id'],
                                      SpanAttributes['gen_ai.agent.name'] != '', SpanAttributes['gen_ai.agent.name'],
                                      startsWith(SpanName, concat({_OPERATION}, ' ')) AND {_NAMED} != '', {_NAMED},
                                      toString(SpanName)),
                              '#', SpanId)) AS agent_key,
           toUnixTimestamp64Nano(Timestamp) AS span_ns
    {SCAN}
      AND {_OPERATION} IN {tuple(INVOCATIONS)}
"""
"""The keys of the agent-run spans (as the guard keys a run found through its span): a run that ended."""
