"""The Streamlit page: reads settings, asks the store through ``reads`` (cached briefly), and has each
section in ``sections`` draw its part. No SQL here."""

from __future__ import annotations

import sqlite3

import streamlit as st

from otel_repeat_guard.dashboard import figures, queries, reads
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.dashboard.sections import (
    blind_spots,
    conversations,
    drill_down,
    efficacy,
    hotspots,
    overview,
    sidebar,
)
from otel_repeat_guard.dashboard.sections.wording import wording
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS, Settings
from otel_repeat_guard.store.schema import StoreError, store_error

FEED_HELP = """
This store has no tool calls yet. Feed it in any of three ways:

* run the scripted demo: `otel-repeat-guard demo --db {db}`;
* ingest an OpenTelemetry Collector's file-exporter output:
  `otel-repeat-guard ingest /var/lib/otel/traces.jsonl --db {db}` (add `--follow` to keep up with it);
* or export your agent's spans into it, next to the guard:

```python
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter

provider = TracerProvider()
provider.add_span_processor(RepeatGuardSpanProcessor())
provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter("{db}")))
```

Tool spans (`gen_ai.operation.name = execute_tool`) and model calls (`chat`) appear here a few seconds after they end.
"""


CLICKHOUSE_FEED_HELP = """
This ClickHouse table holds no tool spans (`gen_ai.operation.name = execute_tool`) yet. Point the Collector's
`clickhouse` exporter at it, and add the guard to your agents' processes so their spans carry its findings
(`repeat_tool_guard.*` events and attributes); see docs/operations.md, "Teams that run ClickHouse".
"""


def _bucket_seconds(db: str, filters: Filters) -> float:
    """A width giving 30-60 points over the part of the range that holds calls."""
    bounds = reads.time_bounds(db).iloc[0]
    first, last = int(bounds["first_ns"]), int(bounds["last_ns"])
    start = first if filters.start_ns is None else max(first, filters.start_ns)
    end = last if filters.end_ns is None else min(last, filters.end_ns)
    return queries.bucket_seconds(max(0, end - start))


def _store_failed(db: str, exc: Exception) -> None:
    error = exc if isinstance(exc, StoreError) else store_error(db, exc) if isinstance(exc, sqlite3.Error) else exc
    st.error(f"Cannot read the store: {error}")


def _content(settings: Settings, filters: Filters, kinds: tuple[str, ...]) -> None:
    """The page body; a fragment (re-run alone on auto-refresh), so it reports store errors itself."""
    try:
        _draw(settings, filters, kinds)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(settings.store, exc)


def _draw(settings: Settings, filters: Filters, kinds: tuple[str, ...]) -> None:
    db = settings.store
    words = wording(filters.kind, kinds)
    # Every section's query first, then the drawing: a store that fails part-way through
    # (a damaged page in one table) shows one message, not half a page.
    headline = reads.headline(db, filters)
    by_tool, by_agent = reads.hotspots_by_tool(db, filters), reads.hotspots_by_agent(db, filters)
    all_tokens, wasted = reads.model_tokens(db, filters), reads.wasted_tokens(db, filters)
    outcomes, reminders = reads.reminder_outcomes(db, filters), reads.reminder_count(db, filters)
    bucket_s = _bucket_seconds(db, filters)
    over_time, lengths = reads.over_time(db, filters, bucket_s), reads.run_lengths(db, filters)
    unguarded, excluded = reads.unguarded_calls(db, filters), reads.excluded_tools(db, filters.tools)
    listed = reads.conversations(db, filters)
    models = not all_tokens.empty
    tokens = figures.token_headline(all_tokens, wasted)
    by_tool = figures.with_wasted_tokens(by_tool, wasted, "tool", "tool", all_tokens)
    by_agent = figures.with_wasted_tokens(by_agent, wasted, "agent", "agent", all_tokens)

    overview.draw_headline(headline, tokens, outcomes, filters, models, words)
    blind_spots.draw_excluded(excluded)
    blind_spots.draw_unguarded(unguarded)
    hotspots.draw_grouped("Loop hotspots by tool", by_tool, "tool", "hotspots_by_tool", models, words)
    hotspots.draw_grouped("By agent", by_agent, "agent", "hotspots_by_agent", models, words)
    if models:
        hotspots.draw_models(figures.by_model(all_tokens, wasted))
    efficacy.draw(outcomes, reminders, filters.kind)
    overview.draw_trends(over_time, bucket_s, lengths, words)
    drill_down.draw(db, filters, [str(t) for t in by_tool["tool"]], settings, kinds)
    conversations.draw(db, listed, settings)


def main() -> None:
    st.set_page_config(
        page_title="Repeat guard · loop hotspots", page_icon="🔁", layout="wide", menu_items={"About": None}
    )
    settings = Settings.from_env()
    st.title("Loop hotspots")
    st.caption(
        "Tool calls that LLM agents repeated with identical arguments, as seen by otel-repeat-guard: "
        "what the loops cost, whether the reminders worked, and what happened in each run."
    )
    db = settings.store
    try:
        bounds = reads.time_bounds(db) if reads.has_data(db) else None
        if bounds is None or int(bounds.iloc[0]["rows"]) == 0:
            st.info(CLICKHOUSE_FEED_HELP if settings.clickhouse else FEED_HELP.format(db=db))
            return
        filters, auto, kinds = sidebar.draw(db, reads.filter_options(db), bounds)
        body = st.fragment(run_every=REFRESH_SECONDS if auto else None)(_content)
        body(settings, filters, kinds)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(db, exc)


if __name__ == "__main__":
    main()
