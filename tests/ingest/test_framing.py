"""Framing collector output into records: the same records however the data is cut into chunks, and a line
too long to be a request is one malformed record, never held whole."""

from __future__ import annotations

import random

from otel_repeat_guard.ingest.framing import Record, RecordSplitter

LINES = [b'{"resourceSpans": []}', b"", b'{"a": "' + b"x" * 3000 + b'"}', b"  ", b"last, with no newline"]
DATA = b"\n".join(LINES)


def _frame(pieces: list[bytes], max_record: int = 1 << 20) -> list[Record]:
    splitter = RecordSplitter(max_record=max_record)
    records = [record for piece in pieces for record in splitter.feed(piece)]
    return records + splitter.finish()


def _cut(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), 40))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def test_records_are_the_same_however_the_data_is_cut_into_chunks() -> None:
    whole = _frame([DATA])
    assert [(r.number, r.data) for r in whole] == [(1, LINES[0]), (3, LINES[2]), (5, LINES[4])]
    assert _frame([DATA[i : i + 1] for i in range(len(DATA))]) == whole  # byte by byte
    for seed in range(20):
        assert _frame(_cut(DATA, seed)) == whole


def test_a_line_longer_than_the_record_bound_is_one_malformed_record_and_its_neighbours_are_kept() -> None:
    huge = b"y" * 50_000  # no newline for 50 times the bound: dropped as it comes
    data = b"first\n" + huge + b"\nthird\n" + huge
    splitter = RecordSplitter(max_record=1_000)
    records: list[Record] = []
    for start in range(0, len(data), 700):
        records += splitter.feed(data[start : start + 700])
        assert splitter.pending <= 1_000  # never more than the bound is held
    records += splitter.finish()
    assert [(r.number, r.data) for r in records] == [(1, b"first"), (2, None), (3, b"third"), (4, None)]
    assert records[1].error == "a line of 50,000 bytes, over the 1,000 a record may be"
    assert records[3].error == records[1].error


def test_a_byte_order_mark_opening_the_file_is_not_part_of_its_first_record() -> None:
    """Editors on Windows save UTF-8 with a mark: the first request is read, not refused as 'not JSON'."""
    marked = b"\xef\xbb\xbf" + DATA
    assert _frame([marked]) == _frame([DATA])
    assert _frame([marked[i : i + 1] for i in range(len(marked))]) == _frame([DATA])  # byte by byte
    assert _frame([b"\xef\xbb\xbf\n" + DATA])[0] == Record(2, LINES[0])  # a mark on a line of its own: a blank line
