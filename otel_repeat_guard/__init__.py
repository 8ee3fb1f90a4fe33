"""otel-repeat-guard: an advisory loop-breaker for LLM agents, as an OpenTelemetry span processor."""

from otel_repeat_guard.canonical import canonical_arguments
from otel_repeat_guard.config import GuardConfig
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
from otel_repeat_guard.inbox import ReminderInbox
from otel_repeat_guard.installed import default_inbox, installed_guard
from otel_repeat_guard.processor import REMINDER_EVENT, REPEAT_EVENT, RepeatGuardSpanProcessor
from otel_repeat_guard.reminders import Reminder, RepeatGuardStop
from otel_repeat_guard.version import __version__, build_mode
from otel_repeat_guard.wiring import GuardTelemetry, configure

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
