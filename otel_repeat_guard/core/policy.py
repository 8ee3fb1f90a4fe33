"""Per-tool policy and progress-aware repeats: which thresholds, stop and progress rule apply to a tool's calls.

``GuardConfig.tools`` maps tool-name patterns (``*`` any run of characters, as in ``include``) to their own
``thresholds``, ``stop_at`` and ``progress``; the first pattern that matches a tool wins, and the global values
apply to what an entry leaves out and to tools no pattern matches. ``progress: results`` makes a call extend
its run only when its result is the run's last call's too (:func:`with_result`). Pure: no OTel imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_repeat_guard.core.patterns import PatternSet

NONE: Final = "none"
RESULTS: Final = "results"
PROGRESS_VALUES: Final = (NONE, RESULTS)
"""``none`` (the default): a call repeats the run's last on its tool and arguments; ``results``: and its result."""
_ENTRY_KEYS: Final = {"thresholds": "thresholds", "stop_at": "stop_at", "stopAt": "stop_at", "progress": "progress"}
CACHE_LIMIT: Final = 4096


def read_progress(name: str, value: object) -> str:
    """``value`` as a progress rule, else a ``ValueError`` naming ``name``."""
    word = value.strip().lower() if isinstance(value, str) else None
    if word not in PROGRESS_VALUES:
        raise ValueError(f"{name} must be one of {', '.join(PROGRESS_VALUES)}, got {value!r}")
    return str(word)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """One entry of ``tools``, as given: None where it takes the global value (``sets_stop``: whether it gives
    ``stop_at``, which may be None, no stop for these tools)."""

    pattern: str
    thresholds: tuple[int, ...] | None = None
    stop_at: int | None = None
    sets_stop: bool = False
    progress: str | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """What applies to one tool's calls: the reminders' run lengths, the stop, and the progress rule."""

    thresholds: tuple[int, ...]
    stop_at: int | None
    progress: str


ReadThresholds = Callable[[object, str], tuple[int, ...]]
"""The configuration's own check of a thresholds value (sorted, or a ``ValueError`` naming the field)."""


def read_tools(
    value: object, defaults: Policy, read_thresholds: ReadThresholds, max_stop: int
) -> tuple[ToolPolicy, ...]:
    """``tools`` checked: a mapping of patterns to entries (or the entries read before, checked again against
    ``defaults``, the global values). Every error is a ``ValueError`` naming ``tools``, the pattern and the key."""
    entries: list[tuple[object, object]]  # any keys and values, checked below (typed so: the compiled build checks)
    if isinstance(value, tuple) and all(isinstance(entry, ToolPolicy) for entry in value):
        entries = [(entry.pattern, _given(entry)) for entry in value]  # () too: the default, no entry
    elif isinstance(value, Mapping) and value:
        entries = list(value.items())
    elif isinstance(value, Mapping):
        raise ValueError("tools must not be empty: leave it unset for no per-tool policy, got {}")
    else:
        raise ValueError(f"tools must map tool-name patterns to settings, got {value!r}")
    read = []
    for pattern, given in entries:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"tools patterns must be non-empty strings, got {pattern!r}")
        where = f"tools[{pattern!r}]"
        if not isinstance(given, Mapping) or not given:
            raise ValueError(f"{where} must map some of thresholds, stop_at, progress to values, got {given!r}")
        read.append(_entry(pattern, given, defaults, read_thresholds, max_stop))
    return tuple(read)


def _given(entry: ToolPolicy) -> dict[str, Any]:
    given: dict[str, Any] = {}
    if entry.thresholds is not None:
        given["thresholds"] = entry.thresholds
    if entry.sets_stop:
        given["stop_at"] = entry.stop_at
    if entry.progress is not None:
        given["progress"] = entry.progress
    return given


def _entry(
    pattern: str, given: Mapping[Any, Any], defaults: Policy, read_thresholds: ReadThresholds, max_stop: int
) -> ToolPolicy:
    where = f"tools[{pattern!r}]"
    fields: dict[str, Any] = {}
    for key, setting in given.items():
        field = _ENTRY_KEYS.get(key) if isinstance(key, str) else None
        if field is None:
            import difflib  # noqa: PLC0415 - here: a Claude Code hook process reads its configuration per call

            close = difflib.get_close_matches(key, _ENTRY_KEYS, n=1) if isinstance(key, str) else []
            hint = f"did you mean {close[0]!r}?" if close else "known keys: thresholds, stop_at, progress"
            raise ValueError(f"{where} has an unknown key {key!r} ({hint})")
        if field in fields:
            raise ValueError(f"{where} gives stop_at twice (as stop_at and stopAt)")
        fields[field] = setting
    thresholds = read_thresholds(fields["thresholds"], f"{where}.thresholds") if "thresholds" in fields else None
    progress = read_progress(f"{where}.progress", fields["progress"]) if "progress" in fields else None
    stop = fields.get("stop_at")
    if stop is not None and (not isinstance(stop, int) or isinstance(stop, bool)):  # before a typed field holds it
        raise ValueError(f"{where}.stop_at must be an integer or None, got {stop!r}")
    entry = ToolPolicy(pattern, thresholds, stop, "stop_at" in fields, progress)
    resolve(entry, defaults, where, max_stop)  # the combination, checked with the global values
    return entry


def resolve(entry: ToolPolicy, defaults: Policy, where: str = "tools", max_stop: int = 100_000) -> Policy:
    """What applies to the tools ``entry`` matches. A stop of its own drops the global thresholds at or above it
    (the run ends there); at least one reminder must come before a stop, and a stop must be above the entry's own
    thresholds, whichever of the two it took from the global values (a ``ValueError`` naming ``where`` otherwise)."""
    stop = entry.stop_at if entry.sets_stop else defaults.stop_at
    thresholds = defaults.thresholds if entry.thresholds is None else entry.thresholds
    if entry.thresholds is None and stop is not None:
        thresholds = tuple(t for t in thresholds if t < stop)
    if stop is not None:
        if not entry.sets_stop and stop <= thresholds[-1]:
            raise ValueError(
                f"{where}.thresholds must all be below the global stop_at {stop}, got {list(thresholds)}: "
                "set stop_at in the entry too (null for no stop)"
            )
        if not thresholds or stop <= thresholds[-1] or stop > max_stop:
            raise ValueError(
                f"{where}.stop_at must be above {'its thresholds' if entry.thresholds else 'the first threshold'} "
                f"{list(entry.thresholds or defaults.thresholds[:1])} and at most {max_stop:,}, got {stop!r}"
            )
    return Policy(thresholds, stop, defaults.progress if entry.progress is None else entry.progress)


def with_result(key: bytes, result: bytes) -> bytes:
    """The key a call is chained by under ``progress: results``: its arguments' key and its result's digest, so
    that it repeats the run's last call only when both are the same (:func:`~otel_repeat_guard.core.rules.same_call`
    compares it as it compares an arguments key, in this process and in Redis)."""
    return key + result


class PolicyTable:
    """Each tool's :class:`Policy`: the first entry whose pattern matches it, else the global values. The answers
    so far are kept by tool name (past ``CACHE_LIMIT`` names it starts afresh), so a known tool costs a lookup."""

    __slots__ = ("_default", "_globs", "_policies", "answers")

    def __init__(self, entries: tuple[ToolPolicy, ...], defaults: Policy) -> None:
        self._globs = tuple(PatternSet([entry.pattern]) for entry in entries)
        self._policies = tuple(resolve(entry, defaults) for entry in entries)
        self._default = defaults
        self.answers: dict[str, Policy] = {}

    @property
    def policies(self) -> tuple[Policy, ...]:
        """Every policy that may apply: the global values', then each entry's."""
        return (self._default, *self._policies)

    def __getitem__(self, tool: str) -> Policy:
        answer = self.answers.get(tool)
        if answer is not None:
            return answer
        answer = self._default
        for glob, policy in zip(self._globs, self._policies, strict=True):
            if glob.fullmatch(tool):
                answer = policy
                break
        if len(self.answers) >= CACHE_LIMIT:
            self.answers.clear()
        self.answers[tool] = answer
        return answer

    def compares_results(self) -> bool:
        """Whether any tool's calls compare results (``progress: results`` globally or in an entry)."""
        return any(policy.progress == RESULTS for policy in self.policies)
