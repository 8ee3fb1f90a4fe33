"""OTLP JSON lines made from real SDK spans decode back into equivalent ReadableSpans."""

from __future__ import annotations

import orjson
import pytest

from otel_repeat_guard.ingest.otlp_json import MalformedRecord, decode_line
from tests.ingest.otlp import otlp_json_line, record_workload


def test_round_trip_keeps_everything_the_store_reads() -> None:
    spans, _ = record_workload(guard=True)
    decoded = decode_line(otlp_json_line(spans))
    assert len(decoded) == len(spans)
    by_id = {s.context.span_id: s for s in decoded}
    for original in spans:
        copy = by_id[original.context.span_id]
        assert copy.name == original.name
        assert copy.context.trace_id == original.context.trace_id
        assert (copy.parent.span_id if copy.parent else None) == (original.parent.span_id if original.parent else None)
        assert dict(copy.attributes) == dict(original.attributes)
        assert copy.status.status_code == original.status.status_code
        assert copy.kind == original.kind
        assert (copy.start_time, copy.end_time) == (original.start_time, original.end_time)
        assert copy.resource.attributes["service.name"] == "agent-svc"
        assert copy.instrumentation_scope.name == "tests.ingest"
        assert [(e.name, dict(e.attributes), e.timestamp) for e in copy.events] == [
            (e.name, dict(e.attributes), e.timestamp) for e in original.events
        ]
    # the guard's typed event values survive the trip: ints stay ints, bools stay bools
    repeat = next(e for s in decoded for e in s.events if e.name == "repeat_tool_guard.repeat")
    assert isinstance(repeat.attributes["repeat_tool_guard.run_length"], int)
    assert isinstance(repeat.attributes["repeat_tool_guard.error"], bool)


def test_ids_are_hex_in_the_line_as_the_collector_writes_them() -> None:
    spans, _ = record_workload(guard=False)
    document = orjson.loads(otlp_json_line(spans[:1]))
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"] == format(spans[0].context.trace_id, "032x")
    assert span["spanId"] == format(spans[0].context.span_id, "016x")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"resourceSpans": [', "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"resourceMetrics": []}', "no resourceSpans"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz", "spanId": "00"}]}]}]}', "traceId"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 7, "kind": "sideways"}]}]}]}', "not an OTLP"),
    ],
)
def test_malformed_lines_say_why(line: bytes, reason: str) -> None:
    with pytest.raises(MalformedRecord, match=reason):
        decode_line(line)
