"""An agent run's model and tool calls in order, as the drill-down and the conversations show it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard.queries import TIMELINE_ROWS
from otel_repeat_guard.dashboard.settings import Settings


def draw(frame: pd.DataFrame, settings: Settings, key: str) -> None:
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
    if len(frame) >= TIMELINE_ROWS:
        st.caption(f"The first {TIMELINE_ROWS} calls from a little before the loop.")
