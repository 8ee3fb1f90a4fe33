"""``ingest`` of a Collector file that kept the guard's events only as log records (spans without events) finds
the same loops as the span events do; the log records come from a real SDK logger provider, encoded by the SDK's
OTLP log encoder, as the file exporter writes them."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.cli.doctor import read_files
from otel_repeat_guard.ingest import Ingest, IngestOptions
from otel_repeat_guard.ingest.log_records import decode_logs_record
from otel_repeat_guard.spans.span_events import replace_events
from tests.ingest.otlp import CODER, RESEARCHER, batches, otlp_json_line, store_rows, write_lines


def _workload() -> tuple[list[ReadableSpan], list[object]]:
    """The scripted agents through a real provider with the guard, its log events to a real logger provider."""
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
    provider.add_span_processor(
        RepeatGuardSpanProcessor(GuardConfig(), record_facts=True, logger_provider=logger_provider)
    )
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.ingest")
    for agent, steps in (("researcher", [(t, a, False) for t, a in RESEARCHER]), ("coder", CODER)):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes):
            for tool, arguments, denied in steps:
                with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("gen_ai.tool.name", tool)
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
                    if denied:
                        span.set_status(Status(StatusCode.ERROR, "denied"))
    provider.shutdown()
    logger_provider.shutdown()
    return list(memory.get_finished_spans()), list(logs.get_finished_logs())


def _logs_line(records: list[object], *, names: bool = True) -> bytes:
    """One line as the file exporter writes a logs batch: OTLP JSON, trace and span ids in hex; without
    ``names``, as a Collector older than the ``eventName`` field (OTLP 1.5) writes it."""
    document = json_format.MessageToDict(encode_logs(records), use_integers_for_enums=True)  # type: ignore[arg-type]
    for resource_logs in document.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                if not names:
                    record.pop("eventName", None)
                for field in ("traceId", "spanId"):
                    if record.get(field):
                        record[field] = base64.b64decode(record[field]).hex()
    return orjson.dumps(document)


def _without_events(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [replace_events(span, ()) for span in spans]


def _ingested(path: Path, db: Path) -> tuple[Ingest, str]:
    errors = io.StringIO()
    job = Ingest(path, db, IngestOptions(), errors=errors)
    job.run()
    return job, errors.getvalue()


@pytest.mark.parametrize("names", [True, False])
def test_log_records_and_spans_without_events_find_the_same_loops(tmp_path: Path, names: bool) -> None:
    spans, records = _workload()
    assert sum(1 for s in spans for _ in s.events) == 10  # the loops, as span events
    with_events = write_lines(tmp_path / "events.json", [otlp_json_line(b) for b in batches(spans, 4)])
    bare, logs = [otlp_json_line(b) for b in batches(_without_events(spans), 4)], batches(records, 5)
    lines = [
        _logs_line(logs[0], names=names),
        *bare[:2],
        *(_logs_line(r, names=names) for r in logs[1:]),
        *bare[2:],
    ]  # logs before and after
    only_logs = write_lines(tmp_path / "logs.json", lines)

    _ingested(with_events, tmp_path / "events.db")
    job, problems = _ingested(only_logs, tmp_path / "logs.db")
    assert problems == ""
    expected = store_rows(tmp_path / "events.db")
    assert [row[15:18] for row in expected if (row[15] or 0) > 1] == [  # run length, tier, threshold of each repeat
        (2, None, None),
        (3, "gentle", 3),
        (4, None, None),
        (5, "detailed", 5),
        (2, None, None),
        (2, None, None),
        (3, "gentle", 3),
    ]
    assert store_rows(tmp_path / "logs.db") == expected
    assert job.stats.log_records == len(logs) and job.stats.log_events == 10
    assert f"{len(logs)} log records, 10 guard log events put on their spans" in job.stats.summary()


def test_a_span_that_kept_its_events_gets_no_second_copy_from_the_log_records(tmp_path: Path) -> None:
    spans, records = _workload()
    path = write_lines(tmp_path / "both.json", [_logs_line(records), otlp_json_line(spans)])
    _ingested(path, tmp_path / "both.db")
    _ingested(write_lines(tmp_path / "events.json", [otlp_json_line(spans)]), tmp_path / "events.db")
    assert store_rows(tmp_path / "both.db") == store_rows(tmp_path / "events.db")


def test_only_the_guards_events_are_read_and_evaluations_are_left(tmp_path: Path) -> None:
    _, records = _workload()
    events = decode_logs_record(_logs_line(records))
    names = {event.name for event in events}
    assert names == {"repeat_tool_guard.repeat", "repeat_tool_guard.reminder"}
    kinds = [r.log_record.event_name for r in records]  # type: ignore[attr-defined]
    assert kinds.count("gen_ai.evaluation.result") == 7 + 3  # 7 repeats, 3 reminder outcomes: ingest leaves them
    assert len(kinds) == 10 + 10


def test_doctor_reads_past_the_log_records(tmp_path: Path) -> None:
    spans, records = _workload()
    path = write_lines(tmp_path / "mixed.json", [_logs_line(records), otlp_json_line(_without_events(spans))])
    read = read_files([path])
    assert read.problems == [] and read.requests == 1 and len(read.spans) == len(spans)


def test_the_guards_scope_is_the_one_ingest_reads_names_from() -> None:
    from otel_repeat_guard.decide.log_events import SCOPE
    from otel_repeat_guard.ingest.log_records import GUARD_SCOPE

    assert SCOPE == GUARD_SCOPE


def test_following_a_file_spans_wait_for_their_log_events_only_once_it_has_shown_one() -> None:
    from otel_repeat_guard.ingest.log_records import FOLLOW_HOLD_S, LogEvent, LogJoin

    spans, _ = _workload()
    bare = _without_events(spans)
    join = LogJoin(hold=False)  # following: a file of traces alone goes on as it comes
    assert join.spans(bare[:2], 0.0) == bare[:2]
    context = bare[3].context
    join.events([LogEvent(context.trace_id, context.span_id, "repeat_tool_guard.repeat", {"x": 1}, 5)])
    assert join.spans(bare[2:4], 1.0) == []  # held now: their log events may come in a later batch
    assert join.due(1.0 + FOLLOW_HOLD_S - 0.5) == []
    released = join.due(1.0 + FOLLOW_HOLD_S)
    assert [s.context.span_id for s in released] == [s.context.span_id for s in bare[2:4]]
    assert [e.name for e in released[1].events] == ["repeat_tool_guard.repeat"] and not released[0].events
    assert join.joined == 1 and join.log_records == 1 and join.flush() == []
