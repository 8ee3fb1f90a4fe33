"""Reminder values and their texts: what the harness hands back to the model."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
    variant: str | None = None
    """The wording variant its run drew (``GuardConfig.reminder_variants``); None when no experiment runs."""


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


def redirect_text(tier: Tier, tool_name: str, run_length: int) -> str:
    """The ``redirect`` style's repeat text: no arguments quoted, what to do next instead of what not to do."""
    tool_name = _named(tool_name)
    if tier == "gentle":
        return (
            f"`{tool_name}` has now run {run_length} times in a row and keeps giving the same result. "
            "Use the result you already have: take a different approach, or conclude."
        )
    return (
        f"`{tool_name}` has now run {run_length} times in a row and has given the same result each time. "
        "Work from the result you already have. Next, take a different approach (another tool, or a different "
        "question), or conclude and give your answer now."
    )


def redirect_cycle_text(tools: tuple[str, ...], repetitions: int) -> str:
    """The ``redirect`` style's cycle text: the tools in order, no arguments."""
    sequence = " → ".join(f"`{_named(tool)}`" for tool in tools)
    return (
        f"The sequence {sequence} has now run {repetitions} times in a row and gives the same results. "
        "Use the results you already have: take a different approach, or conclude."
    )


def redirect_no_progress_text(tool_name: str, run_length: int) -> str:
    """The ``redirect`` style's no-progress text: no outcome quoted."""
    tool_name = _named(tool_name)
    return (
        f"`{tool_name}` has now run {run_length} times in a row and returned the same result each time. "
        "Use the result you already have: take a different approach, or conclude."
    )


def redirect_of(reminder: Reminder, cycle_tools: tuple[str, ...] = ()) -> str:
    """``reminder`` (not a ``stop``: that keeps its firm text in every style) in the ``redirect`` wording."""
    if reminder.kind == "cycle":
        return redirect_cycle_text(cycle_tools or (reminder.tool_name,), reminder.threshold)
    if reminder.kind == "no_progress":
        return redirect_no_progress_text(reminder.tool_name, reminder.run_length)
    return redirect_text(reminder.tier, reminder.tool_name, reminder.run_length)


ReminderStyle = str | Callable[[Reminder], str]
"""A reminder's wording: a style's name (``seed``, ``redirect`` or one registered), or a callable that words a
:class:`Reminder` (its ``text`` holds the seed wording, its ``arguments_preview`` the redacted, bounded arguments)."""
SEED = "seed"
REDIRECT = "redirect"
BUILT_IN_STYLES = (SEED, REDIRECT)
_REGISTERED: dict[str, Callable[[Reminder], str]] = {}
MAX_STYLE_NAME = 64
"""The longest style name: it travels on span events, metric attributes and store rows."""


def register_reminder_style(name: str, style: Callable[[Reminder], str]) -> None:
    """Register ``style`` under ``name``, so ``reminder_style`` and ``reminder_variants`` may name it (in Python,
    a file or the environment). Register before the guard's configuration is built. ``name`` is 1 to 64
    letters, digits, ``_``, ``-`` or ``.``, and not a built-in style's; registering a name again replaces it."""
    if not isinstance(name, str) or not style_name_ok(name):
        raise ValueError(
            f"reminder style name must be 1 to {MAX_STYLE_NAME} letters, digits, '_', '-' or '.', got {name!r}"
        )
    if name in BUILT_IN_STYLES:
        raise ValueError(f"reminder style name {name!r} is a built-in style's: choose another")
    if not callable(style):
        raise ValueError(f"reminder style {name!r} must be a callable (Reminder) -> str, got {style!r}")
    _REGISTERED[name] = style


def style_name_ok(name: str) -> bool:
    """Whether ``name`` may name a style (see :func:`register_reminder_style`)."""
    return 0 < len(name) <= MAX_STYLE_NAME and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name)


def known_styles() -> tuple[str, ...]:
    """Every style name a setting may use: the built-in ones, then the registered ones."""
    return (*BUILT_IN_STYLES, *sorted(_REGISTERED))


def registered_style(name: str) -> Callable[[Reminder], str] | None:
    """The callable registered under ``name``, or None (a built-in name, or no such style)."""
    return _REGISTERED.get(name)


def _unknown_style(field: str, value: object) -> ValueError:
    known = ", ".join(known_styles())
    return ValueError(
        f"{field} names no known reminder style, got {value!r} (known: {known}; "
        "register your own with otel_repeat_guard.register_reminder_style before configuring)"
    )


def check_style(style: object) -> None:
    """``reminder_style``: a known style's name or a callable ``(Reminder) -> str``."""
    if isinstance(style, str):
        if style not in known_styles():
            raise _unknown_style("reminder_style", style)
    elif not callable(style):
        raise ValueError(f"reminder_style must be a style's name or a callable (Reminder) -> str, got {style!r}")


def checked_variants(value: object) -> tuple[str, ...]:
    """``reminder_variants``: no experiment (empty), or two or more distinct known styles' names."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"reminder_variants must be a sequence of reminder style names, got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or name not in known_styles():
            raise _unknown_style("reminder_variants", name)
    if len(names) == 1:
        raise ValueError(f"reminder_variants must name two or more styles to compare (or none), got {value!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"reminder_variants must not repeat a style, got {value!r}")
    return names


def variant_for(run_key: str, variants: tuple[str, ...]) -> str:
    """The variant of the run keyed ``run_key``: from a stable hash of the key (BLAKE2b, never Python's
    ``hash()``, which changes per process), so every reminder of a run, in any process or replay, has the same.
    :mod:`hashlib` is imported here: a Claude Code hook process, which never draws a variant, is spared it."""
    import hashlib  # noqa: PLC0415 - see above

    digest = hashlib.blake2b(run_key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return variants[int.from_bytes(digest, "big") % len(variants)]


class RepeatGuardStop(Exception):
    """Raised by a framework adapter to end the agent run at a ``stop`` reminder (``GuardConfig.stop_at``).

    The guard itself blocks nothing; adapters end the run in the framework's natural way, and where
    that is an exception, it is this one. ``reminder`` says which tool looped, how often, and why.
    """

    def __init__(self, reminder: Reminder) -> None:
        super().__init__(reminder.text)
        self.reminder = reminder
