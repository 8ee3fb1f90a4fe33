"""The sidebar: the filters, auto-refresh and the store's path."""

from __future__ import annotations

import datetime as dt
import time

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from otel_repeat_guard.dashboard.reads import CACHE_TTL_SECONDS
from otel_repeat_guard.dashboard.sections import address
from otel_repeat_guard.dashboard.sections.wording import KIND_LABELS, plain
from otel_repeat_guard.dashboard.settings import REFRESH_SECONDS
from otel_repeat_guard.store.queries import TIERS, Filters
from otel_repeat_guard.store.records import LOOP_KINDS, REPEAT

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


def draw(db: str, options: pd.DataFrame, bounds: pd.DataFrame) -> tuple[Filters, bool, tuple[str, ...]]:
    """The filters, auto-refresh, and the loop kinds the store holds (in ``LOOP_KINDS`` order), from the
    store's ``filter_options`` and ``time_bounds``; above the page, where the calls are when the time range
    holds none of them.

    The boxes sit in a popover, with a line under it saying what they select: the browser draws a popover's
    content only once it is opened, and the boxes (their code, 27 files, and their drawing) were most of what a
    fresh page cost it beyond a bare Streamlit page (benchmarks/dashboard_page.py). Their values live on the
    server, so the filters, the address and the line hold whether the popover was ever opened or not."""

    def values(kind: str) -> list[str]:
        return [str(v) for v in options.loc[options["kind"] == kind, "value"]]

    kinds = tuple(k for k in LOOP_KINDS if k in values("loop_kind"))

    sidebar = st.sidebar
    box = sidebar.popover(FILTERS, icon=":material/filter_list:", width="stretch")
    ranges = [*TIME_RANGES, CUSTOM_RANGE]
    offered = {"services": values("service"), "agents": values("agent"), "tools": values("tool"), "tiers": TIERS}
    linked = address.restore(offered, list(TIME_RANGES), "time_range")
    # A range from the address is the box's value already: no second default beside it.
    first = 0 if linked else ranges.index(DEFAULT_TIME_RANGE)
    label = box.selectbox("Time range", ranges, index=first, key="time_range")
    if label == CUSTOM_RANGE:
        start_ns, end_ns = _custom_range(box, bounds)
    else:
        seconds = TIME_RANGES[label or DEFAULT_TIME_RANGE]
        now_ns = int(time.time() // CACHE_TTL_SECONDS * CACHE_TTL_SECONDS) * _NS  # cache-friendly
        start_ns, end_ns = (None if seconds is None else now_ns - seconds * _NS), None
    filters = Filters(
        start_ns=start_ns,
        end_ns=end_ns,
        services=tuple(box.multiselect("Service", offered["services"], key="services")),
        agents=tuple(box.multiselect("Agent", offered["agents"], key="agents")),
        tools=tuple(box.multiselect("Tool", offered["tools"], key="tools")),
        tiers=tuple(
            box.multiselect("Reminder tier", list(TIERS), key="tiers", help="Counts only reminders of these tiers.")
        ),
        kind=_kind_filter(box, kinds),
    )
    auto = box.toggle(f"Auto-refresh every {REFRESH_SECONDS} s", value=False, key="auto_refresh")
    sidebar.caption(chosen(filters, str(label), auto))
    address.publish(filters, str(label), DEFAULT_TIME_RANGE, list(TIME_RANGES))
    draw_empty_range(bounds, filters, str(label))
    sidebar.caption(f"Store: `{db}`")
    return filters, auto, kinds


FILTERS = "Filters"
"""The sidebar popover's label."""
EVERYTHING = "every service, agent, tool and tier"


def chosen(filters: Filters, label: str, auto: bool) -> str:
    """The line under the sidebar's popover, as Markdown: what its boxes select, seen without opening it
    ("Last hour · Tool: sql_query · Agent: analyst, coder")."""
    if label == CUSTOM_RANGE and filters.start_ns is not None and filters.end_ns is not None:
        label = f"{_utc(filters.start_ns):%Y-%m-%d %H:%M} to {_utc(filters.end_ns):%Y-%m-%d %H:%M} UTC"
    named = (
        ("Service", filters.services),
        ("Agent", filters.agents),
        ("Tool", filters.tools),
        ("Reminder tier", filters.tiers),
    )
    parts = [label, *(f"{name}: {', '.join(chosen)}" for name, chosen in named if chosen)]
    if filters.kind is not None:
        parts.append(f"Loop kind: {KIND_LABELS[filters.kind]}")
    if len(parts) == 1:
        parts.append(EVERYTHING)
    if auto:
        parts.append(f"auto-refresh every {REFRESH_SECONDS} s")
    return " · ".join(plain(part) for part in parts)


ALL_TIME = "All time"


def _show_all_time() -> None:
    st.session_state["time_range"] = ALL_TIME  # a callback: it runs before the box is drawn again


def draw_empty_range(bounds: pd.DataFrame, filters: Filters, label: str) -> bool:
    """When the time range holds none of the store's calls (the default "Last 24 hours" over last week's
    collector file), say where the calls are, with a button to "All time". Whether it said so."""
    row = bounds.iloc[0]
    if pd.isna(row["first_ns"]) or pd.isna(row["last_ns"]):
        return False
    first, last = int(row["first_ns"]), int(row["last_ns"])
    before = filters.end_ns is not None and filters.end_ns < first
    after = filters.start_ns is not None and filters.start_ns > last
    if not (before or after):
        return False
    st.warning(
        f"No calls in the time range ({label}). The store's calls run from {_utc(first):%Y-%m-%d %H:%M:%S} UTC "
        f"to {_utc(last):%Y-%m-%d %H:%M:%S} UTC.",
        icon="🕒",
    )
    st.button(f"Show {ALL_TIME.lower()}", key="show_all_time", on_click=_show_all_time, type="primary")
    return True


def _utc(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / _NS, tz=dt.timezone.utc)


def _custom_range(box: DeltaGenerator, bounds: pd.DataFrame) -> tuple[int, int]:
    """The custom range (UTC) in the sidebar's ``box``, defaulting to the store's first and last call."""
    row = bounds.iloc[0]
    first = _utc(int(row["first_ns"]) if pd.notna(row["first_ns"]) else time.time_ns())
    last = _utc(int(row["last_ns"]) if pd.notna(row["last_ns"]) else time.time_ns())
    # One field a row: side by side, a date no longer fits ("2026 / 12 / (").
    start_day = box.date_input(
        "From (UTC)", value=first.date(), min_value=_EPOCH, max_value=_LAST_DAY, key="custom_from_day"
    )
    start_time = box.time_input("at", value=first.time().replace(second=0, microsecond=0), key="custom_from_time")
    end_day = box.date_input("To (UTC)", value=last.date(), min_value=_EPOCH, max_value=_LAST_DAY, key="custom_to_day")
    end_time = box.time_input(
        "at ", value=(last + dt.timedelta(minutes=1)).time().replace(second=0, microsecond=0), key="custom_to_time"
    )
    start = dt.datetime.combine(_day(start_day, first), start_time or dt.time(), tzinfo=dt.timezone.utc)
    end = dt.datetime.combine(_day(end_day, last), end_time or dt.time(), tzinfo=dt.timezone.utc)
    if end < start:
        box.warning("The range ends before it starts: showing it the other way round.")
        start, end = end, start
    return int(start.timestamp()) * _NS, int(end.timestamp()) * _NS


def _day(value: object, default: dt.datetime) -> dt.date:
    return value if isinstance(value, dt.date) else default.date()


def _kind_filter(box: DeltaGenerator, kinds: tuple[str, ...]) -> str | None:
    """The "Loop kind" box in the sidebar's ``box``, only when the store holds a kind beside repeats (the guard's
    opt-in detectors)."""
    if set(kinds) <= {REPEAT}:
        return None
    choice = box.selectbox(
        "Loop kind",
        [None, *kinds],
        format_func=KIND_LABELS.__getitem__,
        key="loop_kind",
        help="Narrows the loop figures (headline, hotspots, over time, drill-down) to calls with a detection of "
        "this kind. Token figures count the model calls behind loops of every kind.",
    )
    return None if choice is None else str(choice)
