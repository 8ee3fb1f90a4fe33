"""Charts for the dashboard, each built from a query's DataFrame: Altair charts, and the Overview's chart over time
as a plain Vega-Lite spec (the first page a fresh session draws: building and validating it through Altair cost
more than every query of the page together)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Altair is imported by the pages that draw its charts, not by the first page
    import altair as alt
    import pandas as pd

SERIES_COLORS = ["#9aa5b1", "#f0a202", "#d1495b"]  # the calls, gentle and detailed reminders


def hotspot_bars(frame: pd.DataFrame, category: str, title: str, measure: str = "repeated calls") -> alt.Chart:
    """Horizontal bars of repeated calls (``measure``: what the loop kind counts) per ``category``, longest
    first, with reminders in the tooltip."""
    import altair as alt  # noqa: PLC0415 - see the module's docstring

    chart: alt.Chart = (
        alt.Chart(frame, title=title)
        .mark_bar(color="#d1495b")
        .encode(
            x=alt.X("repeated_calls:Q", title=measure, axis=alt.Axis(tickMinStep=1, format="d")),
            y=alt.Y(f"{category}:N", sort="-x", title=None, axis=alt.Axis(labelLimit=260)),
            tooltip=[
                alt.Tooltip(f"{category}:N"),
                alt.Tooltip("repeated_calls:Q", title=measure),
                alt.Tooltip("reminders:Q"),
                alt.Tooltip("longest_run:Q", title="longest run"),
                alt.Tooltip("repeated_share:Q", title="share of its calls", format=".0%"),
            ],
        )
        .properties(height=alt.Step(22))
    )
    return chart


SERIES = ["repeated calls", "gentle reminders", "detailed reminders"]


def bucket_text(bucket_s: float) -> str:
    """A bucket width in words: "0.5 s", "5 min", "1 h", "7 days"."""
    if bucket_s < 60:
        return f"{bucket_s:g} s"
    if bucket_s < 3600:
        return f"{bucket_s / 60:g} min"
    if bucket_s < 86400:
        return f"{bucket_s / 3600:g} h"
    return f"{bucket_s / 86400:g} days"


def _time_format(bucket_s: float) -> str:
    """Each label with its date (a range of last week's calls read as today's without it)."""
    if bucket_s < 1:
        return "%b %d %H:%M:%S.%L"
    if bucket_s < 60:
        return "%b %d %H:%M:%S"
    if bucket_s < 86400:
        return "%b %d %H:%M"
    return "%b %d %Y"


def over_time(bucket_s: float, measure: str = "repeated calls") -> dict[str, Any]:
    """The Vega-Lite spec of repeated calls (``measure``: what the loop kind counts) and reminders by tier per time
    bucket, over a frame of ``bucket``, ``series`` and ``count`` whose first series is named ``measure``.

    Coinciding series stay apart: each has its own colour, dash, point shape and size, and the
    reminder points are drawn over the repeats' line. A bucket that counts 0 has no point: its line only.
    """
    fmt = _time_format(bucket_s)
    series = [measure, *SERIES[1:]]

    def by_series(scale: list[Any], legend: dict[str, str] | None) -> dict[str, Any]:
        return {"field": "series", "type": "nominal", "scale": {"domain": series, "range": scale}, "legend": legend}

    top = {"orient": "top"}
    encoding: dict[str, Any] = {
        "x": {
            "field": "bucket",
            "type": "temporal",
            "title": "time (UTC)",
            "scale": {"type": "utc"},
            "axis": {"format": fmt},
        },
        "y": {"field": "count", "type": "quantitative", "title": "calls", "axis": {"tickMinStep": 1, "format": "d"}},
        "color": {**by_series(SERIES_COLORS, top), "title": None},
        "tooltip": [
            {"field": "bucket", "type": "temporal", "format": fmt, "formatType": "utc"},
            {"field": "series", "type": "nominal"},
            {"field": "count", "type": "quantitative"},
        ],
    }
    lines: dict[str, Any] = {
        "mark": {"type": "line"},
        "encoding": {**encoding, "strokeDash": by_series([[1, 0], [6, 3], [2, 2]], None)},
    }
    points: dict[str, Any] = {
        "mark": {"type": "point", "filled": False, "strokeWidth": 2},
        "transform": [{"filter": "datum.count > 0"}],
        "encoding": {
            **encoding,
            "shape": {**by_series(["circle", "triangle-up", "diamond"], top), "title": None},
            "size": by_series([40, 90, 140], None),
        },
    }
    return {"height": 260, "title": f"Repeats and reminders per {bucket_text(bucket_s)}", "layer": [lines, points]}


def efficacy_bars(frame: pd.DataFrame, by: str) -> alt.LayerChart:
    """Stacked bars of reminder outcomes per ``by`` (tier, tool, agent or model), each as shares of its
    reminders, with the number of reminders beside each bar (1 of 1 and 4 of 4 are not the same news)."""
    import altair as alt  # noqa: PLC0415 - see the module's docstring

    long = frame.melt(
        id_vars=[by], value_vars=["broken", "ignored", "ended", "open"], var_name="outcome", value_name="n"
    )
    order = list(frame[by])  # the table's order: most reminders first
    y = alt.Y(f"{by}:N", title=None, sort=order, axis=alt.Axis(labelLimit=320))
    x_scale = alt.Scale(domain=[0, 1.16], nice=False)  # room on the right for the counts
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X(
                "n:Q",
                title="share of the reminders",
                stack="normalize",
                scale=x_scale,
                axis=alt.Axis(format="%", values=[0, 0.2, 0.4, 0.6, 0.8, 1]),
            ),
            y=y,
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(
                    domain=["broken", "ignored", "ended", "open"], range=["#2a9d8f", "#d1495b", "#9aa5b1", "#e9c46a"]
                ),
                legend=alt.Legend(orient="top", title=None),
            ),
            tooltip=[alt.Tooltip(f"{by}:N"), "outcome:N", alt.Tooltip("n:Q", title="reminders")],
        )
    )
    counts = (
        alt.Chart(frame.assign(at=1.0, said=[f"{n:,} reminder{'s' if n != 1 else ''}" for n in frame["reminders"]]))
        .mark_text(align="left", dx=6, fontSize=12, color="#31333f")
        .encode(x=alt.X("at:Q", scale=x_scale), y=y, text="said:N")
    )
    chart: alt.LayerChart = alt.layer(bars, counts, title=f"Reminder outcomes by {by}").properties(height=alt.Step(22))
    return chart


def run_length_histogram(frame: pd.DataFrame) -> alt.Chart:
    """How many runs ended at each length."""
    import altair as alt  # noqa: PLC0415 - see the module's docstring

    chart: alt.Chart = (
        alt.Chart(frame, title="Final run lengths (runs of two or more calls)")
        .mark_bar(color="#30638e")
        .encode(
            x=alt.X("run_length:O", title="run length"),
            y=alt.Y("runs:Q", title="runs", axis=alt.Axis(tickMinStep=1, format="d")),
            tooltip=[alt.Tooltip("run_length:O", title="run length"), alt.Tooltip("runs:Q")],
        )
        .properties(height=260)
    )
    return chart
