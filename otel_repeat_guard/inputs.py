"""What the processor's public entry points take from the application, alike on both builds.

mypyc checks a compiled function's annotations when it is called (``str``, ``int``, ``float``, ``bool``,
``dict``: a ``TypeError`` where Python would duck-type), and the OTel SDK catches nothing a processor
raises. So the hooks, the harness API and the options take ``object`` where an application may pass
anything, and these helpers decide what it means: an odd harness argument or flush timeout is
ignored (the SDK's processors take a float ``timeout_millis``), an odd option is a ``ValueError``
naming it.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import SpanProcessor

from otel_repeat_guard.core.config import GuardConfig

FLUSH_TIMEOUT_MILLIS = 30_000
"""The SDK's default ``force_flush`` timeout, used for a timeout that is not a number."""
_PROCESSOR_METHODS = ("on_start", "_on_ending", "on_end", "shutdown", "force_flush")
_CONVENTION_METHODS = ("tool_call", "agent_run")


def flush_timeout(value: object) -> int:
    """A ``force_flush`` timeout in whole milliseconds, as the SDK declares it: from any real number (its
    callers pass floats too, ``provider.force_flush(2500.0)``), else (NaN, infinity, None, text) the SDK's default."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return FLUSH_TIMEOUT_MILLIS
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else FLUSH_TIMEOUT_MILLIS
    return value


def context_or_none(value: object) -> Context | None:
    """``value`` when it is an OTel ``Context``, else None (the current context): an odd one is ignored."""
    return value if isinstance(value, Context) else None


def chain_key(value: object) -> str | None:
    """A harness argument naming a run (a chain key or a ``gen_ai.agent.id``): a string, else None, which
    names no run (``guard.reset(guard.current_agent_id())`` outside a span passes None)."""
    return value if isinstance(value, str) else None


def shown_name(span: object) -> object:
    """A span's name for a log line, whatever its type (the SDK does not check it is a string)."""
    name: Any = getattr(span, "name", None)
    return name


def _has_methods(value: object, methods: tuple[str, ...]) -> bool:
    return all(callable(getattr(value, method, None)) for method in methods)


def checked_sequence(option: str, value: object, methods: tuple[str, ...], what: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{option} must be a sequence of {what}, got {value!r}")
    items = tuple(value)
    for item in items:
        if not _has_methods(item, methods):
            raise ValueError(f"{option} must hold {what} (with {', '.join(methods)}), got {item!r}")
    return items


def positive_int(name: str, value: object) -> int:
    """``value``, an option that must be an integer from 1 to ``sys.maxsize`` (a size past it is none: a deque
    refuses it as its bound, and every reminder would then be lost); a ValueError naming it otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= sys.maxsize:
        raise ValueError(f"{name} must be an integer from 1 to {sys.maxsize}, got {value!r}")
    return value


def checked_flag(option: str, value: object) -> bool:
    """An on/off option: True or False only. A text such as ``"false"`` is refused, where ``bool()`` reads it as on."""
    if not isinstance(value, bool):
        raise ValueError(f"{option} must be True or False, got {value!r}")
    return value


def checked_callable(option: str, value: object) -> None:
    """A callback option: None, or a plain callable. The guard calls it on the thread that ends the span and
    awaits nothing, so an ``async def`` would only make a coroutine that never runs: refused, by name."""
    if value is None:
        return
    if not callable(value):
        raise ValueError(f"{option} must be callable or None, got {value!r}")
    if inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(getattr(value, "__call__", None)):  # noqa: B004
        raise ValueError(
            f"{option} must be a plain callable, not a coroutine function (the guard awaits nothing), got {value!r}:"
            " hand it on with loop.call_soon_threadsafe, or use a ReminderInbox"
        )


def checked_processor_options(
    on_reminder: object, conventions: object, downstream: object, meter_provider: object
) -> tuple[tuple[Any, ...], tuple[SpanProcessor, ...]]:
    """The processor's options the guard does not check itself (ValueError naming the one that is wrong):
    its conventions and downstream processors, as tuples."""
    checked_callable("on_reminder", on_reminder)
    if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
        raise ValueError(f"meter_provider must be an OpenTelemetry MeterProvider or None, got {meter_provider!r}")
    checked = checked_sequence("conventions", conventions, _CONVENTION_METHODS, "conventions")
    return checked, checked_sequence("downstream", downstream, _PROCESSOR_METHODS, "span processors")


def checked_config(config: object) -> GuardConfig:
    """``config``, when it is a ``GuardConfig``; else a ValueError naming it."""
    if not isinstance(config, GuardConfig):
        raise ValueError(f"config must be a GuardConfig, got {config!r}")
    return config


def checked_guard_options(
    config: object, redact: object, audit: object, max_agents: object, max_live_spans: object
) -> tuple[int, int]:
    """The guard's options checked (ValueError naming the one that is wrong): its two bounds, as integers."""
    checked_config(config)
    checked_callable("redact", redact)
    checked_callable("audit", audit)
    return positive_int("max_agents", max_agents), positive_int("max_live_spans", max_live_spans)
