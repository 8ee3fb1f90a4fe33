"""``otel-repeat-guard doctor``: real OTLP JSON files in, the guard's own view of them out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig
from otel_repeat_guard.cli.doctor import diagnose
from otel_repeat_guard.cli.main import main
from otel_repeat_guard.core.patterns import ToolFilter

from .otlp import otlp_json_line, record_workload, write_lines

CALL = {"city": "Paris"}


def _spans(*, with_model_content: bool, parentless: int = 0) -> list[ReadableSpan]:
    """An AutoGen-shaped run (tool spans with call ids, no arguments) and some parentless MCP calls."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    runtime = provider.get_tracer("autogen-core")
    mcp = provider.get_tracer("mcp")
    with runtime.start_as_current_span("invoke_agent assistant", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(3):
            with client.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}) as chat:
                if with_model_content:
                    parts = [{"type": "tool_call", "id": f"call_{i}", "name": "lookup", "arguments": CALL}]
                    chat.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}]))
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
            with runtime.start_as_current_span("execute_tool lookup", attributes=attributes) as tool:
                tool.set_attribute("gen_ai.tool.call.id", f"call_{i}")
    for _ in range(parentless):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"}
        with mcp.start_as_current_span("tools/call read_file", attributes=attributes) as tool:
            tool.set_attribute("gen_ai.tool.call.arguments", '{"path": "a"}')
    return list(exporter.get_finished_spans())


def test_a_runtime_the_guard_can_see_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "traces.json", [otlp_json_line(_spans(with_model_content=True))])
    assert main(["doctor", str(path)]) == 0
    out = capsys.readouterr().out
    assert "scope autogen-core" in out
    assert "lookup: 3 calls; arguments from model_request 3; agent runs from agent_span 3" in out
    assert "every recognised tool call can be compared" in out


def test_blind_spots_are_named_with_their_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "traces.json", [otlp_json_line(_spans(with_model_content=False, parentless=2))])
    assert main(["doctor", "--json", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["tool_calls"] == 5 and report["ok"] is False
    spots = {(b["scope"], b["tool"], b["reason"], b["calls"]) for b in report["blind_spots"]}
    assert spots == {("autogen-core", "lookup", "no_arguments", 3), ("mcp", "read_file", "no_agent", 2)}
    fixes = {b["reason"]: b["fix"] for b in report["blind_spots"]}
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in fixes["no_arguments"]
    assert fixes["no_agent"].startswith("wrap your agent loop in a span")


def test_diagnose_agrees_with_a_recorded_workload() -> None:
    spans, _ = record_workload(guard=False)
    report = diagnose(spans)
    assert report.exit_code == 0
    tracked = ToolFilter(GuardConfig().include, GuardConfig().exclude)  # todo_write is excluded by default
    tools = [(s.attributes or {}).get("gen_ai.tool.name") for s in spans]
    assert report.calls == sum(1 for tool in tools if isinstance(tool, str) and tracked[tool]) == 11


def test_a_missing_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no file at" in err


def test_doctor_reads_a_langchain_capture_without_a_failure_logged(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replayed spans are read-only: a decision at a model span's start (the calls its step asked for) is
    recorded without asking the span whether it records, which a ReadableSpan cannot answer."""
    capture = Path(__file__).parent.parent / "fixtures" / "langchain_openinference" / "spans.jsonl"
    with caplog.at_level("WARNING", logger="otel_repeat_guard"):
        assert main(["doctor", str(capture)]) == 0
    assert [record.getMessage() for record in caplog.records] == []
    assert "every recognised tool call can be compared" in capsys.readouterr().out


def test_a_reader_that_stops_reading_ends_doctor_without_a_traceback() -> None:
    """``otel-repeat-guard doctor FILE | head -1``: the pipe closes before doctor writes. It ends as a tool that
    SIGPIPE ends (141), saying nothing: no BrokenPipeError traceback under the reader's output."""
    capture = Path(__file__).parent.parent / "fixtures" / "langchain_openinference" / "spans.jsonl"
    command = [sys.executable, "-m", "otel_repeat_guard.cli.main", "doctor", str(capture)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the interpreter has even started: every write finds no reader
    errors = process.stderr.read().decode()
    assert (process.wait(timeout=60), errors) == (141, "")
