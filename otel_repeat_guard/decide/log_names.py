"""What tells the guard's log events among a backend's log records (``decide/log_events.py`` emits them): read back
by ``ingest`` from a Collector's files (``ingest/log_records.py``) and by the ClickHouse reader from ``otel_logs``
(``clickhouse/guard_logs.py``), with one definition here below both."""

from __future__ import annotations

from typing import Final

from otel_repeat_guard.decide.log_events import SCOPE

GUARD_PREFIX: Final = "repeat_tool_guard."
GUARD_SCOPE: Final = SCOPE
"""The instrumentation scope of the guard's log events."""
EVENT_NAME_ATTRIBUTE: Final = "event.name"
"""Where a log event's name was before the ``EventName`` field (older SDKs and Collectors): read as well."""
MARKS: Final = (  # (an attribute only that event has, the event): for a record whose name a Collector dropped
    ("repeat_tool_guard.reminder_text", "repeat_tool_guard.reminder"),
    ("repeat_tool_guard.cycle_tools", "repeat_tool_guard.cycle"),
    ("repeat_tool_guard.outcome_digest", "repeat_tool_guard.no_progress"),
    ("repeat_tool_guard.reason", "repeat_tool_guard.unguarded"),
    ("repeat_tool_guard.run", "repeat_tool_guard.call"),
    ("repeat_tool_guard.agent_id", "repeat_tool_guard.repeat"),
    ("repeat_tool_guard.arguments_digest", "repeat_tool_guard.parallel_duplicate"),
)
