"""Guard configuration: a frozen, validated value built in code, from a mapping, a file, or the environment."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_repeat_guard.core.policy import NONE, Policy, read_progress, read_tools
from otel_repeat_guard.core.reminders import SEED, ReminderStyle, check_style, checked_variants
from otel_repeat_guard.core.sources import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    env_fields,
    file_fields,
    is_int,
    mapping_fields,
    warn_unknown_variables,
)
from otel_repeat_guard.core.urls import redis_url_problem, safe_url

MAX_THRESHOLD = 100_000
"""The longest run length a threshold may name: a larger one could never fire in a real run."""
MAX_PREVIEW_CHARS = 1_000_000
MEMORY_STORE = "memory"
"""The default chain store: this process's memory."""
STORE_SCHEMES = ("redis://", "rediss://", "unix://")
"""What a shared chain store's URL may start with (redis-py's URL forms)."""
MAX_STORE_TIMEOUT_MS = 10_000
MAX_STORE_EXPIRY_SECONDS = 366 * 86_400


def _patterns(field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{field} must be a sequence of tool-name patterns, got {value!r}")
    patterns = tuple(value)
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{field} must hold non-empty strings, got {pattern!r} in {value!r}")
    return patterns


def _thresholds(value: object, field: str = "thresholds", *, may_be_empty: bool = False) -> tuple[int, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{field} must be a sequence of integers, got {value!r}")
    items = tuple(value)
    if not items and not may_be_empty:
        raise ValueError(f"{field} must not be empty, got ()")
    for item in items:
        if not is_int(item):
            raise ValueError(f"{field} must hold integers, got {item!r} in {value!r}")
        if item < 2:
            raise ValueError(f"{field} must be at least 2 (a run has two calls), got {item!r}")
        if item > MAX_THRESHOLD:
            raise ValueError(f"{field} must be at most {MAX_THRESHOLD:,}, got {item!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{field} must not repeat a value, got {value!r}")
    return tuple(sorted(items))


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """When to remind and which tools to watch.

    ``thresholds`` are the run lengths that fire a reminder (the first gentle, the rest
    detailed); ``include``/``exclude`` are tool-name patterns; ``arguments_preview_chars``
    bounds the arguments quoted in a reminder.

    Opt-in loop shapes, all off by default: ``cycle_thresholds`` (repetitions of a cycle of
    2 to ``max_cycle_period`` calls), ``no_progress_thresholds`` (run lengths of calls to one
    tool with changing arguments and the same outcome), ``collapse_parallel`` (identical calls
    made in one model step count once) and ``stop_at`` (the exact-repeat run length whose
    reminder is the firm ``stop`` tier; above every threshold). ``progress``: ``results`` makes a call
    extend its run only when its result is also the run's last call's; ``tools``: a policy per tool-name
    pattern (``core/policy.py``).

    ``log_events`` (on by default) also emits each event the guard puts on a span as an OpenTelemetry log
    event, and each loop as a ``gen_ai.evaluation.result``, when a ``LoggerProvider`` is configured.

    Wording: ``reminder_style`` (``seed``, ``redirect``, a registered style's name or a callable
    ``(Reminder) -> str``); ``reminder_variants`` (two or more styles' names: each run draws one).
    """

    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write",)
    arguments_preview_chars: int = 500
    cycle_thresholds: tuple[int, ...] = ()
    max_cycle_period: int = 4
    no_progress_thresholds: tuple[int, ...] = ()
    collapse_parallel: bool = False
    stop_at: int | None = None
    chain_store: str = dataclasses.field(default=MEMORY_STORE, repr=False)  # a URL may hold a password
    store_timeout_ms: int = 50
    store_expiry_seconds: int = 86_400
    remote_runs: bool | None = None
    progress: str = NONE
    tools: Any = ()
    """A mapping of tool-name patterns to their own thresholds, stop_at and progress (``core/policy.py``); once
    built, the entries read (a tuple of ``ToolPolicy``), the first whose pattern matches a tool applying to it."""
    log_events: bool = True
    reminder_style: ReminderStyle = SEED
    reminder_variants: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", _thresholds(self.thresholds))
        object.__setattr__(self, "include", _patterns("include", self.include))
        object.__setattr__(self, "exclude", _patterns("exclude", self.exclude))
        chars = self.arguments_preview_chars
        if not is_int(chars) or chars < 1:
            raise ValueError(f"arguments_preview_chars must be an integer >= 1, got {chars!r}")
        if chars > MAX_PREVIEW_CHARS:
            raise ValueError(f"arguments_preview_chars must be at most {MAX_PREVIEW_CHARS:,}, got {chars!r}")
        for field in ("cycle_thresholds", "no_progress_thresholds"):
            object.__setattr__(self, field, _thresholds(getattr(self, field), field, may_be_empty=True))
        period = self.max_cycle_period
        if not is_int(period) or not 2 <= period <= 8:
            raise ValueError(f"max_cycle_period must be an integer from 2 to 8, got {period!r}")
        if not isinstance(self.collapse_parallel, bool):
            raise ValueError(f"collapse_parallel must be true or false, got {self.collapse_parallel!r}")
        stop = self.stop_at
        if stop is not None and (not is_int(stop) or stop <= self.thresholds[-1] or stop > MAX_THRESHOLD):
            raise ValueError(
                f"stop_at must be an integer above every threshold (> {self.thresholds[-1]}) "
                f"and at most {MAX_THRESHOLD:,}, or None; got {stop!r}"
            )
        store = self.chain_store
        if not isinstance(store, str) or (store != MEMORY_STORE and not store.startswith(STORE_SCHEMES)):
            raise ValueError(
                f"chain_store must be {MEMORY_STORE!r} or a Redis URL starting with "
                f"{', '.join(STORE_SCHEMES)}; got {safe_url(store) if isinstance(store, str) else store!r}"
            )
        if store != MEMORY_STORE and (problem := redis_url_problem(store)) is not None:
            raise ValueError(f"chain_store is not a valid Redis URL ({problem}), got {safe_url(store)!r}")
        timeout = self.store_timeout_ms
        if not is_int(timeout) or not 1 <= timeout <= MAX_STORE_TIMEOUT_MS:
            raise ValueError(f"store_timeout_ms must be an integer from 1 to {MAX_STORE_TIMEOUT_MS:,}, got {timeout!r}")
        expiry = self.store_expiry_seconds
        if not is_int(expiry) or not 1 <= expiry <= MAX_STORE_EXPIRY_SECONDS:
            raise ValueError(
                f"store_expiry_seconds must be an integer from 1 to {MAX_STORE_EXPIRY_SECONDS:,}, got {expiry!r}"
            )
        if self.remote_runs is not None and not isinstance(self.remote_runs, bool):
            raise ValueError(f"remote_runs must be true, false or None, got {self.remote_runs!r}")
        object.__setattr__(self, "progress", read_progress("progress", self.progress))
        defaults = Policy(self.thresholds, self.stop_at, self.progress)
        object.__setattr__(self, "tools", read_tools(self.tools, defaults, _thresholds, MAX_THRESHOLD))
        if not isinstance(self.log_events, bool):
            raise ValueError(f"log_events must be true or false, got {self.log_events!r}")
        check_style(self.reminder_style)
        object.__setattr__(self, "reminder_variants", checked_variants(self.reminder_variants))

    @property
    def shared_store(self) -> bool:
        """Whether chains live outside this process (a Redis URL)."""
        return self.chain_store != MEMORY_STORE

    @property
    def follows_remote_runs(self) -> bool:
        """Whether a tool span with a remote parent belongs to the run its baggage names."""
        return self.shared_store if self.remote_runs is None else self.remote_runs

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> GuardConfig:
        """Build from a parsed YAML/JSON/TOML mapping; an unknown key is an error naming the closest known one."""
        return cls(**mapping_fields(mapping))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> GuardConfig:
        """Build from a ``.toml``, ``.yaml``/``.yml`` (needs the ``yaml`` extra) or ``.json`` file holding the
        mapping ``from_mapping`` takes. Every error is a ``ValueError`` naming the file."""
        fields, where = file_fields(path)
        try:
            return cls(**fields)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GuardConfig:
        """Build from ``OTEL_REPEAT_GUARD_*`` variables; unset ones keep their defaults.

        Lists are comma-separated, spaces around items ignored; an empty item (``3,,5``), an
        empty value, or a number that is not plain ASCII digits (``1_000``, ``٣``) is a
        ``ValueError`` naming the variable. ``-`` is an explicitly empty list. ``chain_store``
        also answers to ``OTEL_REPEAT_GUARD_STORE``.

        ``OTEL_REPEAT_GUARD_CONFIG_FILE`` names a file read first, as ``from_file`` reads it; each variable
        set overrides the file's value for its field.
        """
        env = os.environ if environ is None else environ
        if not isinstance(env, Mapping):
            raise ValueError(f"environ must be a mapping of variable names to strings, got {type(env).__name__}")
        odd = next((k for k, v in env.items() if str(k).startswith(ENV_PREFIX) and not isinstance(v, str)), None)
        if odd is not None:  # a mapping loaded from YAML or JSON: 3, not "3"
            raise ValueError(f"{odd} must be a string, as environment variables are, got {env[odd]!r}")
        warn_unknown_variables(env)
        fields: dict[str, Any] = {}
        where = ""
        path = env.get(CONFIG_FILE_ENV)
        if path is not None:
            if not path.strip():
                raise ValueError(f"{CONFIG_FILE_ENV} is set but empty: unset it, or name a .toml, .yaml or .json file")
            try:
                fields, where = file_fields(path.strip())
            except ValueError as error:
                raise ValueError(f"{CONFIG_FILE_ENV}: {error}") from None
        kwargs, variables = env_fields(env)  # each field given, and the variable it came from
        try:
            return cls(**{**fields, **kwargs})
        except ValueError as error:  # it names the field (its first word): name the variable or file it came from
            field = str(error).partition(" ")[0].partition("[")[0]  # tools['x'].thresholds ...: tools
            named = variables.get(field, where if field in fields else None)
            raise error if named is None else ValueError(f"{named}: {error}") from None
