"""Real OTLP JSON for tests: spans from a real SDK pipeline, encoded by the SDK's OTLP encoder.

The JSON is what the Collector's ``file`` exporter writes: the protobuf JSON mapping of
an ``ExportTraceServiceRequest`` (``google.protobuf.json_format``, enums as integers), with
trace and span ids as hex, as the OTLP JSON encoding requires.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import zstandard
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor

# (agent, tool, arguments, denied): the scripted workload, one agent-run per agent.
RESEARCHER = [
    ("grep", {"pattern": "TODO", "path": "src"}),
    ("grep", {"path": "src", "pattern": "TODO"}),  # key order differs: the same call
    ("todo_write", {"items": ["look"]}),  # excluded: transparent
    ("grep", {"pattern": "TODO", "path": "src"}),
    ("grep", {"pattern": "TODO", "path": "src"}),
    ("grep", {"pattern": "TODO", "path": "src"}),  # run of 5: gentle at 3, detailed at 5
    ("read_file", {"path": "src/app.py"}),
    ("read_file", {"path": "src/app.py"}),  # run of 2
]
CODER = [("bash", {"cmd": "rm -rf /"}, True)] * 3 + [("bash", {"cmd": "ls"}, False)]  # a denied call hammered


def record_workload(*, guard: bool, service: str = "agent-svc") -> tuple[list[ReadableSpan], list[Reminder]]:
    """Run the scripted agents through a real TracerProvider, with or without the guard."""
    reminders: list[Reminder] = []
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if guard:
        provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(), reminders.append))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.ingest")
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    with tracer.start_as_current_span("invoke_agent researcher", attributes=attributes):
        for tool, arguments in RESEARCHER:
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", tool)
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder", "gen_ai.agent.id": "coder-1"}
    with tracer.start_as_current_span("invoke_agent coder", attributes=attributes):
        for tool, arguments, denied in CODER:
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", tool)
                span.set_attribute("gen_ai.agent.id", "coder-1")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
                if denied:
                    span.set_attribute("error.type", "permission_denied")
                    span.set_status(Status(StatusCode.ERROR, "denied"))
    provider.shutdown()
    return list(memory.get_finished_spans()), reminders


def _hex_ids(item: dict[str, Any]) -> None:
    for field in ("traceId", "spanId", "parentSpanId"):
        if item.get(field):
            item[field] = base64.b64decode(item[field]).hex()


def otlp_json_line(spans: Sequence[ReadableSpan]) -> bytes:
    """One line as the Collector's file exporter writes it (no newline)."""
    document = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return orjson.dumps(document)


def batches(spans: Sequence[ReadableSpan], size: int) -> list[list[ReadableSpan]]:
    return [list(spans[i : i + size]) for i in range(0, len(spans), size)]


def write_lines(path: Path, lines: Iterable[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def zstd_messages(lines: Iterable[bytes]) -> bytes:
    """The file exporter's default ``compression: zstd``: length-prefixed zstd frames."""
    compressor = zstandard.ZstdCompressor()
    out = bytearray()
    for line in lines:
        frame = compressor.compress(line)
        out += len(frame).to_bytes(4, "big") + frame
    return bytes(out)


def zstd_stream(lines: Iterable[bytes]) -> bytes:
    """The ``exporter.file.nativeCompression`` layout: one zstd stream of JSON lines."""
    return zstandard.ZstdCompressor().compress(b"".join(line + b"\n" for line in lines))


ROW_COLUMNS = (
    "start_ns, end_ns, duration_ns, service_name, trace_id, span_id, parent_span_id, agent_key, agent_name, "
    "agent_known, agent_pending, tool_name, tracked, arguments_digest, error, run_length, reminder_tier, "
    "reminder_threshold, a.preview"
)


def store_rows(db: Path) -> list[tuple[Any, ...]]:
    """Every tool-call row with its argument preview, in a stable order."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            f"SELECT {ROW_COLUMNS} FROM tool_calls LEFT JOIN tool_call_arguments a ON a.call_id = tool_calls.id "
            "ORDER BY end_ns, span_id"
        ).fetchall()
