"""The record step: what a detected loop becomes, as span events, metrics and a ``Reminder``.

The processor decides (chains and detectors); the recorder words it. Reminder texts and tiers
live in :mod:`otel_repeat_guard.core.reminders`; the names of the guard's span events are here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry.trace import format_span_id, format_trace_id
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.conventions.base import MISSING, RequestedCall
from otel_repeat_guard.core.canonical import arguments_key, canonical_arguments, canonical_or_none
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Detection
from otel_repeat_guard.core.facts import CALL_EVENT, VARIANT
from otel_repeat_guard.core.policy import Policy
from otel_repeat_guard.core.reminders import (
    REDIRECT,
    SEED,
    Kind,
    Reminder,
    Tier,
    cycle_text,
    no_progress_text,
    redirect_of,
    registered_style,
    repeat_text,
    shown_preview,
    tiers_of,
    variant_for,
)
from otel_repeat_guard.decide.decision import CountedCall, Decision
from otel_repeat_guard.decide.metrics import GuardMetrics
from otel_repeat_guard.decide.progress import policy_table
from otel_repeat_guard.spans.run import Run
from otel_repeat_guard.spans.span_events import EventSpec

logger = logging.getLogger("otel_repeat_guard")

REPEAT_EVENT: Final = "repeat_tool_guard.repeat"
REMINDER_EVENT: Final = "repeat_tool_guard.reminder"
UNGUARDED_EVENT: Final = "repeat_tool_guard.unguarded"
CYCLE_EVENT: Final = "repeat_tool_guard.cycle"
NO_PROGRESS_EVENT: Final = "repeat_tool_guard.no_progress"
PARALLEL_DUPLICATE_EVENT: Final = "repeat_tool_guard.parallel_duplicate"
REDACTION_FAILED: Final = "[arguments withheld: redaction failed]"
"""What a reminder quotes when the ``redact=`` callable raised."""


def _reminder(  # noqa: PLR0913 - a Reminder's fields, by name
    call: CountedCall, *, kind: Kind, tier: Tier, run_length: int, threshold: int, period: int, text: str, preview: str
) -> Reminder:
    """The reminder of ``call``'s loop, for the run, tool and span of the call."""
    context = call.context
    return Reminder(
        agent_id=call.run.address,
        agent_name=call.run.name,
        tool_name=call.tool,
        run_length=run_length,
        threshold=threshold,
        tier=tier,
        text=text,
        arguments_preview=preview,
        trace_id=format_trace_id(context.trace_id) if context else "0" * 32,
        span_id=format_span_id(context.span_id) if context else "0" * 16,
        kind=kind,
        period=period,
    )


def _stop_tiers(policy: Policy) -> dict[int, Tier]:
    """A tool policy's tiers by run length: its thresholds', and ``stop`` at its ``stop_at``."""
    return tiers_of(policy.thresholds, policy.stop_at)


class Recorder:
    """Turns the run's answers into events, metric updates and reminders, per the configuration."""

    __slots__ = (
        "_config",
        "_cycle_tiers",
        "_metrics",
        "_no_progress_tiers",
        "_policies",
        "_policy_tiers",
        "_redact",
        "_tiers",
        "_wording",
    )

    def __init__(self, config: GuardConfig, metrics: GuardMetrics, redact: Callable[[str], str] | None) -> None:
        self._config = config
        self._metrics = metrics
        self._redact = redact
        self._tiers = tiers_of(config.thresholds, config.stop_at)  # the Claude Code command hook's too
        self._cycle_tiers = tiers_of(config.cycle_thresholds)
        self._policies = policy_table(config) if config.tools else None  # per-tool thresholds and stop_at
        self._policy_tiers = {} if self._policies is None else {p: _stop_tiers(p) for p in self._policies.policies}
        self._no_progress_tiers = tiers_of(config.no_progress_thresholds)
        self._wording = Wording(config)

    def repeat(self, call: CountedCall, key: bytes, length: int, duration_ns: int) -> Decision:
        """The events and reminder of a repeated call (the ``length``-th identical one in a row, its ``key``
        the call's own), which took ``duration_ns`` (0: it had no tool span to time)."""
        repeat: dict[str, AttributeValue] = {
            "repeat_tool_guard.run_length": length,
            "repeat_tool_guard.agent_id": call.run.address,
            "gen_ai.tool.name": call.tool,
            "repeat_tool_guard.arguments_digest": key.hex(),  # the key is the canonical form's digest
            "repeat_tool_guard.error": call.error,
        }
        if call.call_id is not None:  # a call with no tool span of its own: its events sit on another span
            repeat["gen_ai.tool.call.id"] = call.call_id
        events: list[EventSpec] = [(REPEAT_EVENT, repeat)]
        self._metrics.repeated_call(call.tool, duration_ns)
        policies = self._policies
        tier = (self._tiers if policies is None else self._policy_tiers[policies[call.tool]]).get(length)
        if tier is None:
            return Decision(events, [], call.facts)
        shown = call.arguments if call.quote is MISSING else call.quote  # the model's request, where read
        preview = self._preview(canonical_arguments(shown))  # only now: the key spared it on every call
        text = repeat_text(tier, call.tool, length, preview)
        reminder = _reminder(
            call, kind="repeat", tier=tier, run_length=length, threshold=length, period=1, text=text, preview=preview
        )
        return self._remind(events, self._wording.worded(reminder), call, call.facts)

    def detection(self, call: CountedCall, found: Detection, outcome: Any) -> Decision:
        """The event of a call that extends a cycle or a no-progress run, and its reminder when one is due."""
        if found.kind == "cycle":
            event: dict[str, AttributeValue] = {
                "repeat_tool_guard.period": found.period,
                "repeat_tool_guard.repetitions": found.threshold,
                "repeat_tool_guard.cycle_tools": found.tools,
            }
            events: list[EventSpec] = [(CYCLE_EVENT, event)]
            tier = self._cycle_tiers.get(found.threshold) if found.fires else None
        else:
            event = {
                "repeat_tool_guard.run_length": found.run_length,
                "repeat_tool_guard.outcome_digest": found.outcome.hex() if found.outcome else "",
            }
            events = [(NO_PROGRESS_EVENT, event)]
            tier = self._no_progress_tiers.get(found.threshold) if found.fires else None
        if call.call_id is not None:
            event["gen_ai.tool.call.id"] = call.call_id
        if tier is None:
            return Decision(events, [])
        quoted = call.arguments if call.quote is MISSING else call.quote  # the model's request, where read
        shown = canonical_or_none(quoted) or b""  # unknown arguments: nothing to quote
        preview = self._preview(shown.decode("utf-8", "surrogatepass"))
        if found.kind == "cycle":
            text = cycle_text(found.tools, found.threshold)
        else:
            told = (canonical_or_none(outcome) or b"").decode("utf-8", "surrogatepass")
            text = no_progress_text(call.tool, found.run_length, self._preview(told))
        reminder = _reminder(
            call,
            kind=found.kind,
            tier=tier,
            run_length=found.run_length,
            threshold=found.threshold,
            period=found.period,
            text=text,
            preview=preview,
        )
        return self._remind(events, self._wording.worded(reminder, found.tools), call, None)

    @staticmethod
    def parallel_duplicate(tool: str, key: bytes) -> EventSpec:
        return (
            PARALLEL_DUPLICATE_EVENT,
            {"gen_ai.tool.name": tool, "repeat_tool_guard.arguments_digest": key.hex()},
        )

    def _remind(
        self, events: list[EventSpec], reminder: Reminder, call: CountedCall, facts: dict[str, Any] | None
    ) -> Decision:
        """``events`` with the reminder's own event, its metric counted, the reminder for the harness."""
        reminder_event: dict[str, AttributeValue] = {
            "repeat_tool_guard.run_length": reminder.run_length,
            "repeat_tool_guard.threshold": reminder.threshold,
            "repeat_tool_guard.tier": reminder.tier,
            "repeat_tool_guard.reminder_text": reminder.text,
        }
        if call.call_id is not None:
            reminder_event["gen_ai.tool.call.id"] = call.call_id
        reminder_event["repeat_tool_guard.kind"] = reminder.kind
        if reminder.variant is not None:  # an experiment runs: its variant wherever the tier goes
            reminder_event[VARIANT] = reminder.variant
            if facts is not None:  # a repeat's call: its facts (the call's own dict, which later steps add to)
                facts[VARIANT] = reminder.variant
        events.append((REMINDER_EVENT, reminder_event))
        self._metrics.reminder(reminder.tool_name, reminder.tier, reminder.threshold, reminder.kind, reminder.variant)
        return Decision(events, [reminder], facts)

    def _preview(self, text: str) -> str:
        if self._redact is not None:
            text = redacted(self._redact, text)
        return shown_preview(text, self._config.arguments_preview_chars)


class Wording:
    """How a reminder is worded: the configured ``reminder_style``, or with ``reminder_variants`` the variant its
    run draws (:func:`otel_repeat_guard.core.reminders.variant_for`). The seed's texts are made first; another
    style rewords them, except a ``stop``, which keeps its firm text in every style."""

    __slots__ = ("_style", "_variants")

    def __init__(self, config: GuardConfig) -> None:
        self._style = config.reminder_style
        self._variants = config.reminder_variants

    def worded(self, reminder: Reminder, cycle_tools: tuple[str, ...] = ()) -> Reminder:
        """``reminder`` (seed-worded) in its style, with its variant when an experiment runs."""
        style = self._style
        variant = None
        if self._variants:
            variant = variant_for(reminder.agent_id, self._variants)
            style = variant
        if style == SEED and variant is None:
            return reminder  # the default: today's reminder, untouched
        if variant is not None:
            reminder = dataclasses.replace(reminder, variant=variant)
        if reminder.tier == "stop" or style == SEED:
            return reminder
        if style == REDIRECT:
            return dataclasses.replace(reminder, text=redirect_of(reminder, cycle_tools))
        return dataclasses.replace(reminder, text=_own_text(style, reminder))


def _own_text(style: Callable[[Reminder], str] | str, reminder: Reminder) -> str:
    """A team's own wording of ``reminder``; if the callable fails or returns no text, the seed's (logged)."""
    function = registered_style(style) if isinstance(style, str) else style
    try:
        if function is None:
            raise LookupError(f"no reminder style is registered as {style!r}")
        text = function(reminder)
        if isinstance(text, str) and text.strip():
            return text
        raise TypeError(f"the reminder style returned {type(text).__name__} {text!r:.40}, not a text")
    except Exception:
        logger.exception("repeat guard's reminder style %r failed; the reminder keeps the seed's wording", style)
        return reminder.text


def redacted(redact: Callable[[str], str], text: str) -> str:
    """The redactor's text; if it fails, a fixed marker: no unredacted text leaks, and only the
    preview is lost, never the detection."""
    try:
        shown = redact(text)
        if isinstance(shown, str):
            return shown
        raise TypeError(f"redact returned {type(shown).__name__}, not str")
    except Exception:
        logger.exception("repeat guard's redact= callable failed; the reminder quotes %s instead", REDACTION_FAILED)
        return REDACTION_FAILED


def call_event(
    run: Run, call: RequestedCall, counted: Decision | None, facts: Mapping[str, AttributeValue]
) -> EventSpec:
    """The ``repeat_tool_guard.call`` event of a call counted from a model's request (it has no tool span):
    everything the store keeps of a tool call, as the guard decided it."""
    attributes: dict[str, AttributeValue] = {"gen_ai.tool.name": call.tool_name, **run.facts, **facts}
    if call.call_id is not None:
        attributes["gen_ai.tool.call.id"] = call.call_id
    key = None if call.arguments is MISSING else arguments_key(call.arguments)
    if key is not None:
        attributes["repeat_tool_guard.arguments_digest"] = key.hex()
    length = 1
    for name, event in counted.events if counted is not None else ():
        if name == REPEAT_EVENT:
            length = int(event.get("repeat_tool_guard.run_length", 1))  # type: ignore[arg-type]
        elif name == REMINDER_EVENT and event.get("repeat_tool_guard.kind") == "repeat":
            attributes["repeat_tool_guard.tier"] = event["repeat_tool_guard.tier"]
            attributes["repeat_tool_guard.threshold"] = event["repeat_tool_guard.threshold"]
            if VARIANT in event:
                attributes[VARIANT] = event[VARIANT]
    attributes["repeat_tool_guard.run_length"] = length
    return CALL_EVENT, attributes
