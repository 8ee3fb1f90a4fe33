"""The guard's span events in a real OTLP trace backend: Arize Phoenix, read back through its REST API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from tests.backends.servers import ROOT, find_tool, free_port, get_json, get_ok, poll, server_process
from tests.production.agent import looping_agent


def _attribute(attributes: dict[str, Any], dotted: str) -> Any:
    """Phoenix may return attributes flat or nested by their dots: accept both."""
    if dotted in attributes:
        return attributes[dotted]
    value: Any = attributes
    for part in dotted.split("."):
        value = value[part]
    return value


def test_tool_spans_carry_the_guard_events_in_phoenix(tmp_path: Path) -> None:
    phoenix = find_tool("PHOENIX_BIN", ROOT / ".venv-phoenix" / "bin" / "phoenix")
    port, grpc_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(
        PHOENIX_WORKING_DIR=str(tmp_path / "phoenix"),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
    )
    log = tmp_path / "phoenix.log"
    base = f"http://127.0.0.1:{port}"
    with server_process([str(phoenix), "serve"], log, env) as process:
        poll(lambda: get_ok(f"{base}/healthz"), timeout=120, what="Phoenix /healthz", process=process, log=log)

        provider = TracerProvider(resource=Resource.create({"service.name": "phoenix-test-agent"}))
        provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(thresholds=(3, 5))))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
        looping_agent(provider, calls=5, agent_id="phoenix-agent")
        provider.shutdown()

        query = urlencode(
            {"name": "execute_tool read_file", "limit": 100, "sort": "start_time", "order": "asc"}, doseq=True
        )

        def tool_spans() -> list[dict[str, Any]] | None:
            spans: list[dict[str, Any]] = get_json(f"{base}/v1/projects/default/spans?{query}")["data"]
            return spans if len(spans) == 5 else None

        spans = poll(tool_spans, timeout=60, what="5 tool spans in Phoenix", process=process, log=log)

    events = [{e["name"]: e.get("attributes") or {} for e in span["events"]} for span in spans]
    assert [sorted(e) for e in events] == [
        [],
        ["repeat_tool_guard.repeat"],
        ["repeat_tool_guard.reminder", "repeat_tool_guard.repeat"],
        ["repeat_tool_guard.repeat"],
        ["repeat_tool_guard.reminder", "repeat_tool_guard.repeat"],
    ]
    repeats = [e["repeat_tool_guard.repeat"] for e in events[1:]]
    assert [_attribute(r, "repeat_tool_guard.run_length") for r in repeats] == [2, 3, 4, 5]
    assert {_attribute(r, "repeat_tool_guard.agent_id") for r in repeats} == {"phoenix-agent"}
    assert {_attribute(r, "gen_ai.tool.name") for r in repeats} == {"read_file"}
    assert {_attribute(r, "repeat_tool_guard.error") for r in repeats} == {False}
    assert len({_attribute(r, "repeat_tool_guard.arguments_digest") for r in repeats}) == 1
    gentle, detailed = events[2]["repeat_tool_guard.reminder"], events[4]["repeat_tool_guard.reminder"]
    assert [_attribute(gentle, k) for k in ("repeat_tool_guard.tier", "repeat_tool_guard.threshold")] == ["gentle", 3]
    assert [_attribute(detailed, k) for k in ("repeat_tool_guard.tier", "repeat_tool_guard.threshold")] == [
        "detailed",
        5,
    ]
    assert "identical arguments 3 times in a row" in _attribute(gentle, "repeat_tool_guard.reminder_text")
    assert '{"path":"README.md"}' in _attribute(detailed, "repeat_tool_guard.reminder_text")
    # the guard never touched the tool span's own record
    assert {_attribute(s["attributes"], "gen_ai.tool.name") for s in spans} == {"read_file"}
