"""Guard configuration: a frozen, validated value built in code, from a mapping, or from the environment."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "OTEL_REPEAT_GUARD_"
_MAPPING_KEYS = {
    "thresholds": "thresholds",
    "include": "include",
    "exclude": "exclude",
    "argumentsPreviewChars": "arguments_preview_chars",
    "arguments_preview_chars": "arguments_preview_chars",
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _patterns(field: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{field} must be a sequence of tool-name patterns, got {value!r}")
    patterns = tuple(value)
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{field} must hold non-empty strings, got {pattern!r} in {value!r}")
    return patterns


def _thresholds(value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"thresholds must be a sequence of integers, got {value!r}")
    items = tuple(value)
    if not items:
        raise ValueError("thresholds must not be empty, got ()")
    for item in items:
        if not _is_int(item):
            raise ValueError(f"thresholds must hold integers, got {item!r} in {value!r}")
        if item < 2:
            raise ValueError(f"thresholds must be at least 2 (a run has two calls), got {item!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"thresholds must not repeat a value, got {value!r}")
    return tuple(sorted(items))


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """When to remind and which tools to watch.

    ``thresholds`` are the run lengths that fire a reminder (the first gentle, the rest
    detailed); ``include``/``exclude`` are tool-name patterns; ``arguments_preview_chars``
    bounds the arguments quoted in a reminder.
    """

    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write",)
    arguments_preview_chars: int = 500

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", _thresholds(self.thresholds))
        object.__setattr__(self, "include", _patterns("include", self.include))
        object.__setattr__(self, "exclude", _patterns("exclude", self.exclude))
        chars = self.arguments_preview_chars
        if not _is_int(chars) or chars < 1:
            raise ValueError(f"arguments_preview_chars must be an integer >= 1, got {chars!r}")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> GuardConfig:
        """Build from a parsed YAML/JSON mapping; unknown keys are an error."""
        if not isinstance(mapping, Mapping):
            raise ValueError(f"config must be a mapping, got {mapping!r}")
        kwargs: dict[str, Any] = {}
        for key, value in mapping.items():
            field = _MAPPING_KEYS.get(key)
            if field is None:
                known = ", ".join(_MAPPING_KEYS)
                raise ValueError(f"unknown config key {key!r} (known keys: {known})")
            if field in kwargs:
                raise ValueError(f"{field} is given twice (as {key!r} and another spelling)")
            kwargs[field] = value
        return cls(**kwargs)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GuardConfig:
        """Build from ``OTEL_REPEAT_GUARD_*`` variables; unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}
        for field in ("thresholds", "include", "exclude", "arguments_preview_chars"):
            raw = env.get(ENV_PREFIX + field.upper())
            if raw is None:
                continue
            items = [item.strip() for item in raw.split(",") if item.strip()]
            if field == "thresholds":
                kwargs[field] = [_env_int(field, item) for item in items]
            elif field == "arguments_preview_chars":
                kwargs[field] = _env_int(field, raw.strip())
            else:
                kwargs[field] = items
        return cls(**kwargs)


def _env_int(field: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{field.upper()} ({field}) must be an integer, got {raw!r}") from None
