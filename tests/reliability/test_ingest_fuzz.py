"""Fuzzing ``ingest``: files mixing good OTLP JSON lines with broken ones.

Good lines are real SDK spans (a TracerProvider with the guard), encoded by the official
OTLP encoder and ``json_format`` exactly as the Collector's file exporter writes them.
Bad lines are made from good ones: cut off anywhere, a field given a value of the wrong
type, or a trace/span/parent id of the wrong length, or an attribute or event no parser reads. A
line that is no request is reported as ``PATH:LINE`` and skipped; one span of a request that cannot
be read costs only itself (the line is a Collector's batch), so the other spans of that line are
stored like those of every good line; and one attribute or event costs only itself, not its span.
"""

from __future__ import annotations

import io
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import format_span_id, format_trace_id

from otel_repeat_guard.ingest import Ingest, IngestOptions, NoTraceRecords
from tests.ingest.otlp import batches, otlp_json_line, record_workload

EXAMPLES = 1000


@dataclass(frozen=True)
class GoodLine:
    data: bytes
    tool_spans: frozenset[tuple[str, str]]
    agent_spans: frozenset[tuple[str, str]]


def _good_lines() -> list[GoodLine]:
    lines = []
    for n in range(12):
        spans, _ = record_workload(guard=True, service=f"svc-{n}")
        for batch in batches(spans, 5):
            ids = {s: (format_trace_id(s.context.trace_id), format_span_id(s.context.span_id)) for s in batch}
            lines.append(
                GoodLine(
                    otlp_json_line(batch),
                    frozenset(ids[s] for s in batch if s.name.startswith("execute_tool")),
                    frozenset(ids[s] for s in batch if s.name.startswith("invoke_agent")),
                )
            )
    return lines


GOOD = _good_lines()
HEX = "0123456789abcdef"

# Values no OTLP JSON parser may accept for these span fields.
WRONG_TYPES: dict[str, list[Any]] = {
    "name": [7, 1.5, True, [], {"text": "x"}],
    "startTimeUnixNano": ["soon", [], {}, True, -5, 1.5],
    "endTimeUnixNano": ["later", [1], {"n": 1}, False, -1],
    "attributes": ["gen_ai.tool.name=grep", 7, {"key": "k"}],  # (an odd *entry* costs only itself: odd_value)
    "kind": [[], {}, 1.5, True],  # (an unknown enum *name* is accepted: ignore_unknown_fields, for newer OTLP)
    "status": ["ok", 7, [], {"code": 1.5}, {"code": True}],  # (an unknown code *name* is accepted, like kind)
    "events": ["repeat", 3, {"name": "x"}],
    "flags": ["remote", -1, [], 1.5],
}
# Entries no OTLP JSON parser may accept in a list of attributes or events: each is dropped, its span kept.
ODD_ENTRIES: dict[str, list[Any]] = {
    "attributes": [7, "k=v", {"key": "k", "value": {"intValue": "seven"}}, {"key": "k", "value": {"boolValue": 1}}],
    "events": [7, {"name": "x", "timeUnixNano": "never"}, {"name": "x", "attributes": {"k": 1}}],
}
# Lengths a hex id must not have (trace ids are 32 hex digits, span ids 16; a parent may be empty).
BAD_LENGTHS = {"traceId": [n for n in range(65) if n != 32], "spanId": [n for n in range(1, 33) if n != 16]}
BAD_LENGTHS["parentSpanId"] = BAD_LENGTHS["spanId"]


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


@dataclass(frozen=True)
class BadLine:
    data: bytes
    kept: GoodLine | None  # one span could not be read: the rest of the line, which is stored; else nothing is


def _without(good: GoodLine, span: dict[str, Any]) -> GoodLine | None:
    """``good`` but ``span`` (read before it is spoiled); None when it was the line's only span."""
    gone = (span["traceId"], span["spanId"])
    kept = GoodLine(good.data, good.tool_spans - {gone}, good.agent_spans - {gone})
    return kept if kept.tool_spans or kept.agent_spans else None


@st.composite
def truncated(draw: st.DrawFn) -> BadLine:
    line = draw(st.sampled_from(GOOD)).data
    return BadLine(line[: draw(st.integers(1, len(line) - 1))], None)


@st.composite
def wrong_type(draw: st.DrawFn) -> BadLine:
    good = draw(st.sampled_from(GOOD))
    document = orjson.loads(good.data)
    target = draw(st.sampled_from(["span", "spans", "scopeSpans", "resourceSpans", "document"]))
    if target == "document":
        return BadLine(orjson.dumps(draw(st.sampled_from([[document], "resourceSpans", 42, None, True]))), None)
    kept = None
    if target == "span":
        field = draw(st.sampled_from(sorted(WRONG_TYPES)))
        span = draw(st.sampled_from(_spans(document)))
        kept = _without(good, span)
        span[field] = draw(st.sampled_from(WRONG_TYPES[field]))
    elif target == "spans":
        document["resourceSpans"][0]["scopeSpans"][0]["spans"] = draw(st.sampled_from(["x", 7, {"name": "x"}]))
    elif target == "scopeSpans":
        document["resourceSpans"][0]["scopeSpans"] = draw(st.sampled_from(["x", 7, [7], {"spans": []}]))
    else:
        document["resourceSpans"] = draw(st.sampled_from(["x", 7, [7], {"scopeSpans": []}]))
    return BadLine(orjson.dumps(document), kept)


@st.composite
def wrong_id(draw: st.DrawFn) -> BadLine:
    good = draw(st.sampled_from(GOOD))
    document = orjson.loads(good.data)
    field = draw(st.sampled_from(sorted(BAD_LENGTHS)))
    size = draw(st.sampled_from(BAD_LENGTHS[field]))
    span = draw(st.sampled_from(_spans(document)))
    kept = _without(good, span)
    span[field] = draw(st.text(alphabet=HEX, min_size=size, max_size=size))
    return BadLine(orjson.dumps(document), kept)


@dataclass(frozen=True)
class OddLine:
    data: bytes
    good: GoodLine  # one value of a span could not be read: the whole line is stored all the same


@st.composite
def odd_value(draw: st.DrawFn) -> OddLine:
    good = draw(st.sampled_from(GOOD))
    document = orjson.loads(good.data)
    span = draw(st.sampled_from(_spans(document)))
    field = draw(st.sampled_from(sorted(ODD_ENTRIES)))
    entries = span.setdefault(field, [])
    entries.insert(draw(st.integers(0, len(entries))), draw(st.sampled_from(ODD_ENTRIES[field])))
    return OddLine(orjson.dumps(document), good)


@dataclass(frozen=True)
class Case:
    lines: list[bytes]  # without newlines; b"" is a blank line
    good: list[GoodLine]  # what is stored: the good lines, and the rest of each line that lost one span
    bad_numbers: list[int]  # lines that are no request
    spoiled_numbers: list[int]  # lines that lost one span
    odd_numbers: list[int]  # lines that lost one value of a span, and no span


@st.composite
def cases(draw: st.DrawFn) -> Case:
    good = draw(st.lists(st.sampled_from(GOOD), unique=True, max_size=6))
    bad = draw(st.lists(st.one_of(truncated(), wrong_type(), wrong_id(), odd_value()), min_size=1, max_size=6))
    blank = draw(st.integers(0, 2))
    items: list[GoodLine | BadLine | OddLine | None] = [*good, *bad, *([None] * blank)]
    order = draw(st.permutations(range(len(items))))
    lines, stored_lines, bad_numbers, spoiled_numbers, odd_numbers = [], list(good), [], [], []
    for number, index in enumerate(order, start=1):
        item = items[index]
        if isinstance(item, GoodLine):
            lines.append(item.data)
        elif item is None:
            lines.append(b"")
        elif isinstance(item, OddLine):
            lines.append(item.data)
            odd_numbers.append(number)
            stored_lines.append(item.good)
        else:
            lines.append(item.data)
            if item.kept is None:
                bad_numbers.append(number)
            else:
                spoiled_numbers.append(number)
                stored_lines.append(item.kept)
    return Case(lines, stored_lines, bad_numbers, spoiled_numbers, odd_numbers)


def stored(db: Path, table: str) -> set[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return {(str(t), str(s)) for t, s in conn.execute(f"SELECT trace_id, span_id FROM {table}")}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), final_newline=st.booleans())
def test_every_bad_line_is_reported_and_every_good_line_stored(case: Case, final_newline: bool) -> None:
    assert all(b"\n" not in line for line in case.lines)
    with tempfile.TemporaryDirectory() as tmp:
        path, db = Path(tmp) / "traces.jsonl", Path(tmp) / "store.db"
        path.write_bytes(b"\n".join(case.lines) + (b"\n" if final_newline else b""))
        errors = io.StringIO()
        job = Ingest(path, db, IngestOptions(), errors=errors)
        if not case.good:  # no OTLP request at all: refused in one line, no store, no line per record
            with pytest.raises(NoTraceRecords, match="holds no OTLP trace record"):
                job.run()
            assert not db.exists() and errors.getvalue() == ""
            return
        stats = job.run()

        reported = errors.getvalue().splitlines()
        records = [line for line in reported if ": skipped malformed record: " in line]
        spans = [line for line in reported if ": skipped malformed span " in line]
        values = [line for line in reported if ": dropped malformed " in line]
        assert len(records) + len(spans) + len(values) == len(reported)
        assert [line.split(": dropped malformed ", 1)[0] for line in values] == [
            f"{path}:{n}" for n in case.odd_numbers
        ]
        assert [line.split(": skipped malformed record: ", 1)[0] for line in records] == [
            f"{path}:{n}" for n in case.bad_numbers
        ]
        assert all(line.split(": skipped malformed record: ", 1)[1] for line in records)  # each says why
        assert [line.split(": skipped malformed span ", 1)[0] for line in spans] == [
            f"{path}:{n}" for n in case.spoiled_numbers
        ]
        assert (stats.malformed, stats.malformed_spans) == (len(case.bad_numbers), len(case.spoiled_numbers))
        assert stats.malformed_values == len(case.odd_numbers)
        assert stats.records == sum(1 for line in case.lines if line)
        tools, agents = (
            set().union(*(g.tool_spans for g in case.good)),
            set().union(*(g.agent_spans for g in case.good)),
        )
        assert stats.spans == sum(len(g.tool_spans) + len(g.agent_spans) for g in case.good)
        assert stats.new_spans == len(tools) + len(agents)  # a spoiled copy of a good line: its spans stored once
        assert stored(db, "tool_calls") == tools
        assert stored(db, "agent_runs") == agents
