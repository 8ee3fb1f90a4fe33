"""``ingest --from chdb://… --replay``: the guard run over the spans of a table recorded where no guard ran,
into the embedded store, exactly as over the same spans in a collector file (the file path is the oracle)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.clickhouse.target import Target
from tests.clickhouse.filling import fill
from tests.ingest.otlp import batches, otlp_json_line, record_workload, store_rows, write_lines

Filled = tuple[list[ReadableSpan], Path, Target]


def test_replaying_the_table_stores_what_replaying_the_same_spans_from_a_file_stores(
    demo_filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, _ = record_workload(guard=False)  # no guard in the process: no facts, no events
    directory = demo_filled[2].path  # the session's chdb directory (one per process), another database
    fill(directory, spans, database="unguarded")
    traces = write_lines(tmp_path / "traces.jsonl", [otlp_json_line(b) for b in batches(spans, 3)])

    assert main(["ingest", str(traces), "--db", str(tmp_path / "file.db"), "--replay", "--quiet"]) == 0
    table = f"chdb://{directory}?database=unguarded"
    assert main(["ingest", "--from", table, "--db", str(tmp_path / "table.db"), "--replay", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[-1].startswith(f"ingested chdb://{directory} (unguarded.otel_traces) into")
        and "replayed 2 traces through the guard" in out[-1]
    )

    from_file, from_table = store_rows(tmp_path / "file.db"), store_rows(tmp_path / "table.db")
    assert from_table == from_file
    assert max(row[15] or 0 for row in from_table) >= 3  # the replay found the loop: a run of 3 or more

    # A range reads only the spans that started in it: none after the workload, all of them around it.
    later, around = tmp_path / "later.db", tmp_path / "around.db"
    assert main(["ingest", "--from", table, "--db", str(later), "--replay", "--quiet", "--since", "2099-01-01"]) == 0
    assert "0 spans" in capsys.readouterr().out.splitlines()[-1] and not later.exists()  # read once: no store made
    window = ["--since", "1h", "--until", "2099-01-01"]
    assert main(["ingest", "--from", table, "--db", str(around), "--replay", "--quiet", *window]) == 0
    assert store_rows(around) == from_file


def test_ingest_refuses_a_file_and_a_table_together_and_a_table_to_follow(
    demo_filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = f"chdb://{demo_filled[2].path}"
    assert main(["ingest", "x.jsonl", "--from", table, "--db", str(tmp_path / "s.db")]) == 2
    assert main(["ingest", "--from", table, "--follow", "--db", str(tmp_path / "s.db")]) == 2
    assert main(["ingest", "--from", f"chdb://{demo_filled[2].path}?table=nope", "--db", str(tmp_path / "s.db")]) == 2
    assert main(["ingest", "x.jsonl", "--since", "24h", "--db", str(tmp_path / "s.db")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 4 and all(line.startswith("otel-repeat-guard: error: ") for line in errors)
    assert "no table otel.nope" in errors[2]
    assert "--since and --until bound a ClickHouse table (--from URL)" in errors[3]
    assert not (tmp_path / "s.db").exists()
