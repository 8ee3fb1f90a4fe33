"""Altair charts for the dashboard, each built from a query's DataFrame."""

from __future__ import annotations

import altair as alt
import pandas as pd

TIER_COLORS = alt.Scale(
    domain=["repeated calls", "gentle reminders", "detailed reminders"], range=["#9aa5b1", "#f0a202", "#d1495b"]
)


def hotspot_bars(frame: pd.DataFrame, category: str, title: str) -> alt.Chart:
    """Horizontal bars of repeated calls per ``category``, longest first, with reminders in the tooltip."""
    chart: alt.Chart = (
        alt.Chart(frame, title=title)
        .mark_bar(color="#d1495b")
        .encode(
            x=alt.X("repeated_calls:Q", title="repeated calls"),
            y=alt.Y(f"{category}:N", sort="-x", title=None),
            tooltip=[
                alt.Tooltip(f"{category}:N"),
                alt.Tooltip("repeated_calls:Q", title="repeated calls"),
                alt.Tooltip("reminders:Q"),
                alt.Tooltip("longest_run:Q", title="longest run"),
                alt.Tooltip("repeated_share:Q", title="share of its calls", format=".0%"),
            ],
        )
        .properties(height=alt.Step(22))
    )
    return chart


def over_time(frame: pd.DataFrame, bucket_s: int) -> alt.Chart:
    """Repeated calls and reminders by tier per time bucket."""
    chart: alt.Chart = (
        alt.Chart(frame, title=f"Repeats and reminders per {bucket_s} s")
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title=None, axis=alt.Axis(format="%H:%M:%S")),
            y=alt.Y("count:Q", title="calls"),
            color=alt.Color("series:N", scale=TIER_COLORS, title=None, legend=alt.Legend(orient="top")),
            tooltip=[alt.Tooltip("bucket:T", format="%H:%M:%S"), "series:N", "count:Q"],
        )
        .properties(height=260)
    )
    return chart


def run_length_histogram(frame: pd.DataFrame) -> alt.Chart:
    """How many runs ended at each length."""
    chart: alt.Chart = (
        alt.Chart(frame, title="Final run lengths (runs of two or more calls)")
        .mark_bar(color="#30638e")
        .encode(
            x=alt.X("run_length:O", title="run length"),
            y=alt.Y("runs:Q", title="runs"),
            tooltip=[alt.Tooltip("run_length:O", title="run length"), alt.Tooltip("runs:Q")],
        )
        .properties(height=260)
    )
    return chart
