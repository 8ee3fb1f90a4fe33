"""The command line's ClickHouse side: checking a ``--store`` URL before use, ``doctor --store`` and ``rollup``.

Every failure is a :class:`~otel_repeat_guard.store.schema.StoreError` of one line, which the CLI prints and
exits 2 on, never a traceback.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from otel_repeat_guard.clickhouse.calls import NOT_SEEN
from otel_repeat_guard.clickhouse.client import ChdbClient, ClickHouseStoreError, Client, connect
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, RollReport, roll_up
from otel_repeat_guard.clickhouse.rollup import Rollup
from otel_repeat_guard.clickhouse.target import Target, parse
from otel_repeat_guard.core.experiments import table_lines, variant_table
from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.decide.blind_spots import explain as explain_reason
from otel_repeat_guard.decide.blind_spots import fix_for
from otel_repeat_guard.store.queries.filters import Filters
from otel_repeat_guard.store.queries.variants import variant_counts

if TYPE_CHECKING:  # it needs the ingest extra: doctor, rollup and the dashboard read a table without it
    from otel_repeat_guard.clickhouse.spans import TableSpans

MAX_NS = 2**63 - 1
"""The end of every range: the table's whole span, for ``ingest --from``."""


TABLES = "SELECT count() AS tables FROM system.tables WHERE database = {db:String} AND name IN {names:Array(String)}"
_COLUMNS = "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {tbl:String}"
MAP_COLUMNS = ("SpanAttributes", "ResourceAttributes")
"""The columns the reader reads as ``Map(…, String)``, as the exporter's default schema makes them."""


def _check_table(client: Client, target: Target) -> None:
    types: dict[str, str] = dict(
        client.frame(_COLUMNS, {"db": target.database, "tbl": target.table}).itertuples(index=False)
    )
    if not types:
        client.close()
        raise ClickHouseStoreError(
            f"ClickHouse at {target.describe()} has no table {target.database}.{target.table}: "
            "is the Collector's clickhouse exporter writing there (database and traces_table_name)?"
        )
    odd = [f"{name} is {types[name]}" for name in MAP_COLUMNS if not str(types.get(name, "Map")).startswith("Map")]
    if odd:
        client.close()
        raise ClickHouseStoreError(
            f"ClickHouse at {target.describe()}: {', '.join(odd)}; only the exporter's default schema (Map columns) is "
            "read, not the JSON columns of its clickhouse.json feature gate"
        )


def _check_rollup(client: Client, target: Target, store: str) -> None:
    if target.rollup is None:
        return
    names = Rollup(target.rollup, target.table, "").params()
    tables = [names[key] for key in ("rcalls", "rmodels", "rruns", "rwindows")]
    if int(client.frame(TABLES, {"db": target.rollup, "names": tables})["tables"].iloc[0]) < len(tables):
        client.close()
        raise ClickHouseStoreError(
            f"ClickHouse at {target.describe()} holds no rollup of {target.database}.{target.table} in database "
            f"{target.rollup}: build it with `otel-repeat-guard rollup --store '{safe_url(store)}'`"
        )


def open_reader(store: str) -> ClickHouseReader:
    """A reader of ``store`` whose table (and rollup, if it names one) exists and is reachable."""
    target = parse(store)
    client = connect(target)
    _check_table(client, target)
    _check_rollup(client, target, store)
    return ClickHouseReader(target, client=client)


def rollup(store: str, settle_s: float) -> RollReport:
    """``rollup --store``: roll the table's windows that ended ``settle_s`` ago or more up (see ``rolling``)."""
    target = parse(store)
    if target.rollup is None:
        raise ClickHouseStoreError(
            f"rollup needs the database to keep it in, named in the store URL: {safe_url(store)}"
            f"{'&' if '?' in store else '?'}"
            "rollup=DB (a database of the guard's own, not the table's)"
        )
    client = connect(target)
    _check_table(client, target)
    try:
        return roll_up(client, target, RollPlan(until_ns=time.time_ns() - int(settle_s * 1e9)))
    finally:
        client.close()


def render_rollup(report: RollReport) -> str:
    """What ``rollup`` did, in one line."""
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.rolled_to / 1e9)) if report.rolled_to else "-"
    return (
        f"{report.source}: rolled up {report.windows:,} windows ({report.spans:,} spans) into {report.rollup} in "
        f"{report.seconds:.1f} s; rolled up to {until}, the spans after it are read from the table"
    )


def table_spans(store: str, start_ns: int | None = None, end_ns: int | None = None) -> TableSpans:
    """The spans of ``store``'s table that started in ``[start_ns, end_ns)`` (either side open: every span), for
    ``ingest --from`` (the table checked reachable first)."""
    from otel_repeat_guard.clickhouse.spans import TableSpans  # noqa: PLC0415 - the ingest extra's

    reader = open_reader(store)
    return TableSpans(reader.client, start_ns or 0, MAX_NS if end_ns is None else end_ns)


def check_store_url(store: str) -> Target:
    """The target of ``store`` after checking that its table can be read (then closed again). A chdb directory is
    let go too: chdb opens a directory in one process at a time, and the process that serves the dashboard's pages
    (Streamlit's) opens it next."""
    reader = open_reader(store)
    reader.close()
    if reader.target.embedded:
        ChdbClient.close_all()
    return reader.target


@dataclass
class Report:
    """What the guard could and could not see in a ClickHouse table, over a time range."""

    store: str
    calls_ended: str = "at any time"
    """The time range read: ``at any time``, or ``from … to …`` (UTC)."""
    tool_calls: int = 0
    untracked_calls: int = 0
    repeated_calls: int = 0
    reminders: int = 0
    blind_spots: list[dict[str, object]] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    """The "Outcome by variant" table's lines, while ``reminder_variants`` runs an experiment (else none)."""

    @property
    def comparable(self) -> bool:
        return not self.blind_spots


def doctor(store: str, start_ns: int | None = None, end_ns: int | None = None) -> Report:
    """The guard's view of the table's tool spans in ``[start_ns, end_ns]`` (call ends, epoch ns)."""
    reader = open_reader(store)
    try:
        filters = Filters(start_ns=start_ns, end_ns=end_ns)
        headline = reader.headline(filters).iloc[0]
        report = Report(
            store=reader.target.describe(),
            calls_ended=_range_text(start_ns, end_ns),
            tool_calls=int(headline["tool_calls"]),
            untracked_calls=int(headline["untracked_calls"]),
            repeated_calls=int(headline["repeated_calls"]),
            reminders=int(headline["reminders"]),
        )
        for row in reader.unguarded_calls(filters).to_dict("records"):
            reason = str(row["reason"])
            report.blind_spots.append(
                {"reason": reason, "tool": str(row["tool"]), "calls": int(row["calls"]), "why": _why(reason)}
            )
        counts = variant_counts(reader.reminder_variants(filters))
        if counts:
            report.variants = table_lines(variant_table(counts))
        return report
    finally:
        reader.close()


def _range_text(start_ns: int | None, end_ns: int | None) -> str:
    def moment(ns: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ns / 1e9))

    if start_ns is None and end_ns is None:
        return "at any time"
    since = "" if start_ns is None else f"from {moment(start_ns)}"
    until = "" if end_ns is None else f"to {moment(end_ns)}"
    return " ".join(part for part in (since, until) if part)


def _why(reason: str) -> str:
    return f"{explain_reason(reason)} ({fix_for(reason, None)})" if reason == NOT_SEEN else explain_reason(reason)


def render(report: Report, *, as_json: bool) -> str:
    """The report as text (or JSON)."""
    if as_json:
        return json.dumps({**asdict(report), "comparable": report.comparable}, indent=2)
    lines = [
        f"{report.store}, calls that ended {report.calls_ended}: {report.tool_calls:,} tracked tool calls "
        f"({report.untracked_calls:,} of excluded tools), {report.repeated_calls:,} in loops, "
        f"{report.reminders:,} reminders",
    ]
    if report.comparable:
        lines.append("every tracked tool call was seen and compared by the guard")
    for spot in report.blind_spots:
        lines.append(f"  {spot['calls']:>8,}  {spot['tool']}: {spot['reason']}: {spot['why']}")
    return "\n".join(lines + report.variants)
