"""The scripted demo workload: ``scenario`` (the data), ``runner`` (through real OpenTelemetry), ``console``."""

from otel_repeat_guard.demo.runner import Counts, run_scenario
from otel_repeat_guard.demo.scenario import AgentScript, Call, Prompt, Subagent, scenario

__all__ = ["AgentScript", "Call", "Counts", "Prompt", "Subagent", "run_scenario", "scenario"]
