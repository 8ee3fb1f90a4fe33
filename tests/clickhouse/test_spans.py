"""The exporter's rows read back as the spans it was handed: what ``ingest --from clickhouse://`` replays."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.spans import TableSpans, row_span
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.core.facts import ISSUER, RUN, WASTED


def _identity(span: ReadableSpan) -> tuple[object, ...]:
    context = span.context
    assert context is not None
    parent = None if span.parent is None else span.parent.span_id
    return (context.trace_id, context.span_id, parent, span.name, span.kind, span.start_time, span.end_time)


def _read(target: Target, **options: int) -> list[ReadableSpan]:
    source = TableSpans(ChdbClient(target), 0, 2**63 - 1, **options)
    return [span for batch in source.batches() for span in batch.spans]


Filled = tuple[list[ReadableSpan], Path, Target]


def test_every_row_comes_back_once_as_the_span_it_was_in_pages_of_any_size(demo_filled: Filled) -> None:
    spans, _, target = demo_filled
    for page_rows in (7, 5_000):
        read = _read(target, page_rows=page_rows)
        assert sorted(map(_identity, read)) == sorted(map(_identity, spans))


def test_the_values_the_guard_reads_as_numbers_and_flags_come_back_typed(demo_filled: Filled) -> None:
    spans, _, target = demo_filled
    read = {span.context.span_id: span for span in _read(target)}  # type: ignore[union-attr]
    keys = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", WASTED, RUN, ISSUER, "gen_ai.tool.name")
    compared = 0
    for span in spans:
        original, back = span.attributes or {}, read[span.context.span_id].attributes or {}  # type: ignore[union-attr]
        for key in keys:
            if key in original:
                assert back[key] == original[key] and type(back[key]) is type(original[key]), (key, back[key])
                compared += 1
        assert [e.name for e in read[span.context.span_id].events] == [e.name for e in span.events]  # type: ignore[union-attr]
    assert compared > 100


def test_a_row_whose_ids_are_not_hex_is_refused_alone() -> None:
    row = {"trace_id": "not-hex", "span_id": "00f067aa0ba902b7", "parent_id": ""}
    try:
        row_span(row)
    except ValueError as exc:
        assert "TraceId 'not-hex'" in str(exc)
    else:
        raise AssertionError("a row with a bad TraceId became a span")


@pytest.mark.parametrize("span_id", ["0x00000000000a04", "0000_0000_00a04", " 00000000000a04 "[:16]])
def test_an_id_of_other_than_hex_digits_is_refused_not_read_as_another(span_id: str) -> None:
    """int(_, 16) takes a 0x prefix, underscores and spaces: each of these would have become span 0xa04."""
    row = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": span_id, "parent_id": ""}
    with pytest.raises(ValueError, match=f"SpanId {span_id!r} is not a 8-byte id in hex"):
        row_span(row)
