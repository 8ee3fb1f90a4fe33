"""Guard configuration: a frozen, validated value built in code, from a mapping, a file, or the environment."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_repeat_guard.core.policy import NONE, Policy, read_progress, read_tools
from otel_repeat_guard.core.reminders import SEED, ReminderStyle, check_style, checked_variants
from otel_repeat_guard.core.urls import redis_url_problem, safe_url

logger = logging.getLogger("otel_repeat_guard")

ENV_PREFIX = "OTEL_REPEAT_GUARD_"
MAX_THRESHOLD = 100_000
"""The longest run length a threshold may name: a larger one could never fire in a real run."""
MAX_PREVIEW_CHARS = 1_000_000
EMPTY_LIST = "-"
"""An environment list variable set to this is an explicitly empty list (``OTEL_REPEAT_GUARD_EXCLUDE=-``:
exclude nothing); an empty value is an error, not a silent way to drop the default."""
_DIGITS = re.compile(r"-?[0-9]+")
_FIELDS = (
    "thresholds",
    "include",
    "exclude",
    "arguments_preview_chars",
    "cycle_thresholds",
    "max_cycle_period",
    "no_progress_thresholds",
    "collapse_parallel",
    "stop_at",
    "chain_store",
    "store_timeout_ms",
    "store_expiry_seconds",
    "remote_runs",
    "progress",
    "tools",
    "log_events",
    "reminder_style",
    "reminder_variants",
)
_MAPPING_KEYS = {
    **{field: field for field in _FIELDS},
    **{"".join(w.title() if i else w for i, w in enumerate(field.split("_"))): field for field in _FIELDS},
}
"""Each field by its snake_case and its camelCase name (``argumentsPreviewChars``, ``stopAt``, ...)."""
_INT_LISTS = ("thresholds", "cycle_thresholds", "no_progress_thresholds")
_INTS = ("arguments_preview_chars", "max_cycle_period", "stop_at", "store_timeout_ms", "store_expiry_seconds")
_BOOLS = ("collapse_parallel", "remote_runs", "log_events")
_BOOLEANS = {
    **dict.fromkeys(("true", "1", "yes", "on"), True),
    **dict.fromkeys(("false", "0", "no", "off"), False),
}
"""The words a boolean setting is read from, in any case: the same in a file and in the environment."""
CONFIG_FILE_ENV = ENV_PREFIX + "CONFIG_FILE"
"""A TOML, YAML or JSON file of settings that ``from_env`` reads first; the variables override it."""
MAX_CONFIG_FILE_BYTES = 1_000_000
_FILE_KINDS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}
MEMORY_STORE = "memory"
"""The default chain store: this process's memory."""
STORE_SCHEMES = ("redis://", "rediss://", "unix://")
"""What a shared chain store's URL may start with (redis-py's URL forms)."""
_ENV_ALIASES = {"chain_store": ENV_PREFIX + "STORE"}
"""Shorter environment names some fields also answer to (setting both to different values is an error)."""
MAX_STORE_TIMEOUT_MS = 10_000
MAX_STORE_EXPIRY_SECONDS = 366 * 86_400
KNOWN_VARIABLES = frozenset(
    [ENV_PREFIX + field.upper() for field in _FIELDS]
    + list(_ENV_ALIASES.values())
    + [
        ENV_PREFIX + name
        for name in (  # read outside GuardConfig: setup, the store, the dashboard, the compose stack
            *(
                "ENABLED",
                "CONFIG_FILE",
                "CLIENT_ADAPTERS",
                "DB",
                "TRACE_URL",
                "BIND",
                "DASHBOARD_STORE",
                "PORT_SETTING",
                "SHUTDOWN_TIMEOUT_S",
            ),
            *("PURE", "COMPILE"),  # the wheel's build hook (hatch_build.py)
            *("CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD", "CLICKHOUSE_PASSWORD_FILE"),
            *(
                "BENCH_BUILD",
                "EXPECT_BUILD",
                "REQUIRE_COMPILED",
                "REQUIRE_BACKENDS",
                "REQUIRE_FRAMEWORKS",
                "INTEGRATION_GROUP",
            ),  # tests'
            *("TRAJECTORIES", "SPAN_DUMP_DIR"),
        )
    ]
)
"""Every ``OTEL_REPEAT_GUARD_*`` variable the package, its tests and its benchmarks read."""
_warned_variables: set[str] = set()


def warn_unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn once per name of an ``OTEL_REPEAT_GUARD_*`` variable nothing reads (a typo such as ``..._THRESHOLD``
    would otherwise leave the default in effect without a word), naming the known one it is closest to. The
    names warned of now."""
    env = os.environ if environ is None else environ
    unknown = sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in KNOWN_VARIABLES)
    fresh = [name for name in unknown if name not in _warned_variables]
    for name in fresh:
        _warned_variables.add(name)
        close = difflib.get_close_matches(name, KNOWN_VARIABLES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        logger.warning("repeat guard: %s is not a variable it reads, so it is ignored%s", name, hint)
    return fresh


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_boolean(name: str, value: object) -> bool:
    """The one reading of a boolean setting, from a file, a mapping or the environment: ``True``/``False``,
    1/0, or the words true/false, 1/0, yes/no, on/off in any case (so YAML's ``yes`` and the environment's
    ``yes`` agree). Anything else is a ``ValueError`` naming ``name`` and the value."""
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return value == 1
    word = _BOOLEANS.get(value.strip().lower()) if isinstance(value, str) else None
    if word is None:
        raise ValueError(f"{name} must be true or false (or 1/0, yes/no, on/off), got {value!r}")
    return word


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
        if not _is_int(item):
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
        if not _is_int(chars) or chars < 1:
            raise ValueError(f"arguments_preview_chars must be an integer >= 1, got {chars!r}")
        if chars > MAX_PREVIEW_CHARS:
            raise ValueError(f"arguments_preview_chars must be at most {MAX_PREVIEW_CHARS:,}, got {chars!r}")
        for field in ("cycle_thresholds", "no_progress_thresholds"):
            object.__setattr__(self, field, _thresholds(getattr(self, field), field, may_be_empty=True))
        period = self.max_cycle_period
        if not _is_int(period) or not 2 <= period <= 8:
            raise ValueError(f"max_cycle_period must be an integer from 2 to 8, got {period!r}")
        if not isinstance(self.collapse_parallel, bool):
            raise ValueError(f"collapse_parallel must be true or false, got {self.collapse_parallel!r}")
        stop = self.stop_at
        if stop is not None and (not _is_int(stop) or stop <= self.thresholds[-1] or stop > MAX_THRESHOLD):
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
        if not _is_int(timeout) or not 1 <= timeout <= MAX_STORE_TIMEOUT_MS:
            raise ValueError(f"store_timeout_ms must be an integer from 1 to {MAX_STORE_TIMEOUT_MS:,}, got {timeout!r}")
        expiry = self.store_expiry_seconds
        if not _is_int(expiry) or not 1 <= expiry <= MAX_STORE_EXPIRY_SECONDS:
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
        return cls(**_mapping_fields(mapping))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> GuardConfig:
        """Build from a ``.toml``, ``.yaml``/``.yml`` (needs the ``yaml`` extra) or ``.json`` file holding the
        mapping ``from_mapping`` takes. Every error is a ``ValueError`` naming the file."""
        fields, where = _file_fields(path)
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
                fields, where = _file_fields(path.strip())
            except ValueError as error:
                raise ValueError(f"{CONFIG_FILE_ENV}: {error}") from None
        kwargs, variables = _env_fields(env)  # each field given, and the variable it came from
        try:
            return cls(**{**fields, **kwargs})
        except ValueError as error:  # it names the field (its first word): name the variable or file it came from
            field = str(error).partition(" ")[0].partition("[")[0]  # tools['x'].thresholds ...: tools
            named = variables.get(field, where if field in fields else None)
            raise error if named is None else ValueError(f"{named}: {error}") from None


def _mapping_fields(mapping: object) -> dict[str, Any]:
    """A settings mapping's values by field name: both spellings of a key, booleans read by ``read_boolean``."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"config must be a mapping, got {mapping!r}")
    kwargs: dict[str, Any] = {}
    for key, value in mapping.items():
        field = _MAPPING_KEYS.get(key) if isinstance(key, str) else None
        if field is None:
            close = difflib.get_close_matches(key, _MAPPING_KEYS, n=1) if isinstance(key, str) else []
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(_MAPPING_KEYS)}"
            raise ValueError(f"unknown config key {key!r} ({hint})")
        if field in kwargs:
            raise ValueError(f"{field} is given twice (as {key!r} and another spelling)")
        none_allowed = field == "remote_runs" and value is None  # its default: follow a shared store
        kwargs[field] = read_boolean(field, value) if field in _BOOLS and not none_allowed else value
    return kwargs


def _file_fields(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """The fields a settings file holds, and how its errors name it (``config file NAME``)."""
    location = Path(path)
    where = f"config file {str(location)!r}"
    kind = _FILE_KINDS.get(location.suffix.lower())
    if kind is None:
        raise ValueError(f"{where}: the name must end in {', '.join(_FILE_KINDS)}, got {location.suffix!r}")
    try:
        if not location.is_file():  # a folder, or a pipe that could keep a read waiting for ever
            raise ValueError(f"{where}: {'no such file' if not location.exists() else 'not a regular file'}")
        with location.open("rb") as handle:
            data = handle.read(MAX_CONFIG_FILE_BYTES + 1)
    except OSError as error:
        raise ValueError(f"{where}: cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_CONFIG_FILE_BYTES:
        raise ValueError(f"{where}: over {MAX_CONFIG_FILE_BYTES:,} bytes, which no settings file needs")
    try:
        parsed = _parse(kind, data.decode("utf-8"))  # not UTF-8: a ValueError too
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    try:
        return _mapping_fields({} if parsed is None else parsed), where  # None: an empty YAML file
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _parse(kind: str, text: str) -> object:
    """``text`` parsed as ``kind``; a ``ValueError`` saying what is wrong, in one line."""
    if kind == "YAML":
        try:
            parser = importlib.import_module("yaml")  # PyYAML: the `yaml` extra
        except ImportError:
            raise ValueError("reading YAML needs PyYAML: pip install 'otel-repeat-guard[yaml]'") from None
        load: Any = parser.safe_load
    elif kind == "TOML":
        load = _toml_module().loads
    else:
        load = json.loads
    try:
        return load(text)
    except Exception as error:  # each parser's own error type; PyYAML's is no ValueError
        raise ValueError(f"not valid {kind}: {' '.join(str(error).split())}") from None


def _toml_module() -> Any:
    """The standard library's TOML reader (3.11 on), else the ``tomli`` package it came from (3.10)."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ValueError("reading TOML on Python 3.10 needs the tomli package: pip install tomli")


def _env_fields(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The fields the ``OTEL_REPEAT_GUARD_*`` variables set, and the variable each came from."""
    kwargs: dict[str, Any] = {}
    variables: dict[str, str] = {}
    for field in _FIELDS:
        variable = ENV_PREFIX + field.upper()
        raw = env.get(variable)
        alias = _ENV_ALIASES.get(field)
        if alias is not None and env.get(alias) is not None:
            if raw is not None and raw.strip() != env[alias].strip():
                shown = (safe_url(raw), safe_url(env[alias])) if field == "chain_store" else (raw, env[alias])
                raise ValueError(f"{variable} and {alias} ({field}) disagree: {shown[0]!r} vs {shown[1]!r}")
            variable, raw = alias, env[alias]
        if raw is None:
            continue
        variables[field] = variable
        if field in _INTS:
            kwargs[field] = _env_int(variable, field, raw.strip())
        elif field in _BOOLS:
            kwargs[field] = read_boolean(f"{variable} ({field})", raw)
        elif field in ("chain_store", "progress", "reminder_style"):
            kwargs[field] = raw.strip()
        elif field == "tools":
            kwargs[field] = _env_json(variable, field, raw)
        else:
            items = _env_list(variable, field, raw)
            kwargs[field] = [_env_int(variable, field, i, raw) for i in items] if field in _INT_LISTS else items
    return kwargs, variables


def _env_list(variable: str, field: str, raw: str) -> list[str]:
    if raw.strip() == EMPTY_LIST:
        return []
    hint = f"(unset it for the default, or set it to {EMPTY_LIST!r} for an empty list)"
    if not raw.strip():
        raise ValueError(f"{variable} is set but empty: {field} must not be empty {hint}")
    items = [item.strip() for item in raw.split(",")]
    if "" in items:
        raise ValueError(f"{variable} ({field}) has an empty item, got {raw!r} {hint}")
    return items


def _env_int(variable: str, field: str, raw: str, whole: str | None = None) -> int:
    if _DIGITS.fullmatch(raw) is None:
        where = "" if whole is None else f" in {whole!r}"
        raise ValueError(f"{variable} ({field}) must be an integer, got {raw!r}{where} (plain ASCII digits only)")
    if len(raw) > 100:  # past every field's limit; past 4,300 digits int() itself refuses, naming no field
        raise ValueError(f"{variable} ({field}) is past every limit: a number of {len(raw):,} digits")
    return int(raw)


def _env_json(variable: str, field: str, raw: str) -> object:
    """A variable holding JSON (``OTEL_REPEAT_GUARD_TOOLS``), parsed; a ``ValueError`` naming it otherwise."""
    try:
        return json.loads(raw)
    except ValueError as error:
        raise ValueError(f"{variable} ({field}) must be JSON, got {raw!r} ({error})") from None
