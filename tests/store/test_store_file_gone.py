"""The exporter notices when its SQLite file is deleted or replaced while it runs: it writes the next batch
into a store at the path, never into the unlinked or the old file, and counts what it could not write."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from otel_repeat_guard.store import SQLiteSpanExporter
from tests.ingest.otlp import record_workload


def _tool_spans() -> list[ReadableSpan]:
    spans = record_workload(guard=True)[0]
    return [span for span in spans if (span.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]


def _span_ids(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {str(row[0]) for row in conn.execute("SELECT span_id FROM tool_calls")}


def _ids(spans: list[ReadableSpan]) -> set[str]:
    return {f"{span.context.span_id:016x}" for span in spans if span.context is not None}


def _remove_store(db: Path) -> None:
    """What `rm repeat-guard.db*` does while the agent runs."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("with_wal", [True, False], ids=["db-wal-and-shm-removed", "only-the-db-removed"])
def test_a_store_deleted_while_the_exporter_runs_is_made_again_for_the_next_batch(
    tmp_path: Path, with_wal: bool, caplog: pytest.LogCaptureFixture
) -> None:
    spans = _tool_spans()
    first, second = spans[:5], spans[5:]
    db = tmp_path / "store.db"
    exporter = SQLiteSpanExporter(db)
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=10)  # the export thread, as in an agent
    for span in first:
        processor.on_end(span)
    assert processor.force_flush(10_000)
    assert _span_ids(db) == _ids(first)
    if with_wal:
        _remove_store(db)
    else:
        db.unlink()
    with caplog.at_level(logging.WARNING, logger="otel_repeat_guard"):
        for span in second:
            processor.on_end(span)
        assert processor.force_flush(10_000)
    assert db.exists()
    assert _span_ids(db) == _ids(second)  # the new file got the batch: nothing went into the unlinked one
    assert exporter.reopened == 1 and exporter.unwritten_spans == 0
    assert f"store {db} was deleted or replaced while in use" in caplog.text
    processor.shutdown()  # type: ignore[no-untyped-call]


def test_a_store_replaced_while_the_exporter_runs_gets_the_rows_not_the_old_file(tmp_path: Path) -> None:
    spans = _tool_spans()
    db, kept = tmp_path / "store.db", tmp_path / "old-inode.db"
    exporter = SQLiteSpanExporter(db)
    assert exporter.export(spans[:4]) is SpanExportResult.SUCCESS
    os.link(db, kept)  # a second name for the file the exporter opened, to look inside it afterwards
    restored = tmp_path / "restored.db"
    other = SQLiteSpanExporter(restored)  # a store restored from a backup, holding other rows
    assert other.export(spans[8:]) is SpanExportResult.SUCCESS
    other.shutdown()
    os.replace(restored, db)
    assert exporter.export(spans[4:8]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert _span_ids(db) == _ids(spans[4:])  # the restored rows and the new batch
    assert _span_ids(kept) == _ids(spans[:4])  # the old file got nothing after it was replaced
    assert exporter.reopened == 1


def test_a_store_whose_folder_is_gone_counts_the_spans_it_could_not_write_and_recovers(tmp_path: Path) -> None:
    spans = _tool_spans()
    folder = tmp_path / "stores"
    folder.mkdir()
    db = folder / "store.db"
    exporter = SQLiteSpanExporter(db)
    assert exporter.export(spans[:3]) is SpanExportResult.SUCCESS
    shutil.rmtree(folder)
    assert exporter.export(spans[3:6]) is SpanExportResult.FAILURE
    assert exporter.unwritten_spans == 3 and not folder.exists()  # nothing written anywhere, and counted
    folder.mkdir()
    assert exporter.export(spans[6:]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert _span_ids(db) == _ids(spans[6:])
    assert exporter.reopened == 1 and exporter.unwritten_spans == 3
