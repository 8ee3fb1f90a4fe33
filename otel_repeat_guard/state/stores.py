"""Where a guard keeps its runs' chains: in this process, or with ``shared_store`` in Redis."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.metrics import MeterProvider

from otel_repeat_guard.core.chains import ChainStore, ChainTracker, ReminderOutcome, RunEnded
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.detectors import Detector
from otel_repeat_guard.state.redis import RedisChainStore


def chain_store(
    config: GuardConfig,
    max_agents: int,
    on_run_ended: RunEnded,
    on_reminder_outcome: ReminderOutcome,
    detectors: Callable[[], tuple[Detector, ...]] | None,
    meter_provider: MeterProvider | None,
) -> ChainStore:
    """The runs' chains: in this process, or with ``shared_store`` in Redis (this process's the fallback)."""
    if config.shared_store:
        return RedisChainStore.from_config(
            config,
            max_agents,
            on_run_ended,
            detectors=detectors,
            on_reminder_outcome=on_reminder_outcome,
            meter_provider=meter_provider,
        )
    return ChainTracker(max_agents, on_run_ended, detectors=detectors, on_reminder_outcome=on_reminder_outcome)
