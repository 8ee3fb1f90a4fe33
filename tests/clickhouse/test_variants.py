"""The "Outcome by variant" table on the Collector's table (chdb): every figure the embedded store gives for the same
spans, read from the table and through its rollup, and printed the same by ``doctor --store``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.reader import ClickHouseReader
from otel_repeat_guard.clickhouse.rolling import RollPlan, roll_up
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard.source import SQLiteReader
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.queries.variants import variant_counts
from tests.clickhouse.filling import fill
from tests.store.variant_agents import expected, experiment

Pair = tuple[Path, Target, list[ReadableSpan]]


@pytest.fixture(scope="module")
def wording_pair(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> Pair:
    """An experiment's spans in a store and in the session's chdb (database ``wording``)."""
    db = tmp_path_factory.mktemp("wording") / "store.db"
    scripted, spans, _ = experiment(db, runs=90)
    pair = (db, fill(demo_filled[2].path, spans, database="wording"), spans)
    assert variant_counts(SQLiteReader(db).reminder_variants(Filters())) == expected(scripted)  # type: ignore[attr-defined]
    return pair


def _both(pair: Pair, filters: Filters, target: Target | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    db, table, _ = pair
    reader = ClickHouseReader(target or table)
    try:
        return SQLiteReader(db).reminder_variants(filters), reader.reminder_variants(filters)  # type: ignore[attr-defined]
    finally:
        reader.close()


def _ends(spans: list[ReadableSpan]) -> list[int]:
    return sorted(s.end_time or 0 for s in spans if s.name.startswith("execute_tool"))


def test_every_figure_of_the_variant_table_agrees_between_the_store_and_clickhouse(wording_pair: Pair) -> None:
    ends = _ends(wording_pair[2])
    middle = ends[len(ends) // 2]
    for filters in (
        Filters(),
        Filters(start_ns=middle),  # a range that starts inside runs: their loops' starts lie before it
        Filters(end_ns=middle),  # and one whose reminders' next calls lie after it
        Filters(agents=("agent-3", "agent-4", "agent-10")),
        Filters(tiers=("detailed",)),
        Filters(tiers=("stop",)),  # no tier shown: nothing
    ):
        embedded, clickhouse = _both(wording_pair, filters)
        pd.testing.assert_frame_equal(clickhouse, embedded, check_dtype=False)
    embedded, _ = _both(wording_pair, Filters())
    assert set(embedded["variant"]) == {"seed", "redirect"} and embedded["wasted_tokens"].sum() > 0


def test_the_rollup_gives_the_same_variant_table(wording_pair: Pair) -> None:
    _db, table, _ = wording_pair
    through = replace(table, rollup="guard_wording")
    roll_up(ChdbClient(through), through, RollPlan(until_ns=4 * 10**18))
    embedded, rolled = _both(wording_pair, Filters(), through)
    pd.testing.assert_frame_equal(rolled, embedded, check_dtype=False)


def test_a_rollup_made_before_variants_gains_the_column(wording_pair: Pair) -> None:
    _db, table, _ = wording_pair
    through = replace(table, rollup="guard_old")
    client = ChdbClient(through)
    roll_up(client, through, RollPlan(until_ns=4 * 10**18))
    client.execute(
        "ALTER TABLE guard_old.otel_traces_calls DROP COLUMN reminder_variant"
    )  # as an older release made it
    roll_up(client, through, RollPlan(until_ns=4 * 10**18))
    columns = client.frame(
        "SELECT name FROM system.columns WHERE database = 'guard_old' AND table = 'otel_traces_calls'", {}
    )
    assert "reminder_variant" in set(columns["name"])


def test_doctor_prints_the_same_variant_table_from_both_stores(
    wording_pair: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_repeat_guard.cli.main import main

    db, table, _ = wording_pair
    assert main(["doctor", "--store", str(db)]) == 0
    embedded = capsys.readouterr().out.splitlines()
    main(["doctor", "--store", f"chdb://{table.path}?database=wording"])
    clickhouse = capsys.readouterr().out.splitlines()
    start = embedded.index(next(line for line in embedded if line.startswith("Outcome by variant")))
    assert len(embedded) - start == 1 + 1 + 2 + 4 + 1  # title, header, two variants, four variant x model, verdict
    assert clickhouse[-(len(embedded) - start) :] == embedded[start:]


def test_the_reminders_page_draws_the_same_variant_tables_from_clickhouse(
    wording_pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamlit as st

    from tests.clickhouse.test_pages import visit

    db, table, _ = wording_pair
    st.cache_data.clear()
    embedded = visit(monkeypatch, "reminders", sqlite=db)
    st.cache_data.clear()
    clickhouse = visit(monkeypatch, "reminders", store=f"chdb://{table.path}?database=wording")
    st.cache_data.clear()
    grids = [[frame.value.to_dict("list") for frame in app.dataframe] for app in (embedded, clickhouse)]
    assert grids[1] == grids[0] and len(grids[0]) == 3  # the outcomes, then the variants and variant x model
    assert list(grids[0][1]["variant"]) == ["redirect", "seed"]
    verdicts = [[m.value for m in app.markdown if "at these counts" in m.value] for app in (embedded, clickhouse)]
    assert verdicts[0] == verdicts[1] and len(verdicts[0]) == 1


def test_calls_counted_from_requests_keep_their_variant_on_both_stores(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path: Path
) -> None:
    """A run whose model asks for the same call four times and no tool span ever ends (CrewAI under OpenLLMetry):
    the reminder rides the ``repeat_tool_guard.call`` event, with its variant."""
    import json
    import sqlite3

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
    from otel_repeat_guard.core.reminders import variant_for
    from otel_repeat_guard.store import SQLiteSpanExporter

    config = GuardConfig(reminder_variants=("seed", "redirect"))
    memory, store = InMemorySpanExporter(), tmp_path / "requested.db"
    provider = TracerProvider(resource=Resource.create({"service.name": "crew"}))
    provider.add_span_processor(RepeatGuardSpanProcessor(config, record_facts=True))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(store, config=config)))
    tracer = provider.get_tracer("wording")
    for run in range(6):
        with tracer.start_as_current_span(
            f"invoke_agent crew-{run}", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            for i in range(5):
                with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
                    span.set_attribute("gen_ai.usage.input_tokens", 1000)
                    span.set_attribute("gen_ai.usage.output_tokens", 10)
                    if i < 4:
                        part = {"type": "tool_call", "id": f"c{i}", "name": "grep", "arguments": {"q": "a"}}
                        span.set_attribute(
                            "gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}])
                        )
                        span.set_attribute("gen_ai.response.finish_reasons", ("tool_call",))
    provider.shutdown()
    with sqlite3.connect(store) as conn:
        reminded = conn.execute(
            "SELECT agent_key, reminder_variant FROM tool_calls WHERE reminder_tier IS NOT NULL AND span_id LIKE '%/%'"
        ).fetchall()
    assert len(reminded) == 6 and all(v == variant_for(k, config.reminder_variants) for k, v in reminded)
    target = fill(demo_filled[2].path, list(memory.get_finished_spans()), table="requested_variants")
    reader = ClickHouseReader(target)
    try:
        embedded = SQLiteReader(store).reminder_variants(Filters())  # type: ignore[attr-defined]
        pd.testing.assert_frame_equal(reader.reminder_variants(Filters()), embedded, check_dtype=False)
    finally:
        reader.close()
    assert int(embedded["reminders"].sum()) == 6
