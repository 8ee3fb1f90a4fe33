"""Did the reminders work: their outcomes by tier, tool, agent or model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import charts, figures
from otel_repeat_guard.dashboard.sections import address
from otel_repeat_guard.store.queries import REMINDER_WINDOW
from otel_repeat_guard.store.records import REPEAT

EFFICACY_BY = {"tier": "Tier", "tool": "Tool", "agent": "Agent", "model": "Model"}


def draw(outcomes: pd.DataFrame, reminders: int, kind: str | None) -> None:
    if kind not in (None, REPEAT):
        st.caption("Outcomes are measured for the reminders of runs of identical calls (the repeat kind) only.")
        return
    if outcomes.empty:
        st.caption("No reminders in this selection.")
        return
    if reminders > REMINDER_WINDOW:
        st.caption(
            f"The outcomes of the latest {REMINDER_WINDOW:,} of the {reminders:,} reminders in this "
            "selection (narrow the time range for all of them)."
        )
    address.restore_choice("by", {by: by for by in EFFICACY_BY}, "efficacy_by")
    by = st.radio(
        "Group by", list(EFFICACY_BY), format_func=EFFICACY_BY.__getitem__, horizontal=True, key="efficacy_by"
    )
    by = str(by or "tier")
    address.show_choice("by", None if by == "tier" else by)  # /reminders?by=agent opens grouped by agent
    table = figures.efficacy(outcomes, by)
    shown = figures.efficacy_with_overall(table, by)
    # One above the other, each the page's width: side by side at 1280 px the table cut its Heeded column
    # to "H" and the chart its legend.
    st.dataframe(
        shown.assign(heeded=shown["heeded"] * 100),
        key="efficacy",
        hide_index=True,
        width="stretch",
        height="content",
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
    st.altair_chart(charts.efficacy_bars(table, by), width="stretch")
