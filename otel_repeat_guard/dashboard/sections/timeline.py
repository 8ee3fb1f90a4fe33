"""An agent run's model and tool calls in order, as the runs and conversations pages show it: the picture,
then a table whose every column reads at 1440 px (its text wraps; arguments and outputs are shortened, in
full in the expander below it). Durations and statuses are the picture's (bar lengths, hover, colour)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import run_chart
from otel_repeat_guard.dashboard.settings import Settings
from otel_repeat_guard.store.queries import TIMELINE_ROWS

TABLE_CHARS = 120
"""How much of a call's arguments or output the table shows (the expander shows all)."""
COLUMNS = {
    "time": "Started (UTC)",
    "kind": "Call",
    "name": "Tool or model",
    "position": "Run position",
    "tokens": "Tokens",
    "note": "What happened",
    "text": "Arguments or model output (text)",
    "trace": "Trace",
}
_WRAP = "overflow-wrap: anywhere; white-space: pre-wrap; vertical-align: top"
_KEEP = "white-space: nowrap; vertical-align: top"  # short values that read badly broken
_UNBROKEN = [COLUMNS[c] for c in ("time", "kind", "name", "position", "tokens")]


def _short(text: str) -> str:
    return text if len(text) <= TABLE_CHARS else text[: TABLE_CHARS - 1] + "…"


def table_frame(frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The table's cells, all text (nothing is rendered as HTML), under the labels of ``COLUMNS``."""
    texts = frame["text"].fillna("").astype(str)
    shown = pd.DataFrame(
        {
            "time": [f"{t:%H:%M:%S}.{t.microsecond // 1000:03d}" for t in frame["time"]],
            "kind": frame["kind"].astype(str),
            "name": frame["name"].astype(str),
            "position": frame["position"].astype(str),
            "tokens": frame["tokens"].astype(str),
            "note": [
                "error" + (f" · {note}" if note else "") if status == "error" else str(note)
                for note, status in zip(frame["note"], frame["status"], strict=True)
            ],
            "text": [_short(t) for t in texts],
        }
    )
    if settings.trace_url is not None:
        shown["trace"] = [
            settings.trace_link(t, s) or "" for t, s in zip(frame["trace_id"], frame["span_id"], strict=True)
        ]
    return shown.rename(columns=COLUMNS)


def draw(frame: pd.DataFrame, settings: Settings, key: str) -> None:
    """A run's model and tool calls in order: the picture, the table, and each call's text in full."""
    if frame.empty:
        st.caption("No calls in this run.")
        return
    st.altair_chart(run_chart.run_timeline(frame), width="stretch", key=f"{key}_chart")
    shown = table_frame(frame, settings)
    st.table(shown.style.hide(axis="index").map(lambda _: _WRAP).map(lambda _: _KEEP, subset=pd.Index(_UNBROKEN)))
    if len(frame) >= TIMELINE_ROWS:
        st.caption(f"The first {TIMELINE_ROWS} calls from a little before the loop.")
    texts = frame["text"].fillna("").astype(str)
    long = [i for i, text in enumerate(texts) if len(text) > TABLE_CHARS]
    if long:
        with st.expander(f"Arguments and outputs in full ({len(long)} shortened above)"):
            labels = {i: f"{shown.iloc[i, 0]} · {frame['kind'].iloc[i]} · {frame['name'].iloc[i]}" for i in long}
            picked = st.selectbox("Call", long, format_func=labels.__getitem__, key=f"{key}_full")
            st.code(texts.iloc[int(picked if picked is not None else long[0])], language=None, wrap_lines=True)
