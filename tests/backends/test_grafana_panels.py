"""Every panel of the provisioned Grafana dashboard returns data from a real Prometheus fed by the demo.

The demo's scripted agents run through real guards whose metrics a ``PrometheusMetricReader`` serves; a
real Prometheus scrapes them every second while the demo runs; then each panel's PromQL (the dashboard's
variables at "All") is asked of that Prometheus, and each must answer with at least one series.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from opentelemetry.sdk.metrics import MeterProvider

from otel_repeat_guard.demo.runner import run_scenario
from otel_repeat_guard.demo.scenario import scenario
from tests.backends.servers import ROOT, find_tool, free_port, get_json, poll, server_process

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "loop-hotspots.json"
VARIABLES = {"$service": ".*", "$tool": ".*", "$agent": ".*", "$__range": "1h", "$__rate_interval": "1m"}


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with the variables at "All") of every panel target."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, (panel["title"], expr)  # every variable is one we know
            queries.append((panel["title"], expr))
    return queries


def test_every_panel_returns_data_from_a_real_prometheus(tmp_path: Path) -> None:
    prometheus = find_tool("PROMETHEUS_BIN", "/usr/bin/prometheus")
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    metrics_port, prometheus_port = free_port(), free_port()
    server, thread = start_http_server(metrics_port, addr="127.0.0.1")
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: demo-agent\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    command = [
        str(prometheus),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prometheus_port}",
    ]
    log = tmp_path / "prometheus.log"
    api = f"http://127.0.0.1:{prometheus_port}/api/v1"

    def query(expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = get_json(f"{api}/query?" + urlencode({"query": expr}))["data"]["result"]
        return result

    try:
        with server_process(command, log) as process:
            poll(
                lambda: query('up{job="demo-agent"} == 1') or None,
                timeout=60,
                what="the first scrape",
                process=process,
                log=log,
            )
            run_scenario(
                scenario(4), tmp_path / "demo.db", seconds=4, meter_provider=meter_provider
            )  # scraped as it runs
            poll(
                lambda: query("repeat_tool_guard_reminder_outcomes_total") or None,
                timeout=30,
                what="the guard's metrics after the demo",
                process=process,
                log=log,
            )
            for title, expr in panel_queries():
                result = poll(
                    lambda e=expr: query(e) or None, timeout=30, what=f"{title}: {expr}", process=process, log=log
                )
                assert result, title
            services = get_json(
                f"{api}/label/job/values?" + urlencode({"match[]": "repeat_tool_guard_repeated_calls_total"})
            )
            assert services["data"] == ["demo-agent"]  # the dashboard's service variable
            tools = get_json(
                f"{api}/label/gen_ai_tool_name/values?"
                + urlencode({"match[]": "repeat_tool_guard_repeated_calls_total"})
            )
            assert {"run_tests", "sql_query", "shell"} <= set(tools["data"])  # the dashboard's tool variable
    finally:
        meter_provider.shutdown()
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_dashboard_has_service_tool_and_agent_variables() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["service", "tool", "agent"]
    for title, expr in panel_queries():
        for metric in re.findall(r"repeat_tool_guard_\w+?_(?:total|bucket|count|sum)\b", expr):
            assert "{" in expr.split(metric, 1)[1][:1], (title, metric)  # every series selector is filtered
