"""``configure()`` with real OTLP/HTTP exporters, honoring the standard OTEL_* variables."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from otel_repeat_guard import GuardConfig, configure
from tests.production.agent import looping_agent
from tests.production.receiver import otlp_receiver


def test_configure_exports_spans_events_and_metrics_over_otlp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,service.name=overridden")
        monkeypatch.setenv("OTEL_REPEAT_GUARD_THRESHOLDS", "3,4")
        telemetry = configure(service_name="from-code", store=tmp_path / "store.db", set_global=False)
        assert telemetry.guard.config == GuardConfig(thresholds=(3, 4))
        looping_agent(telemetry.tracer_provider, calls=5)
        telemetry.shutdown()

        spans = received.spans()
        assert {r["service.name"] for r, _ in spans} == {"from-env"}  # OTEL_SERVICE_NAME beats code and attributes
        assert {r["deployment.environment"] for r, _ in spans} == {"test"}
        tools = [s for _, s in spans if s.name == "execute_tool read_file"]
        assert len(tools) == 5
        run_lengths = [
            next(
                (
                    kv.value.int_value
                    for e in s.events
                    for kv in e.attributes
                    if kv.key == "repeat_tool_guard.run_length"
                ),
                1,
            )
            for s in sorted(tools, key=lambda s: s.end_time_unix_nano)
        ]
        assert run_lengths == [1, 2, 3, 4, 5]
        reminders = {
            kv.value.string_value
            for s in tools
            for e in s.events
            if e.name == "repeat_tool_guard.reminder"
            for kv in e.attributes
            if kv.key == "repeat_tool_guard.tier"
        }
        assert reminders == {"gentle", "detailed"}

        points = received.metric_points("repeat_tool_guard.reminders")
        assert sorted((p["repeat_tool_guard.tier"], p["repeat_tool_guard.threshold"], v) for p, v in points) == [
            ("detailed", 4, 1),
            ("gentle", 3, 1),
        ]
        assert {p["gen_ai.tool.name"] for p, _ in points} == {"read_file"}
        repeated = received.metric_points("repeat_tool_guard.repeated_calls")
        assert repeated == [({"gen_ai.tool.name": "read_file"}, 4)]

    assert telemetry.inbox is not None
    assert [r.threshold for r in telemetry.inbox.drain("agent-1")] == [3, 4]
    with sqlite3.connect(tmp_path / "store.db") as conn:
        rows = conn.execute("SELECT tool_name, run_length, reminder_tier FROM tool_calls ORDER BY end_ns").fetchall()
    assert rows == [
        ("read_file", 1, None),
        ("read_file", 2, None),
        ("read_file", 3, "gentle"),
        ("read_file", 4, "detailed"),
        ("read_file", 5, None),
        ("grep", 1, None),
    ]


def test_exporters_can_be_turned_off_or_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    seen: list[str] = []
    telemetry = configure(GuardConfig(thresholds=(2,)), on_reminder=lambda r: seen.append(r.tier), set_global=False)
    assert telemetry.inbox is None
    looping_agent(telemetry.tracer_provider, calls=2)
    telemetry.shutdown()
    assert seen == ["gentle"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL must be one of"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "carrier-pigeon", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        ("OTEL_TRACES_EXPORTER", "carrier-pigeon", "OTEL_TRACES_EXPORTER names 'carrier-pigeon', which no installed"),
        ("OTEL_METRICS_EXPORTER", "otlp,,console", "OTEL_METRICS_EXPORTER has an empty item"),
        ("OTEL_TRACES_EXPORTER", "otlp,none", "none cannot be combined"),
        ("OTEL_REPEAT_GUARD_THRESHOLDS", "1", "thresholds must be at least 2"),
    ],
)
def test_bad_settings_raise_with_the_variable_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message):
        configure(set_global=False)


OTEL_VARIABLES = {  # each bad value the SDK refused naming no variable, with a traceback, or read as another
    "OTEL_METRIC_EXPORT_INTERVAL": ["-5", "0", "abc", "1e999", "nan"],
    "OTEL_METRIC_EXPORT_TIMEOUT": ["-5", "abc"],
    "OTEL_BSP_SCHEDULE_DELAY": ["0", "abc", "1" + "0" * 320],
    "OTEL_BSP_MAX_QUEUE_SIZE": ["-5", "9" * 400],
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": ["0", "1.5"],
    "OTEL_BSP_EXPORT_TIMEOUT": ["-5"],
    "OTEL_EXPORTER_OTLP_TIMEOUT": ["abc", "-1"],
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": ["inf"],
    "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": ["zip"],
    "OTEL_METRICS_EXEMPLAR_FILTER": ["sometimes"],
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": ["backwards"],
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": ["pie"],
    "OTEL_TRACES_SAMPLER": ["sometimes"],
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": ["otel,crystal-ball"],
    "OTEL_EXPORTER_OTLP_ENDPOINT": ["localhost:4318"],
    "OTEL_EXPORTER_OTLP_CERTIFICATE": ["/no/such/ca.pem"],
    "OTEL_RESOURCE_ATTRIBUTES": ["team"],
    "OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S": ["0", "-1", "abc", "nan", "inf", "1e3", "1_0", "3601", "٣"],
}


@pytest.mark.parametrize(
    ("variable", "value"),
    [(variable, value) for variable, values in OTEL_VARIABLES.items() for value in values],
    ids=[f"{variable}={value[:12]}" for variable, values in OTEL_VARIABLES.items() for value in values],
)
def test_every_otel_variable_configure_reads_is_refused_by_name_and_value(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as refused:
        configure(set_global=False, store=False)
    said = str(refused.value)
    assert said.startswith(variable) and repr(value.rpartition(",")[2]) in said and "\n" not in said, said


def test_a_sampler_ratio_out_of_range_and_bad_headers_are_refused_the_headers_unquoted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "1.5")
    with pytest.raises(ValueError, match=r"^OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got '1.5'$"):
        configure(set_global=False)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization Basic c2VjcmV0")
    with pytest.raises(ValueError, match=r"^OTEL_EXPORTER_OTLP_HEADERS must be") as refused:
        configure(set_global=False)
    assert "c2VjcmV0" not in str(refused.value)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20c2VjcmV0,x-team=a")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:s3cret@host:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "u:s3cret@host:4318/v1/traces")
    with pytest.raises(ValueError, match=r"TRACES_ENDPOINT must be an http:// or https:// URL, got '\*\*\*@host"):
        configure(set_global=False)


def test_good_values_of_the_same_variables_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, value in {
        "OTEL_METRIC_EXPORT_INTERVAL": "5000",
        "OTEL_METRIC_EXPORT_TIMEOUT": "2500.5",
        "OTEL_BSP_SCHEDULE_DELAY": "500",
        "OTEL_BSP_MAX_QUEUE_SIZE": "4096",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "256",
        "OTEL_BSP_EXPORT_TIMEOUT": "0",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP",
        "OTEL_METRICS_EXEMPLAR_FILTER": "trace_based",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
        "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "otel, process",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=a,,x-b=c",
        "OTEL_RESOURCE_ATTRIBUTES": "team=a,,tier=b",
        "OTEL_REPEAT_GUARD_SHUTDOWN_TIMEOUT_S": "2.5",
    }.items():
        monkeypatch.setenv(variable, value)
    configure(set_global=False, span_exporters=[], metric_readers=[]).shutdown()


def test_a_refused_configure_leaves_no_metric_reader_thread_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A periodic reader starts its thread when made: one made before a later ValueError would warn
    "Cannot call collect" every interval for the rest of the process (CI caught that in other tests' logs)."""
    import threading

    def readers() -> int:
        return sum(t.name == "OtelPeriodicExportingMetricReader" for t in threading.enumerate())

    before = readers()
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    with pytest.raises(ValueError, match="carrier-pigeon"):
        configure(set_global=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    with pytest.raises(ValueError, match="store must be"):
        configure(set_global=False, store="")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console,carrier-pigeon")
    with pytest.raises(ValueError, match="carrier-pigeon"):
        configure(set_global=False)
    assert readers() == before


def test_grpc_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.metric_exporter", None)
    with pytest.raises(ValueError, match="opentelemetry-exporter-otlp-proto-grpc"):
        configure(set_global=False)


def test_configure_sets_the_globals_and_the_process_wide_guard() -> None:
    script = (
        "from opentelemetry import trace, metrics\n"
        "import otel_repeat_guard as g\n"
        "t = g.configure(span_exporters=[], metric_readers=[])\n"
        "assert trace.get_tracer_provider() is t.tracer_provider\n"
        "assert metrics.get_meter_provider() is t.meter_provider\n"
        "assert g.installed_guard() is t.guard and t.inbox is g.default_inbox()\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_second_configure_keeps_the_guard_that_sees_the_spans() -> None:
    """A re-run notebook cell: OTel keeps the first global provider, and so does the installed guard."""
    script = (
        "import logging\n"
        "from opentelemetry import trace\n"
        "import otel_repeat_guard as g\n"
        "logging.basicConfig()\n"
        "first = g.configure(span_exporters=[], metric_readers=[])\n"
        "second = g.configure(span_exporters=[], metric_readers=[])\n"
        "assert second is first and g.installed_guard() is first.guard\n"
        "assert trace.get_tracer_provider() is first.tracer_provider\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
    assert "configure() was called before in this process" in done.stderr


def test_configure_refuses_when_another_global_provider_receives_the_spans() -> None:
    script = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "import otel_repeat_guard as g\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "try:\n"
        "    g.configure(span_exporters=[], metric_readers=[])\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "assert g.installed_guard() is None\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "a global tracer provider is already set" in done.stdout and "set_global=False" in done.stdout


def test_exporter_lists_and_every_installed_exporter_are_the_sdks_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_TRACES_EXPORTER=otlp,console (the spec allows lists) sends each span to both, as the SDK would."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    from otel_repeat_guard.setup.configure import metric_readers, span_exporters

    with otlp_receiver() as (endpoint, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp, console")
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console")
        assert [type(e) for e in span_exporters()] == [OTLPSpanExporter, ConsoleSpanExporter]
        (reader,) = metric_readers()
        assert isinstance(reader, PeriodicExportingMetricReader)
        assert isinstance(reader._exporter, ConsoleMetricExporter)
        reader.shutdown()
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
        telemetry = configure(set_global=False)
        looping_agent(telemetry.tracer_provider, calls=2)
        telemetry.shutdown()
        assert len([s for _, s in received.spans() if s.name == "execute_tool read_file"]) == 2


def test_the_prometheus_exporter_serves_the_guards_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_METRICS_EXPORTER=prometheus: the exporter package's pull reader, serving on its standard port variable."""
    import urllib.request

    from tests.backends.servers import free_port

    port = free_port()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", str(port))
    telemetry = configure(GuardConfig(thresholds=(2,)), set_global=False)
    try:
        looping_agent(telemetry.tracer_provider, calls=3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert 'repeat_tool_guard_repeated_calls_total{gen_ai_tool_name="read_file"' in text
    finally:
        telemetry.shutdown()
