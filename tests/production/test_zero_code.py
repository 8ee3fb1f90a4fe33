"""Zero-code: a real subprocess under ``opentelemetry-instrument`` gets the guard from the environment alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.production.receiver import otlp_receiver

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"

# The agent program knows nothing about the guard's setup: it uses the OTel API only, and,
# like a framework adapter, reads the process-wide inbox before its next model request.
AGENT = """
import json
from opentelemetry import trace
import otel_repeat_guard
from tests.production.agent import looping_agent

looping_agent(calls=5)
trace.get_tracer_provider().force_flush()
guard = otel_repeat_guard.installed_guard()
print(json.dumps({
    "provider": type(trace.get_tracer_provider()).__name__,
    "guard": guard is not None,
    "reminders": [[r.agent_id, r.tool_name, r.run_length, r.tier] for r in otel_repeat_guard.default_inbox().drain("agent-1")],
}))
"""


def run_instrumented(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, object]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHONPATH"))}
    extra = {"OTEL_LOGS_EXPORTER": "none", **extra}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_SERVICE_NAME="zero-code-agent",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
        **extra,
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def tool_events(received: object) -> list[list[str]]:
    spans = [s for _, s in received.spans() if s.name == "execute_tool read_file"]  # type: ignore[attr-defined]
    return [[e.name for e in s.events] for s in sorted(spans, key=lambda s: s.end_time_unix_nano)]


def test_opentelemetry_instrument_with_the_guard_enabled(tmp_path: Path) -> None:
    assert INSTRUMENT.exists(), "opentelemetry-instrument is part of the test dependencies"
    with otlp_receiver() as (endpoint, received):
        result = run_instrumented(tmp_path, endpoint, OTEL_REPEAT_GUARD_ENABLED="true")
        assert result["provider"] == "TracerProvider"
        assert result["guard"] is True
        assert result["reminders"] == [["agent-1", "read_file", 3, "gentle"], ["agent-1", "read_file", 5, "detailed"]]
        repeat, reminder = "repeat_tool_guard.repeat", "repeat_tool_guard.reminder"
        assert tool_events(received) == [[], [repeat], [repeat, reminder], [repeat], [repeat, reminder]]
        services = {r["service.name"] for r, _ in received.spans()}
        assert services == {"zero-code-agent"}


@pytest.mark.parametrize("value", [None, "false"])
def test_without_the_flag_nothing_changes(tmp_path: Path, value: str | None) -> None:
    with otlp_receiver() as (endpoint, received):
        extra = {} if value is None else {"OTEL_REPEAT_GUARD_ENABLED": value}
        result = run_instrumented(tmp_path, endpoint, **extra)
        assert result["guard"] is False and result["reminders"] == []
        assert tool_events(received) == [[]] * 5


def test_a_bad_setting_is_logged_and_the_program_runs(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        result = run_instrumented(
            tmp_path, endpoint, OTEL_REPEAT_GUARD_ENABLED="true", OTEL_REPEAT_GUARD_THRESHOLDS="3,3"
        )
        assert result["guard"] is False
        assert (
            "repeat guard not installed, the program runs unguarded: "
            "OTEL_REPEAT_GUARD_THRESHOLDS: thresholds must not repeat a value, got [3, 3]"
        ) in str(result["stderr"])
        assert len(tool_events(received)) == 5  # the program and its telemetry carry on


def test_opentelemetry_instrument_sends_the_log_events_through_the_configurators_log_exporter(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        run_instrumented(tmp_path, endpoint, OTEL_REPEAT_GUARD_ENABLED="true", OTEL_LOGS_EXPORTER="otlp")
        spans = {s.span_id: s for _, s in received.spans()}
        records = received.log_records()
    names = sorted((spans[r.span_id].name, r.event_name) for r in records)  # type: ignore[attr-defined]  # 4 repeats, 2 outcomes
    repeat, evaluation = (
        ("execute_tool read_file", "repeat_tool_guard.repeat"),
        ("execute_tool read_file", "gen_ai.evaluation.result"),
    )
    assert names == [evaluation] * 6 + [("execute_tool read_file", "repeat_tool_guard.reminder")] * 2 + [repeat] * 4
    assert {r.trace_id for r in records} == {s.trace_id for s in spans.values()}  # type: ignore[attr-defined]
