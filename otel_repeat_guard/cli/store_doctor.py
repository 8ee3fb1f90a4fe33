"""``doctor --store PATH``: the embedded store's view of a wording experiment, the dashboard's "Outcome by variant"
table in text (``--store clickhouse://…`` prints it after the table's report, ``clickhouse.commands``)."""

from __future__ import annotations

import json
from dataclasses import asdict

from otel_repeat_guard.core.experiments import table_lines, variant_table
from otel_repeat_guard.dashboard.source import reader_for
from otel_repeat_guard.store.queries.filters import Filters
from otel_repeat_guard.store.queries.variants import variant_counts
from otel_repeat_guard.store.schema import MissingDatabaseError, open_for_reading


def store_doctor(path: str, span: tuple[int | None, int | None], *, as_json: bool) -> int:
    """The reminders of the store at ``path`` (calls that ended in ``span``, ns, either side open) by variant; 0.
    A file that is not a store this version reads is a ``StoreError`` (one line, exit 2)."""
    conn, has_schema = open_for_reading(path)  # refuses a missing file, another program's, a newer schema
    conn.close()
    if not has_schema:
        raise MissingDatabaseError(f"{path} holds no store yet: nothing was exported to it")
    filters = Filters(start_ns=span[0], end_ns=span[1])
    reader = reader_for(path)
    headline = reader.headline(filters).iloc[0]
    table = variant_table(variant_counts(reader.reminder_variants(filters)))
    if as_json:
        print(
            json.dumps(
                {
                    "store": str(path),
                    "tool_calls": int(headline["tool_calls"]),
                    "reminders": int(headline["reminders"]),
                    "by_variant": [asdict(row) for row in table.by_variant],
                    "by_variant_and_model": [asdict(row) for row in table.by_model],
                    "verdict": table.verdict,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{path}: {int(headline['tool_calls']):,} tracked tool calls, {int(headline['repeated_calls']):,} in loops, "
        f"{int(headline['reminders']):,} reminders"
    )
    print("\n".join(table_lines(table) if table.by_variant else [table.verdict]))
    return 0
