"""``ingest --from chdb://…`` of a backend that kept the guard's events only in ``otel_logs`` (its ``otel_traces``
spans have none) stores the same loops as a collector file whose spans carry them."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.logs import LOGS_DDL, exporter_log_row, logs_table
from otel_repeat_guard.clickhouse.table import insert_sql
from otel_repeat_guard.clickhouse.target import Target
from tests.clickhouse.filling import fill
from tests.ingest.otlp import otlp_json_line, store_rows, write_lines
from tests.ingest.test_log_records import _without_events, _workload

Filled = tuple[list[ReadableSpan], Path, Target]


def _fill_logs(target: Target, records: list[object], *, event_name_column: bool, name_kept: bool) -> None:
    client = ChdbClient(target)
    ddl = LOGS_DDL.format(database=target.database, table="otel_logs")
    rows = [exporter_log_row(record) for record in records]  # type: ignore[arg-type]
    if not event_name_column:  # a table made before the exporter had the column: the name as an attribute
        ddl = ddl.replace("    EventName String CODEC(ZSTD(1)),\n", "")
        for row in rows:
            name = row.pop("EventName")
            if name_kept:  # else a Collector older than the field dropped it: read by the attributes
                row["LogAttributes"]["event.name"] = name
    client.execute(ddl)
    client.execute(insert_sql(target.database, "otel_logs", rows))


@pytest.mark.parametrize(("event_name_column", "name_kept"), [(True, True), (False, True), (False, False)])
def test_the_log_table_gives_the_bare_spans_their_loops(
    demo_filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str], event_name_column: bool, name_kept: bool
) -> None:
    spans, records = _workload()
    database = f"logsonly{int(event_name_column)}{int(name_kept)}"
    target = fill(demo_filled[2].path, _without_events(spans), database=database)
    _fill_logs(target, records, event_name_column=event_name_column, name_kept=name_kept)
    events_file = write_lines(tmp_path / "events.json", [otlp_json_line(spans)])
    assert main(["ingest", str(events_file), "--db", str(tmp_path / "file.db"), "--quiet"]) == 0
    table = f"chdb://{demo_filled[2].path}?database={database}"
    assert main(["ingest", "--from", table, "--db", str(tmp_path / "table.db"), "--quiet"]) == 0
    capsys.readouterr()
    from_file, from_table = store_rows(tmp_path / "file.db"), store_rows(tmp_path / "table.db")
    assert [row[15:17] for row in from_table if (row[15] or 0) > 1] == [
        (2, None),
        (3, "gentle"),
        (4, None),
        (5, "detailed"),
        (2, None),
        (2, None),
        (3, "gentle"),
    ]
    assert from_table == from_file


def test_the_logs_table_is_named_beside_the_traces_table() -> None:
    assert logs_table("otel_traces") == "otel_logs"
    assert logs_table("prod_traces") == "prod_logs"
    assert logs_table("spans") == "otel_logs"
