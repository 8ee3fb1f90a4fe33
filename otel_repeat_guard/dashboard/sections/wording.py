"""What the loop figures are called under each loop kind."""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_repeat_guard.store.records import REPEAT


@dataclass(frozen=True, slots=True)
class Wording:
    """What the loop figures are called under a loop kind: the calls counted, their time, the longest loop."""

    calls: str
    calls_help: str
    time: str
    longest: str | None  # None: the kind has no length (a parallel duplicate)


KIND_LABELS = {
    None: "All kinds",
    "repeat": "Repeat (identical calls in a row)",
    "cycle": "Cycle",
    "no_progress": "No progress",
    "parallel_duplicate": "Parallel duplicate",
}
WORDING: dict[str | None, Wording] = {
    "repeat": Wording("Repeated calls", "Calls with run length 2 or more.", "Time in repeated calls", "Longest run"),
    None: Wording(
        "Calls in loops",
        "Calls with a detection of any kind, each counted once: position 2 or more in a run of identical calls, "
        "completing a copy of a cycle, a no-progress call, or a parallel duplicate.",
        "Time in loop calls",
        "Longest run of identical calls",
    ),
    "cycle": Wording(
        "Calls completing a cycle",
        "Calls that complete a copy of a cycle, from its second copy on.",
        "Time in those calls",
        "Longest cycle (calls)",
    ),
    "no_progress": Wording(
        "Calls without progress",
        "Calls of a no-progress run from its second call on: the same tool, other arguments, the same outcome.",
        "Time in calls without progress",
        "Longest no-progress run",
    ),
    "parallel_duplicate": Wording(
        "Parallel duplicates",
        "Extra copies of an identical call asked for in the same model step.",
        "Time in parallel duplicates",
        None,
    ),
}


def wording(kind: str | None, kinds: tuple[str, ...]) -> Wording:
    """The figures' names for the chosen kind; a store with repeats only reads exactly as before kinds."""
    return WORDING[REPEAT if kind is None and set(kinds) <= {REPEAT} else kind]


def plural(count: int, one: str, many: str | None = None) -> str:
    """``count`` and its noun, singular for one: "1 repeated call", "2 repeated calls" (``many``: the plural
    when it is not ``one`` + "s")."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


_ONE = {
    "Repeated calls": "repeated call",
    "Calls in loops": "call in a loop",
    "Calls completing a cycle": "call completing a cycle",
    "Calls without progress": "call without progress",
    "Parallel duplicates": "parallel duplicate",
}


def loop_calls(count: int, words: Wording) -> str:
    """``count`` of the loop kind's calls: "1 repeated call", "3 calls in loops"."""
    return plural(count, _ONE[words.calls], words.calls.lower())


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


def plain(text: str) -> str:
    """``text`` for ``st.markdown`` as typed: every character Markdown (or Streamlit's directives) would read escaped."""
    return _MARKDOWN.sub(r"\\\1", text)
