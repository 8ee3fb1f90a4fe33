"""``ingest`` on real OTLP JSON: same rows as the exporter, idempotent, tolerant, follows rotation, zstd."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.cli.doctor import diagnose
from otel_repeat_guard.ingest import Ingest, IngestOptions, decode_line
from otel_repeat_guard.ingest.progress import Progress
from otel_repeat_guard.store import SQLiteSpanExporter
from tests.ingest.otlp import (
    batches,
    otlp_json_line,
    record_workload,
    store_rows,
    write_lines,
    zstd_messages,
    zstd_stream,
)


def exported_rows(spans: list[ReadableSpan], db: Path, size: int = 3) -> list[tuple[object, ...]]:
    """The rows the store's own exporter writes for these spans, batch by batch as a BSP would."""
    exporter = SQLiteSpanExporter(db)
    for batch in batches(spans, size):
        exporter.export(batch)
    exporter.shutdown()
    return store_rows(db)


def ingest(path: Path, db: Path, **options: object) -> tuple[Ingest, str]:
    errors = io.StringIO()
    job = Ingest(path, db, IngestOptions(**options), errors=errors)  # type: ignore[arg-type]
    job.run()
    return job, errors.getvalue()


@pytest.fixture
def guarded() -> list[ReadableSpan]:
    return record_workload(guard=True)[0]


def test_ingested_rows_equal_exported_rows(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    expected = exported_rows(guarded, tmp_path / "exported.db")
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(b) for b in batches(guarded, 3)])
    job, errors = ingest(path, tmp_path / "ingested.db")
    assert errors == ""
    assert store_rows(tmp_path / "ingested.db") == expected
    assert len(expected) == 12  # every tool call of the workload
    runs = [row[15] for row in expected if row[11] == "grep"]
    assert runs == [1, 2, 3, 4, 5]
    tiers = [(row[11], row[16], row[17]) for row in expected if row[16] is not None]
    assert tiers == [("grep", "gentle", 3), ("grep", "detailed", 5), ("bash", "gentle", 3)]
    assert job.stats.spans == len(guarded) and job.stats.new_spans == len(guarded)


def test_second_ingest_inserts_nothing(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(b) for b in batches(guarded, 4)])
    db = tmp_path / "store.db"
    ingest(path, db)
    first = store_rows(db)
    job, _ = ingest(path, db)
    assert store_rows(db) == first
    assert job.stats.new_spans == 0 and job.stats.duplicate_spans == len(guarded)
    # a Collector retry that wrote a batch twice within one file is also stored once
    doubled = write_lines(tmp_path / "doubled.jsonl", [otlp_json_line(guarded)] * 2)
    job, _ = ingest(doubled, tmp_path / "doubled.db")
    assert len(store_rows(tmp_path / "doubled.db")) == len(first)
    assert job.stats.duplicate_spans == len(guarded)


def test_malformed_lines_are_reported_skipped_and_counted(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    good = [otlp_json_line(b) for b in batches(guarded, 4)]
    lines = [good[0], b'{"resourceSpans": [{"scopeSpans": [', good[1], b"", b"not json at all", *good[2:]]
    lines.append(good[0][: len(good[0]) // 2])  # the writer died mid-line: no newline, half a request
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines))
    job, errors = ingest(path, tmp_path / "store.db")
    reported = errors.splitlines()
    assert [line.split(": ", 1)[0] for line in reported] == [f"{path}:2", f"{path}:5", f"{path}:{len(lines)}"]
    assert all("skipped malformed record" in line for line in reported)
    assert job.stats.malformed == 3
    assert job.stats.records == len(lines) - 1  # the blank line is no record
    assert len(store_rows(tmp_path / "store.db")) == 12  # every good line made it


_ODD_SPANS = {
    "an id as a number": {"spanId": 12345},
    "an id that is not hex": {"parentSpanId": "xyz"},
    "a time in words": {"startTimeUnixNano": "yesterday"},
    "a time past 64 bits": {"endTimeUnixNano": "1" * 30},
    "a status as a word": {"status": "error"},
    "attributes as an object": {"attributes": {"n": 1}},
    "a name as a number": {"name": 5},
    "no object at all": None,
}


@pytest.mark.parametrize("odd", list(_ODD_SPANS.values()), ids=list(_ODD_SPANS))
def test_one_odd_span_costs_only_itself_not_its_batch(
    tmp_path: Path, guarded: list[ReadableSpan], odd: dict[str, object] | None
) -> None:
    """A Collector writes a whole batch, often of many traces, as one line: a span of it that cannot be read is
    skipped, named and counted, and every other span of the line is stored as if it were not there."""
    expected = exported_rows(guarded, tmp_path / "exported.db")
    document = orjson.loads(otlp_json_line(guarded))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.insert(2, None if odd is None else {**spans[0], "spanId": "00000000000000ff", "name": "odd", **odd})
    path = write_lines(tmp_path / "traces.jsonl", [orjson.dumps(document)])
    job, errors = ingest(path, tmp_path / "store.db")
    assert store_rows(tmp_path / "store.db") == expected
    assert (job.stats.malformed, job.stats.malformed_spans, job.stats.spans) == (0, 1, len(guarded))
    [line] = errors.splitlines()
    assert line.startswith(f"{path}:1: skipped malformed span ")
    assert "1 malformed spans skipped" in job.stats.summary()


_ODD_VALUES: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "an integer past 64 bits": lambda _, span: span["attributes"].append({"key": "n", "value": {"intValue": "1" * 30}}),
    "an attribute that is no object": lambda _, span: span["attributes"].insert(0, 7),
    "a bool in quotes on an event": lambda _, span: span["events"][0]["attributes"].append(
        {"key": "b", "value": {"boolValue": "yes"}}
    ),
    "an event with a time in words": lambda _, span: span["events"].append({"name": "x", "timeUnixNano": "never"}),
    "a link to an id that is not hex": lambda _, span: span.setdefault("links", []).append(
        {"traceId": "zz", "spanId": "00000000000000ff"}
    ),
    "a resource attribute of no known type": lambda document, _: document["resourceSpans"][0]["resource"][
        "attributes"
    ].append({"key": "r", "value": {"intValue": [1]}}),
}


@pytest.mark.parametrize("spoil", list(_ODD_VALUES.values()), ids=list(_ODD_VALUES))
def test_one_odd_value_costs_only_itself_not_its_span(
    tmp_path: Path, guarded: list[ReadableSpan], spoil: Callable[[dict[str, Any], dict[str, Any]], None]
) -> None:
    """An attribute, an event or a link that cannot be read is dropped, named and counted; its span, with its tool
    name and arguments, is stored as if the value were not there (the guard's repeat event included)."""
    expected = exported_rows(guarded, tmp_path / "exported.db")
    document = orjson.loads(otlp_json_line(guarded))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    [repeated] = [s for s in spans if s.get("events")][:1]  # a tool span with the guard's repeat event
    spoil(document, repeated)
    path = write_lines(tmp_path / "traces.jsonl", [orjson.dumps(document)])
    job, errors = ingest(path, tmp_path / "store.db")
    assert store_rows(tmp_path / "store.db") == expected
    assert (job.stats.malformed, job.stats.malformed_spans, job.stats.malformed_values) == (0, 0, 1)
    assert job.stats.spans == len(guarded)
    [line] = errors.splitlines()
    assert line.startswith(f"{path}:1: dropped malformed ")
    assert "1 malformed values dropped, their spans kept" in job.stats.summary()


@pytest.mark.parametrize("layout", [zstd_messages, zstd_stream], ids=["length-prefixed-frames", "native-stream"])
def test_zstd_layouts(tmp_path: Path, guarded: list[ReadableSpan], layout: Callable[[list[bytes]], bytes]) -> None:
    expected = exported_rows(guarded, tmp_path / "exported.db")
    path = tmp_path / "traces.jsonl.zst"
    path.write_bytes(layout([otlp_json_line(b) for b in batches(guarded, 3)]))
    job, errors = ingest(path, tmp_path / "store.db")
    assert errors == ""
    assert store_rows(tmp_path / "store.db") == expected
    assert job.stats.malformed == 0


def test_corrupt_zstd_frame_is_skipped(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    lines = [otlp_json_line(b) for b in batches(guarded, 3)]
    data = bytearray(zstd_messages(lines))
    first = int.from_bytes(data[:4], "big")
    data[10:first] = b"\x00" * (first - 10)  # destroy the first frame's content, keep its length
    path = tmp_path / "traces.zst"
    path.write_bytes(bytes(data))
    job, errors = ingest(path, tmp_path / "store.db")
    assert errors.startswith(f"{path}:1: skipped malformed record")
    assert job.stats.malformed == 1 and job.stats.records == len(lines)


def test_a_zstd_stream_cut_inside_its_last_frame_is_reported(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    """The file exporter's native stream, its writer stopped mid-frame: the frames before are read, and the cut
    one is a malformed record, never an input that simply ended."""
    lines = [otlp_json_line(b) for b in batches(guarded, 3)]
    whole = [zstd_stream([line]) for line in lines]  # one frame a line, back to back
    path = tmp_path / "traces.jsonl.zst"
    path.write_bytes(b"".join(whole[:-1]) + whole[-1][: len(whole[-1]) // 2])
    job, errors = ingest(path, tmp_path / "store.db")
    assert (
        errors.splitlines()[-1]
        == f"{path}:{len(lines)}: skipped malformed record: truncated zstd stream: its last frame is cut short"
    )
    assert job.stats.requests == len(lines) - 1 and job.stats.malformed >= 1


@pytest.fixture
def following(tmp_path: Path) -> Iterator[Callable[..., Ingest]]:
    jobs: list[tuple[Ingest, threading.Thread]] = []

    def start(path: Path, db: Path, **options: object) -> Ingest:
        job = Ingest(path, db, IngestOptions(follow=True, poll_seconds=0.05, **options), errors=io.StringIO())  # type: ignore[arg-type]
        thread = threading.Thread(target=job.run, daemon=True)
        thread.start()
        jobs.append((job, thread))
        return job

    yield start
    for job, thread in jobs:
        job.stop.set()
        thread.join(10)


def wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_follow_handles_growth_a_partial_line_and_rotation(
    tmp_path: Path, guarded: list[ReadableSpan], following: Callable[..., Ingest]
) -> None:
    lines = [otlp_json_line(b) for b in batches(guarded, 2)]
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(lines[0] + b"\n")
    job = following(path, db)
    wait_for(lambda: job.stats.records == 1)
    with path.open("ab") as out:  # a partially written line: nothing may be lost or reported
        out.write(lines[1][:50])
        out.flush()
        time.sleep(0.3)
        assert job.stats.records == 1 and job.stats.malformed == 0
        out.write(lines[1][50:] + b"\n" + lines[2] + b"\n" + lines[3][:40])
    time.sleep(0.2)
    os.rename(path, tmp_path / "traces-2026-01-01T00-00-00.000.jsonl")  # rotation, as lumberjack does it
    with (tmp_path / "traces-2026-01-01T00-00-00.000.jsonl").open("ab") as old:
        old.write(lines[3][40:] + b"\n")  # the writer's last flush to the old file
    path.write_bytes(b"".join(line + b"\n" for line in lines[4:]))
    wait_for(lambda: job.stats.records == len(lines))
    wait_for(lambda: len(store_rows(db)) == 12)
    assert job.stats.malformed == 0
    assert store_rows(db) == exported_rows(guarded, tmp_path / "exported.db", size=2)


def test_follow_restarts_after_truncation(
    tmp_path: Path, guarded: list[ReadableSpan], following: Callable[..., Ingest]
) -> None:
    lines = [otlp_json_line(b) for b in batches(guarded, 6)]
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    job = following(path, db)
    wait_for(lambda: job.stats.records == len(lines))
    path.write_bytes(lines[0] + b"\n")  # truncated in place and rewritten
    # the record is counted when read, its spans when written: wait for the write
    wait_for(lambda: job.stats.duplicate_spans == 6)
    assert job.stats.records == len(lines) + 1 and job.stats.malformed == 0


def test_progress_on_a_large_file(tmp_path: Path) -> None:
    spans = [s for _ in range(30) for s in record_workload(guard=True, service=f"svc-{_}")[0]]
    path = write_lines(tmp_path / "big.jsonl", [otlp_json_line(b) for b in batches(spans, 5)])
    assert path.stat().st_size > 1_000_000 / 4
    shown = io.StringIO()
    job = Ingest(path, tmp_path / "store.db", progress=Progress(shown, min_bytes=100_000), errors=io.StringIO())
    job._progress._interval = 0  # type: ignore[union-attr]  # every chunk, so the test sees several
    job.run()
    lines = shown.getvalue().splitlines()
    assert lines and lines[-1].startswith(f"{path}: 100% ")
    assert f"{len(spans):,} spans ({len(spans):,} new), 0 malformed" in lines[-1]


def test_replay_finds_the_loops_of_a_run_recorded_without_the_guard(tmp_path: Path) -> None:
    unguarded, _ = record_workload(guard=False)
    assert not any(e.name.startswith("repeat_tool_guard") for s in unguarded for e in s.events)
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(b) for b in batches(unguarded, 3)])

    job, _ = ingest(path, tmp_path / "plain.db")
    assert {row[15] for row in store_rows(tmp_path / "plain.db")} <= {1, None}  # no loops without replay

    job, _ = ingest(path, tmp_path / "replayed.db", replay=True)
    assert job.stats.replayed_traces == 2 and job.stats.guarded_traces == 0
    replayed = store_rows(tmp_path / "replayed.db")
    # the same workload recorded live with the guard: same agents, same run lengths
    live = exported_rows(record_workload(guard=True)[0], tmp_path / "live.db")

    def loops(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
        return [(r[8], r[11], r[14], r[15]) for r in rows]  # agent name, tool, error, run length

    assert loops(replayed) == loops(live)
    assert [r[15] for r in replayed if r[11] == "grep"] == [1, 2, 3, 4, 5]
    assert [r[15] for r in replayed if r[11] == "bash"] == [1, 2, 3, 1]
    assert all(r[16] is None for r in replayed)  # no reminder was delivered to these agents
    agents = {r[7] for r in replayed}
    assert {str(a).split("#")[0] for a in agents} == {"coder-1", "researcher"}  # keyed by run, each agent's


def test_replay_plays_a_batch_the_collector_wrote_twice_once(tmp_path: Path) -> None:
    """A retried batch holds the same spans again: replayed twice, each call would extend its run twice."""
    unguarded, _ = record_workload(guard=False)
    lines = [otlp_json_line(b) for b in batches(unguarded, 3)]
    once = write_lines(tmp_path / "once.jsonl", lines)
    twice = write_lines(tmp_path / "twice.jsonl", [line for line in lines for _ in range(2)])
    ingest(once, tmp_path / "once.db", replay=True)
    job, _ = ingest(twice, tmp_path / "twice.db", replay=True)
    assert store_rows(tmp_path / "twice.db") == store_rows(tmp_path / "once.db")
    assert [r[15] for r in store_rows(tmp_path / "twice.db") if r[11] == "grep"] == [1, 2, 3, 4, 5]
    assert job.stats.duplicate_spans == len(unguarded)
    doubled = diagnose(span for line in [lines[0], *lines] for span in decode_line(line))
    assert doubled.calls == diagnose(span for line in lines for span in decode_line(line)).calls  # doctor, too


def test_replay_passes_guarded_traces_through(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(guarded)])
    job, _ = ingest(path, tmp_path / "store.db", replay=True)
    assert job.stats.guarded_traces == 2 and job.stats.replayed_traces == 0
    assert store_rows(tmp_path / "store.db") == exported_rows(guarded, tmp_path / "exported.db")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_ingest(tmp_path: Path, guarded: list[ReadableSpan]) -> None:
    path = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(guarded), b"garbage"])
    db = tmp_path / "store.db"
    done = cli("ingest", str(path), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert f"{path}:2: skipped malformed record: not JSON" in done.stderr
    assert f"{len(guarded)} spans: {len(guarded)} new, 0 already stored; 1 malformed" in done.stdout
    again = cli("ingest", str(path), "--db", str(db))
    assert f"0 new, {len(guarded)} already stored" in again.stdout
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM tool_calls").fetchone() == (12,)
    missing = cli("ingest", str(tmp_path / "nope.jsonl"), "--db", str(db))
    assert missing.returncode == 2 and "no file at" in missing.stderr


def test_replay_of_calls_whose_run_never_came_says_they_could_not_be_compared(tmp_path: Path) -> None:
    """A file holding the tool spans of a trace whose agent span is in a later file: the guard cannot key the
    calls by their run, so they are stored as calls it could not compare (no_agent), as doctor reports them,
    not as calls that each started a run of one."""
    unguarded, _ = record_workload(guard=False)
    tools = [  # the researcher's: the coder's carry their own gen_ai.agent.id, which keys them without a run
        span for span in unguarded if span.name.startswith("execute_tool") and "gen_ai.agent.id" not in span.attributes
    ]
    path = write_lines(tmp_path / "part1.jsonl", [otlp_json_line(tools)])
    ingest(path, tmp_path / "store.db", replay=True)
    with sqlite3.connect(tmp_path / "store.db") as conn:
        rows = conn.execute("SELECT tracked, unguarded_reason FROM tool_calls").fetchall()
    assert len(rows) == len(tools) and set(rows) == {(1, "no_agent"), (0, None)}
    assert diagnose(tools).exit_code == 1  # doctor says the same of the same spans
