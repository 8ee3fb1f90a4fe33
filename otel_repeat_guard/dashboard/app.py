"""The Streamlit page: reads settings, asks ``queries`` (cached briefly), and draws. No SQL here."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd
import streamlit as st

from otel_repeat_guard.blind_spots import explain
from otel_repeat_guard.dashboard import charts, costs, figures, queries
from otel_repeat_guard.dashboard.queries import Filters
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS, Settings
from otel_repeat_guard.store.records import CYCLE, LOOP_KINDS, REPEAT
from otel_repeat_guard.store.schema import StoreError, has_rows, open_for_reading, store_error

CACHE_TTL_SECONDS = 5
CUSTOM_RANGE = "Custom range"
TIME_RANGES: dict[str, int | None] = {
    "Last 15 minutes": 15 * 60,
    "Last hour": 3600,
    "Last 24 hours": 86400,
    "Last 7 days": 7 * 86400,
    "All time": None,
}
DEFAULT_TIME_RANGE = "Last 24 hours"
_NS = 1_000_000_000
_EPOCH, _LAST_DAY = dt.date(1970, 1, 1), dt.date(2262, 4, 10)  # what nanoseconds since 1970 in 64 bits reach
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
TIME_HELP = (
    "The summed duration of the {calls}. Agents run concurrently, so this adds up the time of "
    "every agent and can exceed the wall-clock time of the workload."
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Wording:
    """What the loop figures are called under a loop kind: the calls counted, their time, the longest loop."""

    calls: str
    calls_help: str
    time: str
    longest: str | None  # None: the kind has no length (a parallel duplicate)


KIND_LABELS = {
    None: "All kinds",
    "repeat": "Repeat (identical calls in a row)",
    "cycle": "Cycle",
    "no_progress": "No progress",
    "parallel_duplicate": "Parallel duplicate",
}
WORDING: dict[str | None, Wording] = {
    "repeat": Wording("Repeated calls", "Calls with run length 2 or more.", "Time in repeated calls", "Longest run"),
    None: Wording(
        "Calls in loops",
        "Calls with a detection of any kind, each counted once: position 2 or more in a run of identical calls, "
        "completing a copy of a cycle, a no-progress call, or a parallel duplicate.",
        "Time in loop calls",
        "Longest run of identical calls",
    ),
    "cycle": Wording(
        "Calls completing a cycle",
        "Calls that complete a copy of a cycle, from its second copy on.",
        "Time in those calls",
        "Longest cycle (calls)",
    ),
    "no_progress": Wording(
        "Calls without progress",
        "Calls of a no-progress run from its second call on: the same tool, other arguments, the same outcome.",
        "Time in calls without progress",
        "Longest no-progress run",
    ),
    "parallel_duplicate": Wording(
        "Parallel duplicates",
        "Extra copies of an identical call asked for in the same model step.",
        "Time in parallel duplicates",
        None,
    ),
}


def wording(kind: str | None, kinds: tuple[str, ...]) -> Wording:
    """The figures' names for the chosen kind; a store with repeats only reads exactly as before kinds."""
    return WORDING[REPEAT if kind is None and set(kinds) <= {REPEAT} else kind]


def _query(db: str, ask: Callable[[sqlite3.Connection], T]) -> T:
    conn, _ = open_for_reading(Path(db))
    try:
        return ask(conn)
    finally:
        conn.close()


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _has_data(db: str) -> bool:
    conn, has_schema = open_for_reading(Path(db))
    try:
        return has_schema and has_rows(conn)
    finally:
        conn.close()


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
def _model_tokens(db: str, filters: Filters) -> pd.DataFrame:
    return costs.price(_query(db, lambda conn: queries.model_tokens(conn, filters, costs.bands())))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _wasted_tokens(db: str, filters: Filters) -> pd.DataFrame:
    return costs.price(_query(db, lambda conn: queries.wasted_tokens(conn, filters, costs.bands())))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _outcomes(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.reminder_outcomes(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _reminder_count(db: str, filters: Filters) -> int:
    return _query(db, lambda conn: queries.reminder_count(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _over_time(db: str, filters: Filters, bucket_s: float) -> pd.DataFrame:
    return _query(db, lambda conn: queries.over_time(conn, filters, bucket_s))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _unguarded(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.unguarded_calls(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _excluded(db: str, tools: tuple[str, ...]) -> pd.DataFrame:
    return _query(db, lambda conn: queries.excluded_tools(conn, tools))


def _run_lengths(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.run_lengths(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _runs(db: str, filters: Filters, tool: str) -> pd.DataFrame:
    return _query(db, lambda conn: queries.hotspot_runs(conn, filters, tool))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _loops(db: str, filters: Filters, tool: str, kinds: tuple[str, ...]) -> pd.DataFrame:
    return _query(db, lambda conn: queries.hotspot_loops(conn, filters, tool, kinds))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _agent_cycles(db: str, agent_key: str) -> pd.DataFrame:
    return _query(db, lambda conn: queries.agent_cycles(conn, agent_key))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _cycle_calls(db: str, agent_key: str, end_id: int, period: int, repetitions: int) -> pd.DataFrame:
    return _query(db, lambda conn: queries.cycle_calls(conn, agent_key, end_id, period, repetitions))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _loop_start(db: str, agent_key: str, end_id: int, run_length: int) -> int | None:
    return _query(db, lambda conn: queries.loop_start_ns(conn, agent_key, end_id, run_length))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _timeline(db: str, agent_key: str, focus_ns: int | None) -> pd.DataFrame:
    return _query(db, lambda conn: queries.run_timeline(conn, agent_key, focus_ns=focus_ns))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _conversations(db: str, filters: Filters) -> pd.DataFrame:
    return _query(db, lambda conn: queries.conversations(conn, filters))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def _conversation_runs(db: str, conversation: str) -> pd.DataFrame:
    return _query(db, lambda conn: queries.conversation_runs(conn, conversation))


def _utc(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / _NS, tz=dt.timezone.utc)


def _custom_range(db: str) -> tuple[int, int]:
    """The sidebar's custom range (UTC), defaulting to the store's first and last call."""
    bounds = _bounds(db).iloc[0]
    first = _utc(int(bounds["first_ns"]) if pd.notna(bounds["first_ns"]) else time.time_ns())
    last = _utc(int(bounds["last_ns"]) if pd.notna(bounds["last_ns"]) else time.time_ns())
    sidebar = st.sidebar
    left, right = sidebar.columns(2)
    start_day = left.date_input(
        "From (UTC)", value=first.date(), min_value=_EPOCH, max_value=_LAST_DAY, key="custom_from_day"
    )
    start_time = right.time_input("at", value=first.time().replace(second=0, microsecond=0), key="custom_from_time")
    left, right = sidebar.columns(2)
    end_day = left.date_input("To (UTC)", value=last.date(), min_value=_EPOCH, max_value=_LAST_DAY, key="custom_to_day")
    end_time = right.time_input(
        "at ", value=(last + dt.timedelta(minutes=1)).time().replace(second=0, microsecond=0), key="custom_to_time"
    )
    start = dt.datetime.combine(_day(start_day, first), start_time or dt.time(), tzinfo=dt.timezone.utc)
    end = dt.datetime.combine(_day(end_day, last), end_time or dt.time(), tzinfo=dt.timezone.utc)
    if end < start:
        sidebar.warning("The range ends before it starts: showing it the other way round.")
        start, end = end, start
    return int(start.timestamp()) * _NS, int(end.timestamp()) * _NS


def _day(value: object, default: dt.datetime) -> dt.date:
    return value if isinstance(value, dt.date) else default.date()


def _sidebar(db: str) -> tuple[Filters, bool, tuple[str, ...]]:
    """The filters, auto-refresh, and the loop kinds the store holds (in ``LOOP_KINDS`` order)."""
    options = _options(db)

    def values(kind: str) -> list[str]:
        return [str(v) for v in options.loc[options["kind"] == kind, "value"]]

    kinds = tuple(k for k in LOOP_KINDS if k in values("loop_kind"))

    sidebar = st.sidebar
    sidebar.header("Filters")
    ranges = [*TIME_RANGES, CUSTOM_RANGE]
    label = sidebar.selectbox("Time range", ranges, index=ranges.index(DEFAULT_TIME_RANGE), key="time_range")
    if label == CUSTOM_RANGE:
        start_ns, end_ns = _custom_range(db)
    else:
        seconds = TIME_RANGES[label or DEFAULT_TIME_RANGE]
        now_ns = int(time.time() // CACHE_TTL_SECONDS * CACHE_TTL_SECONDS) * _NS  # cache-friendly
        start_ns, end_ns = (None if seconds is None else now_ns - seconds * _NS), None
    filters = Filters(
        start_ns=start_ns,
        end_ns=end_ns,
        services=tuple(sidebar.multiselect("Service", values("service"), key="services")),
        agents=tuple(sidebar.multiselect("Agent", values("agent"), key="agents")),
        tools=tuple(sidebar.multiselect("Tool", values("tool"), key="tools")),
        tiers=tuple(
            sidebar.multiselect(
                "Reminder tier", list(queries.TIERS), key="tiers", help="Counts only reminders of these tiers."
            )
        ),
        kind=_kind_filter(kinds),
    )
    auto = sidebar.toggle(f"Auto-refresh every {REFRESH_SECONDS} s", value=False, key="auto_refresh")
    sidebar.caption(f"Store: `{db}`")
    return filters, auto, kinds


def _kind_filter(kinds: tuple[str, ...]) -> str | None:
    """The "Loop kind" box, only when the store holds a kind beside repeats (the guard's opt-in detectors)."""
    if set(kinds) <= {REPEAT}:
        return None
    choice = st.sidebar.selectbox(
        "Loop kind",
        [None, *kinds],
        format_func=KIND_LABELS.__getitem__,
        key="loop_kind",
        help="Narrows the loop figures (headline, hotspots, over time, drill-down) to calls with a detection of "
        "this kind. Token figures count the model calls behind loops of every kind.",
    )
    return None if choice is None else str(choice)


def _seconds(value: float) -> str:
    return f"{value:,.1f} s" if value < 120 else f"{value / 60:,.1f} min"


def _reminder_metric(filters: Filters, tier: str, value: int) -> str:
    return f"{value:,}" if tier in (filters.tiers or queries.TIERS) else "filtered"


def _headline_section(
    headline: pd.DataFrame,
    tokens: figures.TokenHeadline,
    outcomes: pd.DataFrame,
    filters: Filters,
    models: bool,
    words: Wording,
) -> None:
    row = headline.iloc[0]
    tracked, untracked = int(row["tool_calls"]), int(row["untracked_calls"])
    first, second, third = st.columns(4), st.columns(4), st.columns(4)
    first[0].metric(
        "Tool calls",
        f"{tracked:,}",
        help=f"Tracked calls. {untracked:,} calls of excluded tools (e.g. todo_write) are not counted.",
    )
    first[1].metric(words.calls, f"{int(row['repeated_calls']):,}", help=words.calls_help)
    first[2].metric("Wasted-call share", f"{row['wasted_share']:.1%}", help=f"{words.calls} ÷ tracked calls.")
    first[3].metric(
        words.time, _seconds(float(row["repeated_seconds"])), help=TIME_HELP.format(calls=words.calls.lower())
    )
    second[0].metric("Gentle reminders", _reminder_metric(filters, "gentle", int(row["gentle_reminders"])))
    second[1].metric("Detailed reminders", _reminder_metric(filters, "detailed", int(row["detailed_reminders"])))
    second[2].metric("Agents with loops", f"{int(row['agents_with_loops']):,}")
    if words.longest is None:
        second[3].metric("Longest loop", "—", help="A parallel duplicate has no length.")
    else:
        second[3].metric(words.longest, f"{int(row['longest_run']):,}")
    broken, ignored, reminders = figures.heeded_rate(outcomes)
    third[0].metric(
        "Reminders heeded",
        f"{broken / (broken + ignored):.0%}" if broken + ignored else "—",
        help=f"Of {reminders:,} reminders, {broken:,} were followed by a different call (broken) and {ignored:,} "
        "by the same call again (ignored); the rest ended with their run or wait for the next call.",
    )
    if models:
        third[1].metric("Model tokens", f"{tokens.tokens:,}", help="Input and output tokens of every model call.")
        third[2].metric(
            "Wasted tokens",
            f"{tokens.wasted_tokens:,}",
            help="Tokens of the model calls that issued a repeated call (run position 2 or more) or a call in a "
            "detected cycle or no-progress run.",
        )
        third[3].metric(
            "Wasted cost",
            tokens.wasted_money,
            help="Priced with genai-prices. "
            + (f"No price for: {tokens.unpriced_models}." if tokens.unpriced_models else "Every model has a price."),
        )
    notes = [
        f"{tracked:,} tracked tool calls; {untracked:,} calls of excluded tools are stored but not counted.",
        f"{words.time} is summed over concurrent agents.",
    ]
    if models:
        notes.append(
            f"Wasted tokens are {tokens.wasted_share:.1%} of {tokens.tokens:,} model tokens (cost of all: {tokens.money})."
        )
        if tokens.unpriced_models:
            notes.append(f"Price unknown for: {tokens.unpriced_models}.")
    else:
        notes.append("No model calls in this selection, so no tokens or cost: the store keeps model-call spans too.")
    st.caption(" ".join(notes))


def _excluded_section(excluded: pd.DataFrame) -> None:
    if excluded.empty:
        return
    names = ", ".join(f"`{t}`" for t in excluded["tool"])
    st.info(
        f"{names}: excluded from tracking by the guard's configuration (exclude patterns), so its calls are "
        "stored but never counted as repeats. Change OTEL_REPEAT_GUARD_EXCLUDE to track it.",
        icon="ℹ️",
    )


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


def _hotspot_table(frame: pd.DataFrame, label: str, key: str, models: bool, words: Wording) -> None:
    columns = [label, "repeated_calls", "reminders", "longest_run", "wasted_seconds", "repeated_share"]
    if models:
        columns += ["wasted_tokens", "wasted_token_share", "wasted_cost"]
    shown = frame[columns]
    if models:
        shown = shown.assign(wasted_token_share=shown["wasted_token_share"] * 100)
    st.dataframe(
        shown.assign(repeated_share=shown["repeated_share"] * 100),
        key=key,
        hide_index=True,
        width="stretch",
        column_config={
            label: st.column_config.TextColumn(label.capitalize()),
            "repeated_calls": st.column_config.NumberColumn(words.calls),
            "reminders": st.column_config.NumberColumn("Reminders"),
            "longest_run": st.column_config.NumberColumn(words.longest or "Longest loop"),
            "wasted_seconds": st.column_config.NumberColumn("Wasted (s)", format="%.1f"),
            "repeated_share": st.column_config.NumberColumn(
                "Share", format="%.0f%%", help=f"{words.calls} as a share of this {label}'s calls"
            ),
            "wasted_tokens": st.column_config.NumberColumn(
                "Wasted tokens", help="Tokens of the model calls that issued its repeated calls"
            ),
            "wasted_token_share": st.column_config.NumberColumn(
                "Of tokens",
                format="%.1f%%",
                help="Wasted tokens as a share of all model tokens"
                + (" of this agent" if label == "agent" else " in the selection"),
            ),
            "wasted_cost": st.column_config.TextColumn("Wasted cost"),
        },
    )


def _grouped_section(title: str, frame: pd.DataFrame, label: str, key: str, models: bool, words: Wording) -> None:
    st.subheader(title)
    if frame.empty:
        st.caption(f"No {words.calls.lower()} in this selection.")
        return
    left, right = st.columns([5, 2] if models else [3, 2])  # the token columns need the room
    with left:
        _hotspot_table(frame, label, key, models, words)
    with right:
        chart = charts.hotspot_bars(frame, label, f"{words.calls} by {label}", words.calls.lower())
        st.altair_chart(chart, width="stretch")


def _model_section(by_model: pd.DataFrame) -> None:
    st.subheader("By model")
    if by_model.empty:
        st.caption("No model calls in this selection.")
        return
    shown = by_model[
        ["model", "calls", "total_tokens", "wasted_tokens", "wasted_share", "cost_text", "wasted_cost", "unpriced"]
    ]
    st.dataframe(
        shown.assign(wasted_share=shown["wasted_share"] * 100),
        key="by_model",
        hide_index=True,
        width="stretch",
        column_config={
            "model": st.column_config.TextColumn("Model"),
            "calls": st.column_config.NumberColumn("Model calls"),
            "total_tokens": st.column_config.NumberColumn("Tokens"),
            "wasted_tokens": st.column_config.NumberColumn("Wasted tokens"),
            "wasted_share": st.column_config.NumberColumn("Wasted share", format="%.1f%%"),
            "cost_text": st.column_config.TextColumn("Cost"),
            "wasted_cost": st.column_config.TextColumn("Wasted cost"),
            "unpriced": st.column_config.TextColumn("No price for"),
        },
    )


EFFICACY_BY = {"tier": "Tier", "tool": "Tool", "agent": "Agent", "model": "Model"}


def _efficacy_section(outcomes: pd.DataFrame, reminders: int, kind: str | None) -> None:
    st.subheader("Did the reminders work?")
    if kind not in (None, REPEAT):
        st.caption("Outcomes are measured for the reminders of runs of identical calls (the repeat kind) only.")
        return
    if outcomes.empty:
        st.caption("No reminders in this selection.")
        return
    if reminders > queries.REMINDER_WINDOW:
        st.caption(
            f"The outcomes of the latest {queries.REMINDER_WINDOW:,} of the {reminders:,} reminders in this "
            "selection (narrow the time range for all of them)."
        )
    by = st.radio(
        "Group by", list(EFFICACY_BY), format_func=EFFICACY_BY.__getitem__, horizontal=True, key="efficacy_by"
    )
    by = str(by or "tier")
    table = figures.efficacy(outcomes, by)
    left, right = st.columns([3, 2])
    with left:
        st.dataframe(
            table.assign(heeded=table["heeded"] * 100),
            key="efficacy",
            hide_index=True,
            width="stretch",
            column_config={
                by: st.column_config.TextColumn(EFFICACY_BY[by]),
                "reminders": st.column_config.NumberColumn("Reminders"),
                "broken": st.column_config.NumberColumn("Broken", help="The next call was a different one"),
                "ignored": st.column_config.NumberColumn("Ignored", help="The same call again"),
                "ended": st.column_config.NumberColumn("Ended", help="The run ended before another call"),
                "open": st.column_config.NumberColumn("Open", help="No next call yet"),
                "heeded": st.column_config.NumberColumn("Heeded", format="%.0f%%", help="Broken ÷ (broken + ignored)"),
            },
        )
    with right:
        st.altair_chart(charts.efficacy_bars(table, by), width="stretch")


def _bucket_seconds(db: str, filters: Filters) -> float:
    """A width giving 30-60 points over the part of the range that holds calls."""
    bounds = _bounds(db).iloc[0]
    first, last = int(bounds["first_ns"]), int(bounds["last_ns"])
    start = first if filters.start_ns is None else max(first, filters.start_ns)
    end = last if filters.end_ns is None else min(last, filters.end_ns)
    return queries.bucket_seconds(max(0, end - start))


def _trends_section(over_time: pd.DataFrame, bucket_s: float, lengths: pd.DataFrame, words: Wording) -> None:
    left, right = st.columns(2)
    with left:
        st.subheader("Over time")
        if over_time.empty:
            st.caption(f"No {words.calls.lower()} in this selection.")
        else:
            st.altair_chart(charts.over_time(over_time, bucket_s, words.calls.lower()), width="stretch")
    with right:
        st.subheader("Run-length distribution")
        if words is not WORDING[REPEAT]:
            st.caption("Runs of identical calls, whatever the loop kind.")
        loops = lengths[lengths["run_length"] >= 2]
        single = int(lengths.loc[lengths["run_length"] == 1, "runs"].sum())
        if loops.empty:
            st.caption("No runs of two or more identical calls in this selection.")
        else:
            st.altair_chart(charts.run_length_histogram(loops), width="stretch")
        st.caption(f"{single:,} calls were not repeated (runs of one).")


def _timeline_table(frame: pd.DataFrame, settings: Settings, key: str) -> None:
    """A run's model and tool calls in order. Every cell is text or a number: nothing is rendered as HTML."""
    columns = ["time", "kind", "name", "position", "tokens", "duration_ms", "status", "note", "text"]
    shown = frame.assign(text=frame["text"].fillna(""))
    config = {
        "time": st.column_config.DatetimeColumn("Started (UTC)", format="HH:mm:ss.SSS"),
        "kind": st.column_config.TextColumn("Call"),
        "name": st.column_config.TextColumn("Tool or model"),
        "position": st.column_config.TextColumn("Run position", width="small"),
        "tokens": st.column_config.TextColumn("Tokens"),
        "duration_ms": st.column_config.NumberColumn("Duration (ms)", format="%.0f", width="small"),
        "status": st.column_config.TextColumn("Status", width="small"),
        "note": st.column_config.TextColumn("What happened", width="medium"),
        "text": st.column_config.TextColumn("Arguments or model output (text)", width="large"),
    }
    if settings.trace_url is not None:
        shown = shown.assign(
            trace=[settings.trace_link(t, s) or "" for t, s in zip(shown["trace_id"], shown["span_id"], strict=True)]
        )
        columns.append("trace")
        config["trace"] = st.column_config.LinkColumn("Trace", display_text="open trace")
    st.dataframe(shown[columns], key=key, hide_index=True, width="stretch", column_config=config)
    if len(frame) >= queries.TIMELINE_ROWS:
        st.caption(f"The first {queries.TIMELINE_ROWS} calls from a little before the loop.")


def _loop_label(loop: pd.Series) -> str:
    """A loop as the drill-down's box names it: the agent, what kind of loop and how long, when it ended."""
    ended = f"ended {loop['ended']:%Y-%m-%d %H:%M:%S} UTC"
    kind, length = str(loop["kind"]), loop["run_length"]
    if kind == REPEAT:
        what = f"run of {int(length)} identical calls"
    elif kind == CYCLE:
        what = f"cycle of {int(loop['period'])} calls × {int(loop['repetitions'])} copies"
    elif kind == "no_progress":
        what = f"{int(length)} calls without progress (same outcome)"
    else:
        what = "parallel duplicate"
    return f"{loop['agent']} · {what} · {ended}"


def _hotspot_loops(db: str, filters: Filters, tool: str, kinds: tuple[str, ...]) -> pd.DataFrame:
    """The tool's loops the drill-down offers: runs of identical calls (unless another kind is chosen), and
    the loops of the chosen kind, or of every other kind the store holds."""
    other = tuple(k for k in kinds if k != REPEAT) if filters.kind is None else (filters.kind,)
    frames = []
    if filters.kind in (None, REPEAT):
        frames.append(_runs(db, filters, tool).assign(kind=REPEAT))
    if other != (REPEAT,) and other:
        frames.append(_loops(db, filters, tool, other))
    frames = [frame for frame in frames if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _drill_down(db: str, filters: Filters, tools: list[str], settings: Settings, kinds: tuple[str, ...]) -> None:
    st.subheader("Drill-down: a hotspot's loops, call by call")
    if not tools:
        st.caption("No hotspots to drill into.")
        return
    tool = str(st.selectbox("Hotspot tool", tools, key="drill_tool"))
    loops = _hotspot_loops(db, filters, tool, kinds)
    if loops.empty:
        st.caption("No loops for this tool in this selection.")
        return
    labels = {(str(loop["kind"]), int(loop["end_id"])): _loop_label(loop) for _, loop in loops.iterrows()}
    # Keyed by tool: the box shows this tool's loops, never the one picked for the previous tool.
    title = "Run of identical calls" if set(loops["kind"]) == {REPEAT} else "Loop"
    choice = st.selectbox(title, list(labels), format_func=labels.__getitem__, key=f"drill_run:{tool}")
    kind, end_id = choice if choice is not None else next(iter(labels))
    picked = loops.loc[(loops["kind"] == kind) & (loops["end_id"] == end_id)].iloc[0]
    agent_key = str(picked["agent_key"])
    length = 1 if pd.isna(picked["run_length"]) else int(picked["run_length"])
    focus = _loop_start(db, agent_key, end_id, length)
    timeline = _timeline(db, agent_key, focus)
    st.caption(
        "The agent run's model calls and tool calls in order: the reminders where they were delivered, the model "
        "call that received each, what the agent run did next, and where the loop broke."
    )
    _timeline_table(timeline, settings, "timeline")
    if kind == REPEAT:
        repeats = ~timeline["position"].isin(["", "1", "excluded"])
        in_loop = (timeline["kind"] == "tool") & (timeline["name"] == tool) & repeats
        repeated = timeline.loc[in_loop, "text"].dropna()
        st.caption("Arguments of the repeated call (shown as text):")
        st.code(str(repeated.iloc[-1]) if not repeated.empty else "(arguments not stored)", language=None)
    if CYCLE in kinds:
        _cycle_section(db, agent_key, end_id if kind == CYCLE else None)


def _cycle_label(cycle: pd.Series) -> str:
    tools = json.loads(cycle["cycle_tools"]) if isinstance(cycle["cycle_tools"], str) else []
    steps = " → ".join(str(t) for t in tools) if tools else f"{int(cycle['period'])} calls"
    return f"{steps}, {int(cycle['repetitions'])} copies, completed {cycle['ended']:%H:%M:%S} UTC"


def _cycle_section(db: str, agent_key: str, picked: int | None) -> None:
    """The calls of a cycle in this agent run, copy by copy; none when the agent run has no cycle."""
    cycles = _agent_cycles(db, agent_key)
    if cycles.empty:
        return
    st.markdown("**The cycle in this agent run, call by call**")
    ids = [int(i) for i in cycles["end_id"]]
    end_id = ids[-1] if picked not in ids else picked
    if len(ids) > 1:
        labels = {int(c["end_id"]): _cycle_label(c) for _, c in cycles.iterrows()}
        chosen = st.selectbox(
            "Cycle in this agent run",
            ids,
            index=ids.index(end_id),
            format_func=labels.__getitem__,
            key=f"cycle:{agent_key}:{picked}",
        )
        end_id = int(chosen) if chosen is not None else end_id
    cycle = cycles.loc[cycles["end_id"] == end_id].iloc[0]
    period, repetitions = int(cycle["period"]), int(cycle["repetitions"])
    calls = _cycle_calls(db, agent_key, end_id, period, repetitions)
    st.caption(
        f"{_cycle_label(cycle)}: the agent run's last {period * repetitions} tracked calls up to the call that "
        "completed the last copy (excluded tools and parallel duplicates are not part of a cycle)."
    )
    st.dataframe(
        calls.assign(arguments=calls["arguments"].fillna("(arguments not stored)"))[
            ["copy", "step", "tool", "arguments", "status", "time"]
        ],
        key="cycle_calls",
        hide_index=True,
        width="stretch",
        column_config={
            "copy": st.column_config.NumberColumn("Copy", help="Which repetition of the cycle the call belongs to"),
            "step": st.column_config.NumberColumn("Step", help="The call's place in its copy"),
            "tool": st.column_config.TextColumn("Tool"),
            "arguments": st.column_config.TextColumn("Arguments (text)", width="large"),
            "status": st.column_config.TextColumn("Status", width="small"),
            "time": st.column_config.DatetimeColumn("Started (UTC)", format="HH:mm:ss.SSS"),
        },
    )


def _conversation_section(db: str, filters: Filters, settings: Settings) -> None:
    st.subheader("Conversations and sessions")
    listed = _conversations(db, filters)
    if listed.empty:
        st.caption(
            "No model call in this selection names a conversation (`gen_ai.conversation.id`) or a session (`session.id`)."
        )
        return
    st.dataframe(
        listed[["conversation", "runs", "model_calls", "tokens", "repeated_calls", "reminders", "last"]],
        key="conversations",
        hide_index=True,
        width="stretch",
        column_config={
            "conversation": st.column_config.TextColumn("Conversation or session"),
            "runs": st.column_config.NumberColumn("Agent runs"),
            "model_calls": st.column_config.NumberColumn("Model calls"),
            "tokens": st.column_config.NumberColumn("Tokens"),
            "repeated_calls": st.column_config.NumberColumn("Repeated calls"),
            "reminders": st.column_config.NumberColumn("Reminders"),
            "last": st.column_config.DatetimeColumn("Last call (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    conversation = str(st.selectbox("Conversation", list(listed["conversation"]), key="conversation"))
    runs = _conversation_runs(db, conversation)
    if runs.empty:
        return
    labels = {
        str(r.agent_key): f"{r.agent} · {r.model_calls} model calls · {r.repeated_calls} repeated calls"
        for r in runs.itertuples(index=False)
    }
    choice = st.selectbox(
        "Run in this conversation", list(labels), format_func=labels.__getitem__, key=f"conversation_run:{conversation}"
    )
    _timeline_table(_timeline(db, str(choice or next(iter(labels))), None), settings, "conversation_timeline")


def _store_failed(db: str, exc: Exception) -> None:
    error = exc if isinstance(exc, StoreError) else store_error(db, exc) if isinstance(exc, sqlite3.Error) else exc
    st.error(f"Cannot read the store: {error}")


def _content(settings: Settings, filters: Filters, kinds: tuple[str, ...]) -> None:
    """The page body; a fragment (re-run alone on auto-refresh), so it reports store errors itself."""
    try:
        _draw(settings, filters, kinds)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(str(settings.db), exc)


def _draw(settings: Settings, filters: Filters, kinds: tuple[str, ...]) -> None:
    db = str(settings.db)
    words = wording(filters.kind, kinds)
    # Every section's query first, then the drawing: a store that fails part-way through
    # (a damaged page in one table) shows one message, not half a page.
    headline, by_tool, by_agent = _headline(db, filters), _by_tool(db, filters), _by_agent(db, filters)
    all_tokens, wasted = _model_tokens(db, filters), _wasted_tokens(db, filters)
    outcomes = _outcomes(db, filters)
    bucket_s = _bucket_seconds(db, filters)
    over_time, lengths = _over_time(db, filters, bucket_s), _run_lengths(db, filters)
    unguarded = _unguarded(db, filters)
    excluded = _excluded(db, filters.tools)
    models = not all_tokens.empty
    tokens = figures.token_headline(all_tokens, wasted)
    by_tool = figures.with_wasted_tokens(by_tool, wasted, "tool", "tool", all_tokens)
    by_agent = figures.with_wasted_tokens(by_agent, wasted, "agent", "agent", all_tokens)

    _headline_section(headline, tokens, outcomes, filters, models, words)
    _excluded_section(excluded)
    _unguarded_section(unguarded)
    _grouped_section("Loop hotspots by tool", by_tool, "tool", "hotspots_by_tool", models, words)
    _grouped_section("By agent", by_agent, "agent", "hotspots_by_agent", models, words)
    if models:
        _model_section(figures.by_model(all_tokens, wasted))
    _efficacy_section(outcomes, _reminder_count(db, filters), filters.kind)
    _trends_section(over_time, bucket_s, lengths, words)
    _drill_down(db, filters, [str(t) for t in by_tool["tool"]], settings, kinds)
    _conversation_section(db, filters, settings)


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
    db = str(settings.db)
    try:
        if not _has_data(db) or int(_bounds(db).iloc[0]["rows"]) == 0:
            st.info(FEED_HELP.format(db=db))
            return
        filters, auto, kinds = _sidebar(db)
        body = st.fragment(run_every=REFRESH_SECONDS if auto else None)(_content)
        body(settings, filters, kinds)
    except (StoreError, sqlite3.Error) as exc:
        _store_failed(db, exc)


if __name__ == "__main__":
    main()
