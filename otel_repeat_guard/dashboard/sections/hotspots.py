"""The loop hotspots by tool and by agent, and the model calls by model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import charts, figures
from otel_repeat_guard.dashboard.sections.wording import Wording


def _hotspot_table(frame: pd.DataFrame, label: str, key: str, models: bool, words: Wording) -> None:
    columns = [label, "repeated_calls", "reminders", "longest_run", "wasted_seconds", "repeated_share"]
    if models:
        columns += ["wasted_tokens", "wasted_token_share", "wasted_cost"]
    shown = frame[columns].assign(wasted_seconds=figures.one_rounding(frame["wasted_seconds"].tolist()))
    if models:
        shown = shown.assign(wasted_token_share=shown["wasted_token_share"] * 100)
    st.dataframe(
        shown.assign(repeated_share=shown["repeated_share"] * 100),
        key=key,
        hide_index=True,
        width="stretch",
        height="content",
        column_config={
            label: st.column_config.TextColumn(label.capitalize()),
            "repeated_calls": st.column_config.NumberColumn(words.calls, format="localized"),
            "reminders": st.column_config.NumberColumn("Reminders"),
            "longest_run": st.column_config.NumberColumn(words.longest or "Longest loop"),
            "wasted_seconds": st.column_config.NumberColumn(
                "Wasted (s)", format="%.1f", help="Rounded so that the rows add up to the Overview's time"
            ),
            "repeated_share": st.column_config.NumberColumn(
                "Share", format="%.0f%%", help=f"{words.calls} as a share of this {label}'s calls"
            ),
            "wasted_tokens": st.column_config.NumberColumn(
                "Wasted tokens", format="localized", help="Tokens of the model calls that issued its repeated calls"
            ),
            "wasted_token_share": st.column_config.NumberColumn(
                "Of tokens", format="%.1f%%", help="Wasted tokens as a share of all model tokens in the selection"
            ),
            "wasted_cost": st.column_config.TextColumn("Wasted cost"),
        },
    )


def draw_grouped(title: str, frame: pd.DataFrame, label: str, key: str, models: bool, words: Wording) -> None:
    """The hotspots by ``label`` (tool or agent): their table and bars."""
    st.subheader(title)
    if frame.empty:
        st.caption(f"No {words.calls.lower()} in this selection.")
        return
    _hotspot_table(frame, label, key, models, words)  # the whole width: every column readable at 1440 px
    chart = charts.hotspot_bars(frame, label, f"{words.calls} by {label}", words.calls.lower())
    st.altair_chart(chart, width="stretch")


def draw_models(by_model: pd.DataFrame) -> None:
    st.subheader("By model")
    if by_model.empty:
        st.caption("No model calls in this selection.")
        return
    shown = by_model[["model", "calls", "total_tokens", "wasted_tokens", "wasted_share", "cost_text", "wasted_cost"]]
    st.dataframe(
        shown.assign(wasted_share=shown["wasted_share"] * 100),
        key="by_model",
        hide_index=True,
        width="stretch",
        height="content",
        column_config={
            "model": st.column_config.TextColumn("Model"),
            "calls": st.column_config.NumberColumn("Model calls", format="localized"),
            "total_tokens": st.column_config.NumberColumn("Tokens", format="localized"),
            "wasted_tokens": st.column_config.NumberColumn("Wasted tokens", format="localized"),
            "wasted_share": st.column_config.NumberColumn("Wasted share", format="%.1f%%"),
            "cost_text": st.column_config.TextColumn("Cost"),
            "wasted_cost": st.column_config.TextColumn("Wasted cost"),
        },
    )
    unpriced = sorted({name for names in by_model["unpriced"] for name in str(names).split(", ") if name})
    if unpriced:  # the cost cells say "price unknown" or "+ unpriced"; which models, once, here
        st.caption(f"No price for {', '.join(unpriced)}: their tokens are counted, never priced at $0.")
