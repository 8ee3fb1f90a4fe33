"""Every page of the dashboard on the Collector exporter's table (chdb), under ``AppTest``: the pages read
through the store seam, so they draw the same figures as on the embedded store of the same spans."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from opentelemetry.sdk.trace import ReadableSpan
from streamlit.testing.v1 import AppTest

from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.dashboard import VIEWS
from otel_repeat_guard.dashboard.sections.headline import read_headline
from otel_repeat_guard.dashboard.sections.timeline import TABLE_CLASS
from otel_repeat_guard.dashboard.settings import STORE_ENV
from otel_repeat_guard.store import DB_ENV

APP = Path(__file__).resolve().parents[2] / "otel_repeat_guard" / "dashboard" / "app.py"
PAGES = ("overview", "hotspots", "reminders", "runs", "conversations", "blind_spots")


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def visit(monkeypatch: pytest.MonkeyPatch, page: str, *, sqlite: Path | None = None, store: str = "") -> AppTest:
    monkeypatch.setenv(DB_ENV, str(sqlite or "unused.db"))
    if store:
        monkeypatch.setenv(STORE_ENV, store)
    else:
        monkeypatch.delenv(STORE_ENV, raising=False)
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    if page != "overview":
        app.switch_page(str(VIEWS / f"{page}.py")).run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def figures(app: AppTest) -> tuple[dict[str, str], list[list[object]], list[int]]:
    """The page's headline figures, its grids' first columns and its tables' lengths (the run timeline is an HTML table of
    verbatim cells: its rows, header aside)."""
    metrics = {f.label: f.value for element in app.get("html") for f in read_headline(element.value)}
    grids = [df.value.iloc[:, 0].tolist() for df in app.dataframe]
    timelines = [html.value.count("<tr") - 1 for html in app.get("html") if TABLE_CLASS in html.value]
    return metrics, grids, [len(t.value) for t in app.table] + timelines


@pytest.mark.parametrize("page", PAGES)
def test_each_page_draws_the_same_figures_from_clickhouse(
    monkeypatch: pytest.MonkeyPatch, demo_pair: tuple[Path, Target], page: str
) -> None:
    store, target = demo_pair
    embedded = figures(visit(monkeypatch, page, sqlite=store))
    st.cache_data.clear()
    clickhouse = figures(visit(monkeypatch, page, store=f"chdb://{target.path}"))
    assert clickhouse == embedded
    assert embedded[0] or embedded[1] or embedded[2]  # the page drew figures


def test_the_drill_down_says_which_loops_it_does_not_list_from_clickhouse(
    monkeypatch: pytest.MonkeyPatch, demo_filled: tuple[list[ReadableSpan], Path, Target]
) -> None:
    """A cycle is counted on both stores but listed in the drill-down of the embedded one only: the ClickHouse
    page says so instead of a bare "no loops"."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
    from tests.clickhouse.filling import fill

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RepeatGuardSpanProcessor(GuardConfig(cycle_thresholds=(2,)), record_facts=True))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("cycling")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for tool in ("open", "close") * 3:  # a cycle of two calls, three times: no two identical calls in a row
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
                span.set_attribute("gen_ai.tool.call.arguments", '{"door": 1}')
    target = fill(demo_filled[2].path, memory.get_finished_spans(), database="cycles")

    notice = "This store's drill-down lists runs of identical calls only: "
    captions = [c.value for c in visit(monkeypatch, "runs", store=f"chdb://{target.path}?database=cycles").caption]
    said = [text for text in captions if text.startswith(notice)]
    assert said == [notice + "cycle loops are counted in the figures above but not listed here."]
