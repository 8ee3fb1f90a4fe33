"""Each loop the guard found, as a GenAI evaluation of the tool span that completed it: the
``gen_ai.evaluation.result`` event of the GenAI semantic conventions, emitted through the Logs API beside the
guard's own events (:mod:`otel_repeat_guard.decide.log_events`).

A repeat, cycle or no-progress event on a span becomes one evaluation: its name ``repeat_tool_guard.<kind>``,
its score the run length (for a cycle, its repetitions), its label the tier the loop has reached (``none``
below the first threshold; ``stop`` from ``stop_at``), its explanation the reminder's text when one fired at
this call, else a one-line summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.reminders import TOOL_NAME_CHARS, arguments_preview
from otel_repeat_guard.decide.recorder import CYCLE_EVENT, NO_PROGRESS_EVENT, REMINDER_EVENT, REPEAT_EVENT
from otel_repeat_guard.spans.span_events import EventSpec

EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EXPLANATION: Final = "gen_ai.evaluation.explanation"
NO_TIER: Final = "none"
"""The label of a loop below its first threshold."""
_KINDS: Final = {REPEAT_EVENT: "repeat", CYCLE_EVENT: "cycle", NO_PROGRESS_EVENT: "no_progress"}


def reached(value: int, thresholds: tuple[int, ...], stop_at: int | None = None) -> str:
    """The tier a loop of ``value`` (run length, or a cycle's repetitions) has reached: ``none`` below the first
    threshold, ``gentle`` from it, ``detailed`` from the next, ``stop`` from ``stop_at``."""
    if stop_at is not None and value >= stop_at:
        return "stop"
    if not thresholds or value < thresholds[0]:
        return NO_TIER
    return "gentle" if len(thresholds) == 1 or value < thresholds[1] else "detailed"


class Evaluations:
    """Words a decision's loop events as evaluations, by the guard's configuration."""

    __slots__ = ("_config",)

    def __init__(self, config: GuardConfig) -> None:
        self._config = config

    def of(self, events: Sequence[EventSpec]) -> list[EventSpec]:
        """The ``gen_ai.evaluation.result`` events of ``events`` (a decision's), one per loop event in it."""
        found: list[EventSpec] = []
        for name, attributes in events:
            kind = _KINDS.get(name)
            if kind is not None:
                found.append((EVALUATION_EVENT, self._evaluation(kind, attributes, events)))
        return found

    def _evaluation(
        self, kind: str, event: Mapping[str, AttributeValue], events: Sequence[EventSpec]
    ) -> dict[str, AttributeValue]:
        config = self._config
        if kind == "repeat":
            value = _int(event.get("repeat_tool_guard.run_length"))
            label = reached(value, config.thresholds, config.stop_at)
            tool = arguments_preview(str(event.get("gen_ai.tool.name", "")), TOOL_NAME_CHARS)  # a model's output
            summary = f"`{tool}` called {value} times in a row with the same arguments"
        elif kind == "cycle":
            value = _int(event.get("repeat_tool_guard.repetitions"))
            label = reached(value, config.cycle_thresholds)
            tools = event.get("repeat_tool_guard.cycle_tools") or ()
            shown = " → ".join(str(tool) for tool in tools) if isinstance(tools, (list, tuple)) else str(tools)
            summary = f"the sequence {shown} repeated {value} times in a row"
        else:
            value = _int(event.get("repeat_tool_guard.run_length"))
            label = reached(value, config.no_progress_thresholds)
            summary = f"{value} calls in a row to one tool with changing arguments and the same outcome"
        explanation = _reminder_text(kind, events) or summary
        return {
            EVALUATION_NAME: f"repeat_tool_guard.{kind}",
            SCORE_VALUE: float(value),
            SCORE_LABEL: label,
            EXPLANATION: explanation,
        }


def _reminder_text(kind: str, events: Sequence[EventSpec]) -> str | None:
    """The text of the reminder of ``kind`` among ``events``, if one fired."""
    for name, attributes in events:
        if name == REMINDER_EVENT and attributes.get("repeat_tool_guard.kind", "repeat") == kind:
            text = attributes.get("repeat_tool_guard.reminder_text")
            if isinstance(text, str):
                return text
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
