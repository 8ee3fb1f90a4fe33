"""The guard's metrics in a real Prometheus server, scraped through opentelemetry-exporter-prometheus."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from tests.backends.servers import find_tool, free_port, get_json, poll, server_process
from tests.production.agent import looping_agent

QUERY = "repeat_tool_guard_reminders_total"


def test_reminder_counter_reaches_prometheus_by_tool_and_tier(tmp_path: Path) -> None:
    prometheus = find_tool("PROMETHEUS_BIN", "/usr/bin/prometheus")
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    metrics_port, prometheus_port = free_port(), free_port()
    server, thread = start_http_server(metrics_port, addr="127.0.0.1")
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    try:
        provider = TracerProvider()
        provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(), meter_provider=meter_provider))
        looping_agent(provider, calls=8, agent_id="a1")  # gentle at 3, detailed at 5 and 8
        looping_agent(provider, calls=3, agent_id="a2")  # gentle at 3
        provider.shutdown()

        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: agent\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        )
        command = [
            str(prometheus),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
        ]
        log = tmp_path / "prometheus.log"
        with server_process(command, log) as process:
            url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urlencode({"query": QUERY})

            def samples() -> list[dict[str, object]] | None:
                result = get_json(url)["data"]["result"]
                return result if len(result) == 3 else None

            result = poll(samples, timeout=30, what=f"{QUERY} in Prometheus", process=process, log=log)
            series = sorted(
                (
                    r["metric"]["gen_ai_tool_name"],
                    r["metric"]["repeat_tool_guard_tier"],
                    r["metric"]["repeat_tool_guard_threshold"],
                    float(r["value"][1]),
                )
                for r in result
            )
            assert series == [
                ("read_file", "detailed", "5", 1.0),
                ("read_file", "detailed", "8", 1.0),
                ("read_file", "gentle", "3", 2.0),
            ]
            by_tier = get_json(
                f"http://127.0.0.1:{prometheus_port}/api/v1/query?"
                + urlencode({"query": f"sum by (repeat_tool_guard_tier) ({QUERY})"})
            )["data"]["result"]
            assert {r["metric"]["repeat_tool_guard_tier"]: float(r["value"][1]) for r in by_tier} == {
                "gentle": 2.0,
                "detailed": 2.0,
            }
            repeated = get_json(
                f"http://127.0.0.1:{prometheus_port}/api/v1/query?"
                + urlencode({"query": "repeat_tool_guard_repeated_calls_total"})
            )["data"]["result"]
            assert [(r["metric"]["gen_ai_tool_name"], float(r["value"][1])) for r in repeated] == [("read_file", 9.0)]
            count = get_json(
                f"http://127.0.0.1:{prometheus_port}/api/v1/query?"
                + urlencode({"query": "repeat_tool_guard_run_length_count"})
            )["data"]["result"]
            assert [float(r["value"][1]) for r in count] == [2.0]  # both runs ended: each agent broke its run with grep
    finally:
        meter_provider.shutdown()
        server.shutdown()
        server.server_close()
        thread.join(5)
