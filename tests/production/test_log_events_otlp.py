"""The guard's log events through a real OTLP/HTTP log exporter to a receiver on loopback: ``configure()`` wires it
beside the trace and metric exporters, and each record carries its tool span's trace and span ids."""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_repeat_guard import configure
from tests.production.agent import looping_agent
from tests.production.receiver import otlp_receiver


def _attributes(record: object) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in record.attributes:  # type: ignore[attr-defined]
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind else None
    return out


def test_configure_sends_the_log_events_with_their_spans_ids_over_otlp(monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_receiver() as (endpoint, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        monkeypatch.setenv("OTEL_REPEAT_GUARD_THRESHOLDS", "3,4")
        telemetry = configure(service_name="logs-test", set_global=False, on_reminder=lambda _: None)  # not the inbox
        assert telemetry.logger_provider is not None
        looping_agent(telemetry.tracer_provider, calls=5)
        telemetry.shutdown()
        spans = {s.span_id: s for _, s in received.spans()}
        records = received.log_records()

    on_spans = sorted(
        (s.trace_id, s.span_id, e.name, tuple(sorted(_attributes(e).items()))) for s in spans.values() for e in s.events
    )
    guard_records = [r for r in records if r.event_name != "gen_ai.evaluation.result"]  # type: ignore[attr-defined]
    as_logged = sorted(
        (r.trace_id, r.span_id, r.event_name, tuple(sorted(_attributes(r).items())))  # type: ignore[attr-defined]
        for r in guard_records
    )
    assert len(on_spans) == 6  # four repeats, two reminders
    assert as_logged == on_spans  # the same events, with the ids of the spans that carry them
    evaluations = [_attributes(r) for r in records if r.event_name == "gen_ai.evaluation.result"]  # type: ignore[attr-defined]
    outcomes = [e for e in evaluations if e["gen_ai.evaluation.name"] == "repeat_tool_guard.reminder_outcome"]
    assert [e["gen_ai.evaluation.score.label"] for e in outcomes] == ["ignored", "ignored"]  # at 4 and 5
    evaluations = [e for e in evaluations if e["gen_ai.evaluation.name"] == "repeat_tool_guard.repeat"]
    assert sorted((e["gen_ai.evaluation.score.value"], e["gen_ai.evaluation.score.label"]) for e in evaluations) == [
        (2.0, "none"),
        (3.0, "gentle"),
        (4.0, "detailed"),
        (5.0, "detailed"),
    ]
    assert {spans[r.span_id].name for r in records} == {"execute_tool read_file"}  # type: ignore[attr-defined]


def test_no_log_exporter_or_log_events_off_builds_no_logger_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "none")
    assert configure(set_global=False).logger_provider is None
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_REPEAT_GUARD_LOG_EVENTS", "false")
    assert configure(set_global=False).logger_provider is None
    monkeypatch.setenv("OTEL_REPEAT_GUARD_LOG_EVENTS", "true")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "otlp,none")
    with pytest.raises(ValueError, match="OTEL_LOGS_EXPORTER: none cannot be combined"):
        configure(set_global=False)
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "nosuch")
    with pytest.raises(ValueError, match="OTEL_LOGS_EXPORTER names 'nosuch'"):
        configure(set_global=False)
    monkeypatch.delenv("OTEL_LOGS_EXPORTER")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    assert configure(span_exporters=[], set_global=False).logger_provider is None  # exporters given in code
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "console")
    assert configure(span_exporters=[], set_global=False).logger_provider is not None  # unless asked for


def test_configure_makes_its_logger_provider_global_when_none_is() -> None:
    script = (
        "import os\n"
        "os.environ['OTEL_LOGS_EXPORTER'] = 'console'\n"
        "from opentelemetry import _logs\n"
        "import otel_repeat_guard as g\n"
        "t = g.configure(span_exporters=[], metric_readers=[])\n"
        "assert t.logger_provider is not None and _logs.get_logger_provider() is t.logger_provider\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
