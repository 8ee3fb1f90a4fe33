"""otel-repeat-guard: an advisory loop-breaker for LLM agents, as an OpenTelemetry span processor.

The public names are imported on first use (PEP 562): ``import otel_repeat_guard`` alone loads neither the SDK nor
the guard, so a command that needs little of the package (the Claude Code hook, a CLI refusal) starts quickly, and
an OpenTelemetry setting the SDK refuses at import is met inside the command, where it is said in one line."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_repeat_guard.version import __version__, build_mode

_PUBLIC = {
    "DEFAULT_CONVENTIONS": "otel_repeat_guard.conventions",
    "AgentRun": "otel_repeat_guard.conventions",
    "AttributeConvention": "otel_repeat_guard.conventions",
    "Convention": "otel_repeat_guard.conventions",
    "GenAIConvention": "otel_repeat_guard.conventions",
    "OpenInferenceConvention": "otel_repeat_guard.conventions",
    "PydanticAIV2Convention": "otel_repeat_guard.conventions",
    "ToolCall": "otel_repeat_guard.conventions",
    "TraceloopConvention": "otel_repeat_guard.conventions",
    "canonical_arguments": "otel_repeat_guard.core.canonical",
    "GuardConfig": "otel_repeat_guard.core.config",
    "Reminder": "otel_repeat_guard.core.reminders",
    "RepeatGuardStop": "otel_repeat_guard.core.reminders",
    "ReminderInbox": "otel_repeat_guard.decide.inbox",
    "default_inbox": "otel_repeat_guard.installed",
    "installed_guard": "otel_repeat_guard.installed",
    "REMINDER_EVENT": "otel_repeat_guard.processor",
    "REPEAT_EVENT": "otel_repeat_guard.processor",
    "RepeatGuardSpanProcessor": "otel_repeat_guard.processor",
    "GuardTelemetry": "otel_repeat_guard.setup.configure",
    "configure": "otel_repeat_guard.setup.configure",
}
"""Each public name, and the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:
    from otel_repeat_guard.conventions import (
        DEFAULT_CONVENTIONS,
        AgentRun,
        AttributeConvention,
        Convention,
        GenAIConvention,
        OpenInferenceConvention,
        PydanticAIV2Convention,
        ToolCall,
        TraceloopConvention,
    )
    from otel_repeat_guard.core.canonical import canonical_arguments
    from otel_repeat_guard.core.config import GuardConfig
    from otel_repeat_guard.core.reminders import Reminder, RepeatGuardStop
    from otel_repeat_guard.decide.inbox import ReminderInbox
    from otel_repeat_guard.installed import default_inbox, installed_guard
    from otel_repeat_guard.processor import REMINDER_EVENT, REPEAT_EVENT, RepeatGuardSpanProcessor
    from otel_repeat_guard.setup.configure import GuardTelemetry, configure
    from otel_repeat_guard.version import __version__, build_mode

__all__ = [
    "DEFAULT_CONVENTIONS",
    "REMINDER_EVENT",
    "REPEAT_EVENT",
    "AgentRun",
    "AttributeConvention",
    "Convention",
    "GenAIConvention",
    "GuardConfig",
    "GuardTelemetry",
    "OpenInferenceConvention",
    "PydanticAIV2Convention",
    "Reminder",
    "ReminderInbox",
    "RepeatGuardSpanProcessor",
    "RepeatGuardStop",
    "ToolCall",
    "TraceloopConvention",
    "__version__",
    "build_mode",
    "canonical_arguments",
    "configure",
    "default_inbox",
    "installed_guard",
]
