"""otel-repeat-guard: an advisory loop-breaker for LLM agents, as an OpenTelemetry span processor."""

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
from otel_repeat_guard.core.reminders import Reminder, RepeatGuardStop, register_reminder_style
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
    "register_reminder_style",
]
