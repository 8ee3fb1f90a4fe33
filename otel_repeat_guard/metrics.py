"""The guard's OTel instruments. Recorded only on repeats, never on every tool call."""

from __future__ import annotations

from opentelemetry.metrics import MeterProvider, get_meter_provider
from opentelemetry.util.types import Attributes

from otel_repeat_guard.version import __version__

REPEATED_CALLS = "repeat_tool_guard.repeated_calls"
REMINDERS = "repeat_tool_guard.reminders"
RUN_LENGTH = "repeat_tool_guard.run_length"
_RUN_LENGTH_BUCKETS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)


class GuardMetrics:
    """Counters and a histogram keyed by tool (never by agent: its cardinality is unbounded)."""

    __slots__ = ("_reminders", "_repeated", "_run_length", "_tool_attrs")

    _CACHE_LIMIT = 4096

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or get_meter_provider()).get_meter("otel_repeat_guard", __version__)
        self._repeated = meter.create_counter(
            REPEATED_CALLS, unit="{call}", description="Tool calls identical to the agent's previous tracked call."
        )
        self._reminders = meter.create_counter(
            REMINDERS, unit="{reminder}", description="Reminders handed to the harness, by tier and threshold."
        )
        self._run_length = meter.create_histogram(
            RUN_LENGTH,
            unit="{call}",
            description="Final length of each run of two or more identical tool calls.",
            explicit_bucket_boundaries_advisory=_RUN_LENGTH_BUCKETS,
        )
        self._tool_attrs: dict[str, Attributes] = {}

    def repeated_call(self, tool: str) -> None:
        self._repeated.add(1, self._attributes(tool))

    def reminder(self, tool: str, tier: str, threshold: int) -> None:
        attributes: Attributes = {
            "gen_ai.tool.name": tool,
            "repeat_tool_guard.tier": tier,
            "repeat_tool_guard.threshold": threshold,
        }
        self._reminders.add(1, attributes)

    def run_ended(self, tool: str, run_length: int) -> None:
        self._run_length.record(run_length, self._attributes(tool))

    def _attributes(self, tool: str) -> Attributes:
        attributes = self._tool_attrs.get(tool)
        if attributes is None:
            if len(self._tool_attrs) >= self._CACHE_LIMIT:
                self._tool_attrs.clear()
            attributes = self._tool_attrs[tool] = {"gen_ai.tool.name": tool}
        return attributes
