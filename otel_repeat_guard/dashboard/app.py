"""The Streamlit page: reads settings, asks ``queries`` (cached briefly), and draws. No SQL here."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd
import streamlit as st

from otel_repeat_guard.blind_spots import explain
from otel_repeat_guard.dashboard import charts, queries
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS, Settings
from otel_repeat_guard.store.schema import StoreError, open_for_reading, store_error

CACHE_TTL_SECONDS = 5
TIME_RANGES: dict[str, int | None] = {
    "Last 15 minutes": 15 * 60,
    "Last hour": 3600,
    "Last 24 hours": 86400,
    "Last 7 days": 7 * 86400,
    "All time": None,
}
DEFAULT_TIME_RANGE = "Last 24 hours"
FEED_HELP = """
This store has no tool calls yet. Feed it in either of two ways:

* run the scripted demo: `otel-repeat-guard demo --db {db}`, or
* export your agent's spans into it, next to the guard:

```python
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_repeat_guard import RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter

provider = TracerProvider()
provider.add_span_processor(RepeatGuardSpanProcessor())
provider.add_span_processor(BatchSpanProcessor(SQLiteSpanExporter("{db}")))
```

Tool spans (`gen_ai.operation.name = execute_tool`) appear here a few seconds after they end.
"""

T = TypeVar("T")


def _query(db: str, ask: Callable[[sqlite3.Connection], T]) -> T:
    conn, _ = open_for_reading(Path(db))
    try:
        return ask(conn)
    finally:
        conn.close()


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _has_schema(db: str) -> bool:
    conn, has_schema = open_for_reading(Path(db))
    conn.close()
    return has_schema


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _bounds(db: str) -> pd.DataFrame:
    return _query(db, queries.time_bounds)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _options(db: str) -> pd.DataFrame:
    return _query(db, queries.filter_options)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _headline(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.headline(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _by_tool(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.hotspots_by_tool(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _by_agent(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.hotspots_by_agent(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _over_time(db: str, filters: Filters, bucket_s: int) -> pd.DataFrame:
    return _query(db, lambda conn: queries.over_time(conn, filters, bucket_s))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _unguarded(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.unguarded_calls(conn, filters))


def _run_lengths(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.run_lengths(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _runs(db: str, filters: Filters, tool: str) -> pd.DataFrame:
    return _query(db, lambda conn: queries.hotspot_runs(conn, filters, tool))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _chain(db: str, agent_key: str, end_id: int, run_length: int) -> pd.DataFrame:
    return _query(db, lambda conn: queries.chain(conn, agent_key, end_id, run_length))


def _sidebar(db: str) -> tuple[Filters, bool]:
    options = _options(db)

    def values(kind: str) -> list[str]:
        return [str(v) for v in options.loc[options["kind"] == kind, "value"]]

    sidebar = st.sidebar
    sidebar.header("Filters")
    ranges = list(TIME_RANGES)
    label = sidebar.selectbox("Time range", ranges, index=ranges.index(DEFAULT_TIME_RANGE), key="time_range")
    seconds = TIME_RANGES[label or DEFAULT_TIME_RANGE]
    now_ns = int(time.time() // CACHE_TTL_SECONDS * CACHE_TTL_SECONDS) * 1_000_000_000  # cache-friendly
    filters = Filters(
        start_ns=None if seconds is None else now_ns - seconds * 1_000_000_000,
        services=tuple(sidebar.multiselect("Service", values("service"), key="services")),
        agents=tuple(sidebar.multiselect("Agent", values("agent"), key="agents")),
        tools=tuple(sidebar.multiselect("Tool", values("tool"), key="tools")),
        tiers=tuple(
            sidebar.multiselect(
                "Reminder tier", list(queries.TIERS), key="tiers", help="Counts only reminders of these tiers."
            )
        ),
    )
    auto = sidebar.toggle(f"Auto-refresh every {REFRESH_SECONDS} s", value=False, key="auto_refresh")
    sidebar.caption(f"Store: `{db}`")
    return filters, auto


def _seconds(value: float) -> str:
    return f"{value:,.1f} s" if value < 120 else f"{value / 60:,.1f} min"


def _headline_section(headline: pd.DataFrame) -> None:
    row = headline.iloc[0]
    first, second = st.columns(4), st.columns(4)
    first[0].metric(
        "Tool calls",
        f"{int(row['tool_calls']):,}",
        help=f"Tracked calls. {int(row['untracked_calls']):,} excluded calls (e.g. todo_write) are not counted.",
    )
    first[1].metric("Repeated calls", f"{int(row['repeated_calls']):,}", help="Calls with run length 2 or more.")
    first[2].metric("Wasted-call share", f"{row['wasted_share']:.1%}", help="Repeated calls ÷ tracked calls.")
    first[3].metric("Time in repeated calls", _seconds(float(row["repeated_seconds"])))
    second[0].metric("Gentle reminders", f"{int(row['gentle_reminders']):,}")
    second[1].metric("Detailed reminders", f"{int(row['detailed_reminders']):,}")
    second[2].metric("Agents with loops", f"{int(row['agents_with_loops']):,}")
    second[3].metric("Longest run", f"{int(row['longest_run']):,}")


def _unguarded_section(unguarded: pd.DataFrame) -> None:
    """Calls the guard could not compare: never a reassuring zero for what it could not see."""
    if unguarded.empty:
        return
    total = int(unguarded["calls"].sum())
    st.warning(
        f"{total:,} tool calls could not be compared, so loops among them cannot show here. "
        "Run `otel-repeat-guard doctor` on the collector's files for the setting that fixes each.",
        icon="⚠️",
    )
    frame = unguarded.assign(why=[explain(str(reason)) for reason in unguarded["reason"]])
    st.dataframe(frame, hide_index=True, width="stretch", key="unguarded_calls")


def _hotspot_table(frame: pd.DataFrame, label: str, key: str) -> None:
    shown = frame[[label, "repeated_calls", "reminders", "longest_run", "wasted_seconds", "repeated_share"]]
    st.dataframe(
        shown.assign(repeated_share=shown["repeated_share"] * 100),
        key=key,
        hide_index=True,
        width="stretch",
        column_config={
            label: st.column_config.TextColumn(label.capitalize()),
            "repeated_calls": st.column_config.NumberColumn("Repeated calls"),
            "reminders": st.column_config.NumberColumn("Reminders"),
            "longest_run": st.column_config.NumberColumn("Longest run"),
            "wasted_seconds": st.column_config.NumberColumn("Wasted (s)", format="%.1f"),
            "repeated_share": st.column_config.NumberColumn(
                "Share", format="%.0f%%", help=f"Repeated calls as a share of this {label}'s calls"
            ),
        },
    )


def _grouped_section(title: str, frame: pd.DataFrame, label: str, key: str) -> None:
    st.subheader(title)
    if frame.empty:
        st.caption("No repeated calls in this selection.")
        return
    left, right = st.columns([3, 2])
    with left:
        _hotspot_table(frame, label, key)
    with right:
        st.altair_chart(charts.hotspot_bars(frame, label, f"Repeated calls by {label}"), width="stretch")


def _bucket_seconds(db: str, filters: Filters) -> int:
    bounds = _bounds(db).iloc[0]
    start = filters.start_ns if filters.start_ns is not None else int(bounds["first_ns"])
    return queries.bucket_seconds(max(0, int(bounds["last_ns"]) - start))


def _trends_section(over_time: pd.DataFrame, bucket_s: int, lengths: pd.DataFrame) -> None:
    left, right = st.columns(2)
    with left:
        st.subheader("Over time")
        if over_time.empty:
            st.caption("No repeated calls in this selection.")
        else:
            st.altair_chart(charts.over_time(over_time, bucket_s), width="stretch")
    with right:
        st.subheader("Run-length distribution")
        loops = lengths[lengths["run_length"] >= 2]
        single = int(lengths.loc[lengths["run_length"] == 1, "runs"].sum())
        if loops.empty:
            st.caption("No runs of two or more identical calls in this selection.")
        else:
            st.altair_chart(charts.run_length_histogram(loops), width="stretch")
        st.caption(f"{single:,} calls were not repeated (runs of one).")


def _drill_down(db: str, filters: Filters, tools: list[str], settings: Settings) -> None:
    st.subheader("Drill-down: the chains of a hotspot")
    if not tools:
        st.caption("No hotspots to drill into.")
        return
    tool = st.selectbox("Hotspot tool", tools, key="drill_tool")
    runs = _runs(db, filters, str(tool))
    if runs.empty:
        st.caption("No runs for this tool in this selection.")
        return
    labels = [
        f"{r.agent} · run of {r.run_length} · ended {r.ended:%Y-%m-%d %H:%M:%S} UTC"
        for r in runs.itertuples(index=False)
    ]
    choice = st.selectbox("Run", range(len(labels)), format_func=lambda i: labels[i], key="drill_run")
    picked = runs.iloc[int(choice or 0)]
    calls = _chain(db, str(picked["agent_key"]), int(picked["end_id"]), int(picked["run_length"]))
    calls = calls.assign(
        trace=[settings.trace_link(t, s) for t, s in zip(calls["trace_id"], calls["span_id"], strict=True)],
        reminder_tier=calls["reminder_tier"].fillna(""),
        position=calls["run_length"].astype("Int64").astype(str).replace("<NA>", "excluded"),
    )
    st.dataframe(
        calls[["time", "tool", "position", "status", "reminder_tier", "duration_ms", "arguments", "trace"]],
        key="drill_chain",
        hide_index=True,
        width="stretch",
        column_config={
            "time": st.column_config.DatetimeColumn("Ended (UTC)", format="HH:mm:ss.SSS"),
            "tool": st.column_config.TextColumn("Tool"),
            "position": st.column_config.TextColumn("Run position"),
            "status": st.column_config.TextColumn("Status"),
            "reminder_tier": st.column_config.TextColumn("Reminder"),
            "duration_ms": st.column_config.NumberColumn("Duration (ms)", format="%.0f"),
            "arguments": st.column_config.TextColumn("Arguments preview"),
            "trace": st.column_config.LinkColumn("Trace", display_text="open trace"),
        },
    )
    arguments = calls.loc[calls["tool"] == tool, "arguments"].dropna()
    st.caption("Arguments of the repeated call (shown as text):")
    st.code(str(arguments.iloc[-1]) if not arguments.empty else "(arguments not stored)", language=None)


def _store_failed(db: str, exc: Exception) -> None:
    error = exc if isinstance(exc, StoreError) else store_error(db, exc) if isinstance(exc, sqlite3.Error) else exc
    st.error(f"Cannot read the store: {error}")


def _content(settings: Settings, filters: Filters) -> None:
    """The page body; a fragment (re-run alone on auto-refresh), so it reports store errors itself."""
    try:
        _draw(settings, filters)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(str(settings.db), exc)


def _draw(settings: Settings, filters: Filters) -> None:
    db = str(settings.db)
    # Every section's query first, then the drawing: a store that fails part-way through
    # (a damaged page in one table) shows one message, not half a page.
    headline, by_tool, by_agent = _headline(db, filters), _by_tool(db, filters), _by_agent(db, filters)
    bucket_s = _bucket_seconds(db, filters)
    over_time, lengths = _over_time(db, filters, bucket_s), _run_lengths(db, filters)
    unguarded = _unguarded(db, filters)
    _headline_section(headline)
    _unguarded_section(unguarded)
    _grouped_section("Loop hotspots by tool", by_tool, "tool", "hotspots_by_tool")
    _grouped_section("By agent", by_agent, "agent", "hotspots_by_agent")
    _trends_section(over_time, bucket_s, lengths)
    _drill_down(db, filters, [str(t) for t in by_tool["tool"]], settings)


def main() -> None:
    st.set_page_config(page_title="Repeat guard · loop hotspots", page_icon="🔁", layout="wide")
    settings = Settings.from_env()
    st.title("Loop hotspots")
    st.caption("Tool calls that LLM agents repeated with identical arguments, as seen by otel-repeat-guard.")
    db = str(settings.db)
    try:
        if not _has_schema(db) or int(_bounds(db).iloc[0]["rows"]) == 0:
            st.info(FEED_HELP.format(db=db))
            return
        filters, auto = _sidebar(db)
        body = st.fragment(run_every=REFRESH_SECONDS if auto else None)(_content)
        body(settings, filters)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(db, exc)


if __name__ == "__main__":
    main()
