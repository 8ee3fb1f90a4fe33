"""Reminder values and their texts: what the harness hands back to the model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Tier = Literal["gentle", "detailed", "stop"]
Kind = Literal["repeat", "cycle", "no_progress"]

REMINDER_SOURCE: Mapping[str, str] = MappingProxyType({"kind": "plugin", "plugin": "repeat-tool-guard"})


@dataclass(frozen=True, slots=True)
class Reminder:
    """An advisory nudge for one agent whose tool-call run reached a threshold.

    ``run_length`` is how many calls the loop holds so far; ``threshold`` is the configured
    value that fired. For the exact-repeat chain the two are always equal (thresholds are
    exact run lengths). They are kept apart because other loop shapes count differently: a
    cycle of period p fires at a number of repetitions k while its run holds p x k calls.
    ``tier`` is ``stop`` at ``GuardConfig.stop_at``: adapters then end the run.
    """

    agent_id: str
    agent_name: str | None
    tool_name: str
    run_length: int
    threshold: int
    tier: Tier
    text: str
    arguments_preview: str
    trace_id: str
    span_id: str
    source: Mapping[str, str] = field(default_factory=lambda: REMINDER_SOURCE, hash=False)
    kind: Kind = "repeat"
    """The loop shape: ``repeat`` (identical calls), ``cycle`` or ``no_progress``."""
    period: int = 1
    """A cycle's period (how many calls it repeats); 1 for the other kinds."""


def tier_for(threshold: int, thresholds: tuple[int, ...]) -> Tier:
    """The first (lowest) threshold is gentle; every later one is detailed."""
    return "gentle" if threshold == thresholds[0] else "detailed"


def tiers_of(thresholds: tuple[int, ...], stop_at: int | None = None) -> dict[int, Tier]:
    """The tier each run length fires (:func:`tier_for`), and ``stop`` at ``stop_at``: lengths not in it fire none."""
    tiers = {threshold: tier_for(threshold, thresholds) for threshold in thresholds}
    if stop_at is not None:
        tiers[stop_at] = "stop"
    return tiers


def repeat_text(tier: Tier, tool_name: str, run_length: int, preview: str) -> str:
    """The text of an exact repeat's reminder at ``tier``: :func:`stop_text` at stop, else :func:`reminder_text`."""
    return stop_text(tool_name, run_length) if tier == "stop" else reminder_text(tier, tool_name, run_length, preview)


def shown_preview(text: str, limit: int) -> str:
    """:func:`arguments_preview` as a reminder quotes it: a lone surrogate (``'\\ud83d'`` in ASCII arguments), which
    no exporter writes as is, shown as its escape."""
    preview = arguments_preview(text, limit)
    try:
        preview.encode("utf-8")
    except UnicodeEncodeError:
        return preview.encode("utf-8", "backslashreplace").decode("utf-8")
    return preview


def arguments_preview(canonical: str, limit: int) -> str:
    """The first ``limit`` characters, plus a marker saying how many were left out."""
    omitted = len(canonical) - limit
    if omitted <= 0:
        return canonical
    return f"{canonical[:limit]}… [{omitted} more characters omitted]"


TOOL_NAME_CHARS = 200
"""How much of a tool's name a text quotes: a name is a model's own output, and one of a megabyte must not go back
into every request of its run. Longer ones are cut as :func:`arguments_preview` cuts arguments."""


def _named(tool_name: str) -> str:
    return arguments_preview(tool_name, TOOL_NAME_CHARS)


def reminder_text(tier: Tier, tool_name: str, run_length: int, preview: str) -> str:
    """The message for the model, in the gentle or the detailed form."""
    tool_name = _named(tool_name)
    if tier == "gentle":
        return (
            f"You have called `{tool_name}` with identical arguments {run_length} times in a row. "
            "Before calling it again, analyze the result you already have, "
            "then either change your approach or conclude."
        )
    return (
        f"You have called `{tool_name}` {run_length} times in a row with identical arguments:\n"
        f"{preview}\n"
        "These repeated calls made no progress: each one returned what you already had. "
        "Do not call it again with the same arguments. Re-read the last result, then change your "
        "approach (different arguments or a different tool). If you have gathered enough evidence, "
        "it is fine to stop calling tools and give your answer now."
    )


def stop_text(tool_name: str, run_length: int) -> str:
    """The firm text at ``stop_at``: stop calling tools, answer now."""
    tool_name = _named(tool_name)
    return (
        f"You have called `{tool_name}` with identical arguments {run_length} times in a row, after earlier "
        "reminders. Stop calling tools now. Answer with the information you already have, and say what is "
        "missing if it is not enough."
    )


def cycle_text(tools: tuple[str, ...], repetitions: int) -> str:
    """A cycle: its tools in order and how many times the sequence came back."""
    sequence = " → ".join(f"`{_named(tool)}`" for tool in tools)
    return (
        f"You are going in circles: the sequence {sequence} has repeated {repetitions} times in a row, "
        "with the same arguments each time. Repeating it will give the same results again. Re-read what "
        "you already have, then change your approach or conclude."
    )


def no_progress_text(tool_name: str, run_length: int, outcome_preview: str) -> str:
    """No progress: the shared outcome, already truncated by the caller."""
    tool_name = _named(tool_name)
    return (
        f"You have called `{tool_name}` {run_length} times in a row with different arguments, and every "
        f"call returned the same result:\n{outcome_preview}\n"
        "Varying the arguments this way is not making progress. Try a different approach or tool, or "
        "conclude with what you have."
    )


class RepeatGuardStop(Exception):
    """Raised by a framework adapter to end the agent run at a ``stop`` reminder (``GuardConfig.stop_at``).

    The guard itself blocks nothing; adapters end the run in the framework's natural way, and where
    that is an exception, it is this one. ``reminder`` says which tool looped, how often, and why.
    """

    def __init__(self, reminder: Reminder) -> None:
        super().__init__(reminder.text)
        self.reminder = reminder
