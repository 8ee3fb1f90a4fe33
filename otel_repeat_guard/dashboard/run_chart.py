"""A run's timeline as a picture: its model calls and tool calls on a time axis, the repeated calls marked by
their run position, the reminders where they were sent and where the model received them, where the
loop broke. A call that failed starts with a ✕ in the colour of what it was instead of a dot: a repeat that
failed is drawn as a repeat (its colour and run position), as a loop of failing calls is the commonest stall. Built from ``queries.run_timeline``'s
frame (pure pandas and altair: no SQL, no drawing)."""

from __future__ import annotations

import altair as alt
import pandas as pd

HOVER_CHARS = 300
"""How much of a call's arguments or output the tooltip shows."""
LANES = ["model calls", "tool calls"]
WHAT = ["model call", "tool call", "repeated call", "excluded tool"]
WHAT_COLORS = ["#30638e", "#9aa5b1", "#d1495b", "#d9d9d9"]
FAILED = "call failed"
MARKS = ["reminder sent", "reminder received", "loop broken", FAILED]
MARK_COLORS = ["#f0a202", "#f0a202", "#2a9d8f", "#6a040f"]
MARK_SHAPES = ["triangle-down", "triangle-up", "diamond", "M-1,-1L1,1M1,-1L-1,1"]  # the last: a ✕
MARK_STROKES = ["#333", "#333", "#333", "#6a040f"]
EDGE = 0.02
"""The room left on each side of the calls, as a share of the time they span: the last bar and label are whole."""


def _what(row: pd.Series) -> str:
    """What a call was, whether it failed or not (a failure is its own mark)."""
    if row["kind"] == "model":
        return "model call"
    if row["position"] == "excluded":
        return "excluded tool"
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
            "failed": (timeline["status"] == "error").to_numpy(),
            "mark": FAILED,
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


def time_domain(calls: pd.DataFrame) -> list[float]:
    """The time axis's ends, in ms since the epoch: the first start and the last end, and a margin (``EDGE``)."""
    first = calls["start"].min().value / 1e6
    last = max(calls["end"].max().value, calls["start"].max().value) / 1e6
    margin = max((last - first) * EDGE, 50.0)
    return [first - margin, last + margin]


def run_timeline(timeline: pd.DataFrame) -> alt.LayerChart:
    """The picture of ``timeline`` (``queries.run_timeline``): a lane for model calls and one for tool calls."""
    calls, marks = calls_frame(timeline), marks_frame(timeline)
    x = alt.X(
        "start:T",
        title="time (UTC)",
        scale=alt.Scale(type="utc", domain=time_domain(calls), nice=False),
        axis=alt.Axis(format="%H:%M:%S.%L", labelOverlap=True, labelFlush=True, labelBound=True),
    )
    y = alt.Y("lane:N", title=None, sort=LANES, scale=alt.Scale(domain=LANES, paddingInner=0.4, paddingOuter=0.3))
    color = alt.Color(
        "what:N", title=None, scale=alt.Scale(domain=WHAT, range=WHAT_COLORS), legend=alt.Legend(orient="top")
    )
    tooltip = [
        alt.Tooltip("name:N", title="tool or model"),
        alt.Tooltip("start:T", title="started (UTC)", format="%H:%M:%S.%L", formatType="utc"),
        alt.Tooltip("duration_ms:Q", title="duration (ms)", format=",.0f"),
        alt.Tooltip("position:N", title="run position"),
        alt.Tooltip("tokens:N"),
        alt.Tooltip("note:N", title="what happened"),
        alt.Tooltip("text:N", title="arguments or output"),
    ]
    base = alt.Chart(calls).encode(x=x, y=y, color=color, tooltip=tooltip)
    bars = base.mark_bar(height=18, opacity=0.85).encode(x2="end:T")
    what_colors = alt.Scale(domain=WHAT, range=WHAT_COLORS)
    starts = (
        alt.Chart(calls[~calls["failed"]])
        .mark_point(filled=True, size=70, shape="circle", opacity=1)
        .encode(x=x, y=y, color=alt.Color("what:N", scale=what_colors, legend=None), tooltip=tooltip)
    )
    positions = (
        alt.Chart(calls[calls["what"] == "repeated call"])
        .mark_text(dy=-16, fontSize=11, fontWeight="bold", color="#d1495b")
        .encode(x="start:T", y=y, text="position:N", tooltip=tooltip)
    )
    layers: list[alt.Chart] = [bars, starts, positions]
    shapes = alt.Scale(domain=MARKS, range=MARK_SHAPES)
    fills = alt.Scale(domain=MARKS, range=MARK_COLORS)
    strokes = alt.Scale(domain=MARKS, range=MARK_STROKES)
    # One legend for the marks, under the picture: at the top beside the calls' it ran past the edge at 1440 px.
    legend = alt.Legend(orient="bottom", title=None)
    failed = calls[calls["failed"]]
    if not marks.empty:
        layers.append(
            alt.Chart(marks)
            .mark_point(filled=True, size=150, yOffset=18, opacity=1)
            .encode(
                x="at:T",
                y=y,
                shape=alt.Shape("mark:N", scale=shapes, legend=legend),
                fill=alt.Fill("mark:N", scale=fills, legend=None),
                stroke=alt.Stroke("mark:N", scale=strokes, legend=None),
                tooltip=[alt.Tooltip("mark:N", title="what"), alt.Tooltip("note:N", title="what happened")],
            )
        )
        broken = marks[marks["mark"] == "loop broken"]
        if not broken.empty:
            layers.append(
                alt.Chart(broken).mark_rule(color="#2a9d8f", strokeDash=[4, 3], strokeWidth=2).encode(x="at:T")
            )
    if not failed.empty:
        layers.append(
            alt.Chart(failed)
            .mark_point(filled=False, size=110, strokeWidth=3, opacity=1)
            .encode(  # a ✕ where the call started, in the colour of what it was: a failed repeat stays a repeat
                x="start:T",
                y=y,
                shape=alt.Shape("mark:N", scale=shapes, legend=legend),
                color=alt.Color("what:N", scale=what_colors, legend=None),
                tooltip=tooltip,
            )
        )
    chart: alt.LayerChart = alt.layer(*layers).properties(
        height=380, title="The run, call by call (hover a call for its arguments and tokens)"
    )
    return chart
