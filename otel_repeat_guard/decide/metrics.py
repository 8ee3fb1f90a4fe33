"""The guard's OTel instruments. Recorded only on repeats, never on every tool call.

The counters are observable: a repeat appends its tool name (and duration) to a log (a deque, whose
append needs no lock), the log is folded into totals when the SDK collects (or once it is
long), and the SDK reads the totals. The histogram has no observable form in OpenTelemetry, so a
finished run is counted in a dict too, and handed to the histogram when the counters'
callbacks run, just before the SDK collects the histogram. A synchronous SDK ``add`` or
``record`` costs 5-11 us, about as much as a small span: on the agent's thread it would
double the guard's cost of a repeated call.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider

from otel_repeat_guard.conventions.usage import Usage
from otel_repeat_guard.core.facts import VARIANT
from otel_repeat_guard.version import __version__

REPEATED_CALLS = "repeat_tool_guard.repeated_calls"
REMINDERS = "repeat_tool_guard.reminders"
RUN_LENGTH = "repeat_tool_guard.run_length"
UNGUARDED_CALLS = "repeat_tool_guard.unguarded_calls"
REMINDER_OUTCOMES = "repeat_tool_guard.reminder_outcomes"
WASTED_TIME = "repeat_tool_guard.wasted_time"
WASTED_TOKENS = "repeat_tool_guard.wasted_tokens"
WASTED_INFERENCE_TOKENS = "repeat_tool_guard.wasted.inference.tokens"
WASTED_INPUT_BY_CACHE = "repeat_tool_guard.wasted.inference.input_tokens_by_cache"
WASTED_OUTPUT_BY_PHASE = "repeat_tool_guard.wasted.inference.output_tokens_by_phase"
"""``WASTED_TOKENS`` under the GenAI conventions' token counters' names and shapes (``gen_ai.client.inference.tokens``
by ``gen_ai.token.type``; ``…input_tokens_by_cache`` by ``gen_ai.token.cache``; ``…output_tokens_by_phase`` by
``gen_ai.token.phase``), each summing to its figure: the wasted tokens' mirror of those metrics, beside the name
the Grafana dashboard and the Prometheus rules read."""
_RUN_LENGTH_BUCKETS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
MAX_SERIES: Final = 2000
"""Per instrument, as the SDK's own cardinality limit: later tools share one overflow series."""
MAX_PENDING_RUNS = 10_000
"""Distinct (tool, run length) pairs waiting for a collection; past it, runs are recorded at once."""
MAX_REPEAT_LOG: Final = 4096
"""Repeats logged before they are folded into the totals without waiting for a collection."""
_OVERFLOW: Final[dict[str, bool]] = {"otel.metric.overflow": True}
TOKEN_CACHE: Final = "gen_ai.token.cache"
TOKEN_PHASE: Final = "gen_ai.token.phase"
_PART_ATTRIBUTES: Final[dict[str, dict[str, str]]] = {
    "": {},
    "none": {TOKEN_CACHE: "none"},
    "read": {TOKEN_CACHE: "read"},
    "creation": {TOKEN_CACHE: "creation"},
    "response": {TOKEN_PHASE: "response"},
    "reasoning": {TOKEN_PHASE: "reasoning"},
}
"""The GenAI conventions' breakdown attribute of each part of a wasted-token count ("": none, the bare count)."""


def token_parts(usage: Usage) -> list[tuple[str, str, int]]:
    """``usage`` as (``gen_ai.token.type``, part, tokens) data points, as the GenAI conventions break token counts
    down (``gen_ai.client.inference.input_tokens_by_cache``: ``gen_ai.token.cache`` ``none`` / ``read`` /
    ``creation``; ``…output_tokens_by_phase``: ``gen_ai.token.phase`` ``response`` / ``reasoning``). The parts of a
    direction sum to its count, so a sum by ``gen_ai.token.type`` is the count either way; a direction whose span
    reports no breakdown (no cache or reasoning tokens above 0, or more than its count) is one bare point (part "")
    as before; a part of 0 is no point; an unknown count, none."""
    points: list[tuple[str, str, int]] = []
    if usage.input is not None:
        read, write = usage.cache_read or 0, usage.cache_write or 0
        if 0 < read + write <= usage.input:
            parts = (("none", usage.input - read - write), ("read", read), ("creation", write))
            points.extend(("input", part, tokens) for part, tokens in parts if tokens)
        else:
            points.append(("input", "", usage.input))
    if usage.output is not None:
        reasoning = usage.reasoning or 0
        if 0 < reasoning <= usage.output:
            phases = (("response", usage.output - reasoning), ("reasoning", reasoning))
            points.extend(("output", part, tokens) for part, tokens in phases if tokens)
        else:
            points.append(("output", "", usage.output))
    return points


def token_breakdowns(usage: Usage) -> list[tuple[str, str, int]]:
    """``usage``'s (attribute, value, tokens) points of the conventions' breakdown counters: by ``gen_ai.token.cache``
    where the span reports its cache reads or writes (0 included) and they fit in its input, by
    ``gen_ai.token.phase`` where it reports its reasoning tokens (0 included) and they fit in its output; a part
    of 0 is no point. A call that reports no breakdown adds nothing to it: its tokens' part is unknown, not
    ``none`` or ``response``."""
    points: list[tuple[str, str, int]] = []
    if usage.input is not None and (usage.cache_read is not None or usage.cache_write is not None):
        read, write = usage.cache_read or 0, usage.cache_write or 0
        if read + write <= usage.input:
            parts = (("none", usage.input - read - write), ("read", read), ("creation", write))
            points.extend((TOKEN_CACHE, part, tokens) for part, tokens in parts if tokens)
    if usage.output is not None and usage.reasoning is not None and usage.reasoning <= usage.output:
        phases = (("response", usage.output - usage.reasoning), ("reasoning", usage.reasoning))
        points.extend((TOKEN_PHASE, phase, tokens) for phase, tokens in phases if tokens)
    return points


class GuardMetrics:
    """Counters and a histogram keyed by tool (never by agent: its cardinality is unbounded)."""

    __slots__ = (
        "_lock",
        "_outcomes",
        "_pending_runs",
        "_reminders",
        "_repeat_log",
        "_repeats",
        "_run_length",
        "_tool_attrs",
        "_unguarded",
        "_wasted_breakdowns",
        "_wasted_ns",
        "_wasted_tokens",
    )

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or get_meter_provider()).get_meter("otel_repeat_guard", __version__)
        self._lock = threading.Lock()
        self._repeats: dict[str, int] = {}
        self._wasted_ns: dict[str, int] = {}
        self._repeat_log: deque[tuple[str, int]] = deque()
        self._wasted_tokens: dict[tuple[str, str, str], int] = {}
        self._wasted_breakdowns: dict[tuple[str, str, str], int] = {}  # (tool, attribute, value)
        self._reminders: dict[tuple[str, str, int, str, str], int] = {}
        self._outcomes: dict[tuple[str, str, str], int] = {}
        self._pending_runs: dict[tuple[str, int], int] = {}
        self._tool_attrs: dict[str, dict[str, str]] = {}
        self._unguarded: dict[tuple[str, str], int] = {}
        counters = (  # name, what its callback reports, unit, description
            (
                REPEATED_CALLS,
                self._observe_repeats,
                "{call}",
                "Tool calls identical to the agent's previous tracked call.",
            ),
            (
                REMINDERS,
                self._observe_reminders,
                "{reminder}",
                "Reminders handed to the harness, by tier and threshold.",
            ),
            (
                REMINDER_OUTCOMES,
                self._observe_outcomes,
                "{reminder}",
                "Reminders by what the run did next: broken (a different call), ignored (the loop went on) or "
                "ended (the run ended first).",
            ),
            (
                WASTED_TIME,
                self._observe_wasted_time,
                "s",
                "Time spent in repeated tool calls (the second and later of a run of identical calls).",
            ),
            (
                WASTED_TOKENS,
                self._observe_wasted_tokens,
                "{token}",
                "Tokens of the model calls that issued a repeated call or a call of a detected loop, by "
                "gen_ai.token.type (input, output); each model call counted once.",
            ),
            (
                WASTED_INFERENCE_TOKENS,
                self._observe_wasted_by_type,
                "{token}",
                "repeat_tool_guard.wasted_tokens as gen_ai.client.inference.tokens counts tokens: by gen_ai.token.type.",
            ),
            (
                WASTED_INPUT_BY_CACHE,
                self._observe_wasted_by_cache,
                "{token}",
                "Wasted input tokens by gen_ai.token.cache (none, read, creation), where the model call reports them.",
            ),
            (
                WASTED_OUTPUT_BY_PHASE,
                self._observe_wasted_by_phase,
                "{token}",
                "Wasted output tokens by gen_ai.token.phase (response, reasoning), where the model call reports them.",
            ),
            (
                UNGUARDED_CALLS,
                self._observe_unguarded,
                "{call}",
                "Tool calls the guard recognised but could not compare, by reason (no_arguments, no_agent, no_result).",
            ),
        )
        for name, callback, unit, description in counters:
            meter.create_observable_counter(name, callbacks=[callback], unit=unit, description=description)
        self._run_length = meter.create_histogram(
            RUN_LENGTH,
            unit="{call}",
            description="Final length of each run of two or more identical tool calls.",
            explicit_bucket_boundaries_advisory=_RUN_LENGTH_BUCKETS,
        )

    def after_fork(self) -> None:
        """In a forked child: a fresh lock, and no count: the child reports its own (its parent reports the rest)."""
        self._lock = threading.Lock()
        self._repeat_log.clear()
        counts: tuple[dict[Any, int], ...] = (self._repeats, self._wasted_ns, self._wasted_tokens, self._reminders)
        for mapping in (*counts, self._wasted_breakdowns, self._outcomes, self._pending_runs, self._unguarded):
            mapping.clear()

    def repeated_call(self, tool: str, duration_ns: int = 0) -> None:
        """A repeated call to ``tool`` that took ``duration_ns`` (0 when it had no tool span to time)."""
        log = self._repeat_log
        log.append((tool, duration_ns))
        if len(log) > MAX_REPEAT_LOG:
            self._fold_repeats()

    def _fold_repeats(self) -> None:
        """Move the logged repeats into the totals; popleft takes each entry exactly once, whoever folds."""
        log, counts, wasted = self._repeat_log, self._repeats, self._wasted_ns
        with self._lock:
            while log:
                tool, duration_ns = log.popleft()
                if tool not in counts and len(counts) >= MAX_SERIES:
                    tool = ""
                counts[tool] = counts.get(tool, 0) + 1
                wasted[tool] = wasted.get(tool, 0) + max(0, duration_ns)

    def wasted_tokens(self, tool: str, usage: Usage) -> None:
        """The tokens of a model call that issued a wasted call to ``tool``; unknown counts add nothing."""
        with self._lock:
            counts = self._wasted_tokens
            for token_type, part, tokens in token_parts(usage):
                key = (tool, token_type, part)
                if key not in counts and len(counts) >= MAX_SERIES:
                    key = ("", token_type, part)
                counts[key] = counts.get(key, 0) + tokens
            breakdowns = self._wasted_breakdowns
            for attribute, value, tokens in token_breakdowns(usage):
                key = (tool, attribute, value)
                if key not in breakdowns and len(breakdowns) >= MAX_SERIES:
                    key = ("", attribute, value)
                breakdowns[key] = breakdowns.get(key, 0) + tokens

    def reminder(self, tool: str, tier: str, threshold: int, kind: str = "repeat", variant: str | None = None) -> None:
        key = (tool, tier, threshold, kind, variant or "")
        with self._lock:
            counts = self._reminders
            if key not in counts and len(counts) >= MAX_SERIES:
                key = ("", tier, threshold, kind, variant or "")
            counts[key] = counts.get(key, 0) + 1

    def reminder_outcome(self, outcome: str, kind: str, tier: str) -> None:
        key = (outcome, kind, tier)  # few values each: no overflow series needed
        with self._lock:
            self._outcomes[key] = self._outcomes.get(key, 0) + 1

    def unguarded(self, reason: str, tool: str) -> None:
        key = (reason, tool)
        with self._lock:
            counts = self._unguarded
            if key not in counts and len(counts) >= MAX_SERIES:
                key = (reason, "")
            counts[key] = counts.get(key, 0) + 1

    def run_ended(self, tool: str, run_length: int) -> None:
        key = (tool, run_length)
        with self._lock:
            pending = self._pending_runs
            if key in pending or len(pending) < MAX_PENDING_RUNS:
                pending[key] = pending.get(key, 0) + 1
                return
        self._run_length.record(run_length, self._attributes(tool))

    def _record_pending_runs(self) -> None:
        with self._lock:
            pending, self._pending_runs = self._pending_runs, {}
        for (tool, run_length), count in pending.items():
            attributes = self._attributes(tool)
            for _ in range(count):
                self._run_length.record(run_length, attributes)

    def _observe_repeats(self, options: CallbackOptions) -> Iterable[Observation]:
        self._record_pending_runs()  # the SDK runs every callback before it collects the histogram
        self._fold_repeats()
        with self._lock:
            totals = list(self._repeats.items())
        return [Observation(n, self._attributes(tool)) for tool, n in totals]

    def _observe_reminders(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._reminders.items())
        return [
            Observation(
                n,
                {
                    **self._attributes(tool),
                    "repeat_tool_guard.tier": tier,
                    "repeat_tool_guard.threshold": threshold,
                    "repeat_tool_guard.kind": kind,
                    **({VARIANT: variant} if variant else {}),  # only while an experiment runs
                },
            )
            for (tool, tier, threshold, kind, variant), n in totals
        ]

    def _observe_outcomes(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._outcomes.items())
        return [
            Observation(n, {"outcome": outcome, "repeat_tool_guard.kind": kind, "repeat_tool_guard.tier": tier})
            for (outcome, kind, tier), n in totals
        ]

    def _observe_wasted_time(self, options: CallbackOptions) -> Iterable[Observation]:
        self._fold_repeats()
        with self._lock:
            totals = list(self._wasted_ns.items())
        return [Observation(ns / 1e9, self._attributes(tool)) for tool, ns in totals]

    def _observe_wasted_tokens(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._wasted_tokens.items())
        return [
            Observation(n, {**self._attributes(tool), "gen_ai.token.type": token_type, **_PART_ATTRIBUTES[part]})
            for (tool, token_type, part), n in totals
        ]

    def _observe_wasted_by_type(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[str, str], int] = {}
        with self._lock:
            for (tool, token_type, _), n in self._wasted_tokens.items():
                totals[tool, token_type] = totals.get((tool, token_type), 0) + n
        return [
            Observation(n, {**self._attributes(tool), "gen_ai.token.type": token_type})
            for (tool, token_type), n in totals.items()
        ]

    def _observe_wasted_by_cache(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._breakdown_points(TOKEN_CACHE)

    def _observe_wasted_by_phase(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._breakdown_points(TOKEN_PHASE)

    def _breakdown_points(self, attribute: str) -> list[Observation]:
        with self._lock:
            totals = [
                (tool, value, n) for (tool, kind, value), n in self._wasted_breakdowns.items() if kind == attribute
            ]
        return [Observation(n, {**self._attributes(tool), attribute: value}) for tool, value, n in totals]

    def _observe_unguarded(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._unguarded.items())
        return [Observation(n, {**self._attributes(tool), "reason": reason}) for (reason, tool), n in totals]

    def _attributes(self, tool: str) -> dict[str, str] | dict[str, bool]:
        """``{"gen_ai.tool.name": tool}``, built once per tool; "" is the overflow series."""
        attributes = self._tool_attrs.get(tool)
        if attributes is None:
            if not tool or len(self._tool_attrs) >= MAX_SERIES:
                return _OVERFLOW
            attributes = self._tool_attrs[tool] = {"gen_ai.tool.name": tool}
        return attributes
