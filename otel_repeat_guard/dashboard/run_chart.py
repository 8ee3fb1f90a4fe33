"""A run's timeline as a picture: its model calls and tool calls on a time axis, the repeated calls marked by
their run position, the reminders where they were sent and where the model received them, and where the
loop broke. Built from ``queries.run_timeline``'s frame (pure pandas and altair: no SQL, no drawing)."""

from __future__ import annotations

import altair as alt
import pandas as pd

HOVER_CHARS = 300
"""How much of a call's arguments or output the tooltip shows."""
LANES = ["model calls", "tool calls"]
WHAT = ["model call", "tool call", "repeated call", "excluded tool", "error"]
WHAT_COLORS = ["#30638e", "#9aa5b1", "#d1495b", "#d9d9d9", "#6a040f"]
MARKS = ["reminder sent", "reminder received", "loop broken"]
MARK_COLORS = ["#f0a202", "#f0a202", "#2a9d8f"]
MARK_SHAPES = ["triangle-down", "triangle-up", "diamond"]


def _what(row: pd.Series) -> str:
    if row["kind"] == "model":
        return "error" if row["status"] == "error" else "model call"
    if row["position"] == "excluded":
        return "excluded tool"
    if row["status"] == "error":
        return "error"
    return "repeated call" if row["position"] not in ("", "1") else "tool call"


def _short(text: object) -> str:
    value = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text)
    return value if len(value) <= HOVER_CHARS else value[: HOVER_CHARS - 1] + "…"


def calls_frame(timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per call: its lane, start and end, what it was, and the texts the tooltip shows."""
    start = pd.to_datetime(timeline["start_ns"], unit="ns", utc=True)
    end = pd.to_datetime(timeline["end_ns"], unit="ns", utc=True)
    return pd.DataFrame(
        {
            "lane": ["model calls" if kind == "model" else "tool calls" for kind in timeline["kind"]],
            "start": start,
            "end": end,
            "name": timeline["name"].astype(str),
            "what": [_what(row) for _, row in timeline.iterrows()],
            "position": timeline["position"].astype(str),
            "tokens": timeline["tokens"].astype(str),
            "duration_ms": timeline["duration_ms"].astype(float),
            "note": timeline["note"].astype(str),
            "text": [_short(t) for t in timeline["text"]],
        }
    )


def marks_frame(timeline: pd.DataFrame) -> pd.DataFrame:
    """The reminders sent (at the end of the call that drew one), received (at the start of the model call
    given it) and the calls that broke a loop (at their start)."""
    rows = []
    for _, row in timeline.iterrows():
        note = str(row["note"])
        if " reminder sent " in note:
            at, mark, lane = row["end_ns"], "reminder sent", "tool calls"
        elif note.startswith("received the "):
            at, mark, lane = row["start_ns"], "reminder received", "model calls"
        elif note.startswith("loop broken after "):
            at, mark, lane = row["start_ns"], "loop broken", "tool calls"
        else:
            continue
        rows.append({"at": pd.to_datetime(int(at), unit="ns", utc=True), "mark": mark, "lane": lane, "note": note})
    return pd.DataFrame(rows, columns=["at", "mark", "lane", "note"])


def run_timeline(timeline: pd.DataFrame) -> alt.LayerChart:
    """The picture of ``timeline`` (``queries.run_timeline``): a lane for model calls and one for tool calls."""
    calls, marks = calls_frame(timeline), marks_frame(timeline)
    x = alt.X("start:T", title="time (UTC)", axis=alt.Axis(format="%H:%M:%S.%L", labelOverlap=True))
    y = alt.Y("lane:N", title=None, sort=LANES, scale=alt.Scale(domain=LANES, paddingInner=0.4, paddingOuter=0.3))
    color = alt.Color(
        "what:N", title=None, scale=alt.Scale(domain=WHAT, range=WHAT_COLORS), legend=alt.Legend(orient="top")
    )
    tooltip = [
        alt.Tooltip("name:N", title="tool or model"),
        alt.Tooltip("start:T", title="started", format="%H:%M:%S.%L"),
        alt.Tooltip("duration_ms:Q", title="duration (ms)", format=",.0f"),
        alt.Tooltip("position:N", title="run position"),
        alt.Tooltip("tokens:N"),
        alt.Tooltip("note:N", title="what happened"),
        alt.Tooltip("text:N", title="arguments or output"),
    ]
    base = alt.Chart(calls).encode(x=x, y=y, color=color, tooltip=tooltip)
    bars = base.mark_bar(height=18, opacity=0.85).encode(x2="end:T")
    starts = base.mark_point(filled=True, size=70, shape="circle", opacity=1).encode(
        color=alt.Color("what:N", scale=alt.Scale(domain=WHAT, range=WHAT_COLORS), legend=None)
    )
    positions = (
        alt.Chart(calls[calls["what"] == "repeated call"])
        .mark_text(dy=-16, fontSize=11, fontWeight="bold", color="#d1495b")
        .encode(x="start:T", y=y, text="position:N", tooltip=tooltip)
    )
    layers: list[alt.Chart] = [bars, starts, positions]
    if not marks.empty:
        shapes = alt.Scale(domain=MARKS, range=MARK_SHAPES)
        colors = alt.Scale(domain=MARKS, range=MARK_COLORS)
        layers.append(
            alt.Chart(marks)
            .mark_point(filled=True, size=150, yOffset=18, opacity=1)
            .encode(
                x="at:T",
                y=y,
                shape=alt.Shape("mark:N", scale=shapes, title=None, legend=alt.Legend(orient="top")),
                fill=alt.Fill("mark:N", scale=colors, legend=None),
                stroke=alt.value("#333"),
                tooltip=[alt.Tooltip("mark:N", title="what"), alt.Tooltip("note:N", title="what happened")],
            )
        )
        broken = marks[marks["mark"] == "loop broken"]
        if not broken.empty:
            layers.append(
                alt.Chart(broken).mark_rule(color="#2a9d8f", strokeDash=[4, 3], strokeWidth=2).encode(x="at:T")
            )
    chart: alt.LayerChart = alt.layer(*layers).properties(
        height=300, title="The run, call by call (hover a call for its arguments and tokens)"
    )
    return chart
