"""Where the guard's settings come from: a mapping, a file (TOML, YAML, JSON) or the ``OTEL_REPEAT_GUARD_*``
variables, each read to the fields :class:`~otel_repeat_guard.core.config.GuardConfig` takes, which validates them.

One reading for each kind of value: a boolean reads the same in a file and in the environment
(:func:`read_boolean`); a list variable is comma-separated, ``-`` an explicitly empty one; a number is plain ASCII
digits. Every error is a ``ValueError`` naming the variable, the key or the file.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from otel_repeat_guard.core.urls import safe_url

if TYPE_CHECKING:
    import logging

ENV_PREFIX = "OTEL_REPEAT_GUARD_"
EMPTY_LIST = "-"
"""An environment list variable set to this is an explicitly empty list (``OTEL_REPEAT_GUARD_EXCLUDE=-``:
exclude nothing); an empty value is an error, not a silent way to drop the default."""
_DIGITS = re.compile(r"-?[0-9]+")
FIELDS = (
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
"""The settings :class:`~otel_repeat_guard.core.config.GuardConfig` takes (its fields, in order): each read from a
mapping or file key and from an ``OTEL_REPEAT_GUARD_<FIELD>`` variable."""
MAPPING_KEYS = {
    **{field: field for field in FIELDS},
    **{"".join(w.title() if i else w for i, w in enumerate(field.split("_"))): field for field in FIELDS},
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
_ENV_ALIASES = {"chain_store": ENV_PREFIX + "STORE"}
"""Shorter environment names some fields also answer to (setting both to different values is an error)."""
KNOWN_VARIABLES = frozenset(
    [ENV_PREFIX + field.upper() for field in FIELDS]
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
        close = _close_matches(name, KNOWN_VARIABLES)
        hint = f" (did you mean {close[0]}?)" if close else ""
        _logger().warning("repeat guard: %s is not a variable it reads, so it is ignored%s", name, hint)
    return fresh


def _close_matches(word: str, known: Iterable[str]) -> list[str]:
    """The known word closest to ``word``, if one is close (:func:`difflib.get_close_matches`, imported here: a
    Claude Code hook process reads the environment on every call, and seldom needs a "did you mean")."""
    import difflib  # noqa: PLC0415 - see above

    return difflib.get_close_matches(word, known, n=1)


def _logger() -> logging.Logger:
    """The ``otel_repeat_guard`` logger (:mod:`logging` imported when a warning is said, as for difflib)."""
    import logging  # noqa: PLC0415 - see above

    return logging.getLogger("otel_repeat_guard")


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_boolean(name: str, value: object) -> bool:
    """The one reading of a boolean setting, from a file, a mapping or the environment: ``True``/``False``,
    1/0, or the words true/false, 1/0, yes/no, on/off in any case (so YAML's ``yes`` and the environment's
    ``yes`` agree). Anything else is a ``ValueError`` naming ``name`` and the value."""
    if isinstance(value, bool):
        return value
    if is_int(value) and value in (0, 1):
        return value == 1
    word = _BOOLEANS.get(value.strip().lower()) if isinstance(value, str) else None
    if word is None:
        raise ValueError(f"{name} must be true or false (or 1/0, yes/no, on/off), got {value!r}")
    return word


def mapping_fields(mapping: object) -> dict[str, Any]:
    """A settings mapping's values by field name: both spellings of a key, booleans read by ``read_boolean``."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"config must be a mapping, got {mapping!r}")
    kwargs: dict[str, Any] = {}
    for key, value in mapping.items():
        field = MAPPING_KEYS.get(key) if isinstance(key, str) else None
        if field is None:
            close = _close_matches(key, MAPPING_KEYS) if isinstance(key, str) else []
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(MAPPING_KEYS)}"
            raise ValueError(f"unknown config key {key!r} ({hint})")
        if field in kwargs:
            raise ValueError(f"{field} is given twice (as {key!r} and another spelling)")
        none_allowed = field == "remote_runs" and value is None  # its default: follow a shared store
        kwargs[field] = read_boolean(field, value) if field in _BOOLS and not none_allowed else value
    return kwargs


def file_fields(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """The fields a settings file holds, and how its errors name it (``config file NAME``)."""
    from pathlib import Path  # noqa: PLC0415 - here, where a file is read: a Claude Code hook's call reads none

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
        return mapping_fields({} if parsed is None else parsed), where  # None: an empty YAML file
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


def env_fields(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The fields the ``OTEL_REPEAT_GUARD_*`` variables set, and the variable each came from."""
    kwargs: dict[str, Any] = {}
    variables: dict[str, str] = {}
    for field in FIELDS:
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
