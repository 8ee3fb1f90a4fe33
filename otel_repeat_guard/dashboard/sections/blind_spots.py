"""What the page cannot show: tools the guard's configuration excludes, and calls it could not compare."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard.sections.wording import plural
from otel_repeat_guard.decide.blind_spots import explain


def draw_excluded(excluded: pd.DataFrame) -> None:
    if excluded.empty:
        return
    names = ", ".join(f"`{t}`" for t in excluded["tool"])
    one = len(excluded) == 1
    st.info(
        f"{names}: excluded from tracking by the guard's configuration (exclude patterns), so {'its' if one else 'their'} "
        f"calls are stored but never counted as repeats. Change OTEL_REPEAT_GUARD_EXCLUDE to track {'it' if one else 'them'}.",
        icon="ℹ️",
    )


def draw_unguarded(unguarded: pd.DataFrame) -> None:
    """Calls the guard could not compare: never a reassuring zero for what it could not see."""
    if unguarded.empty:
        return
    total = int(unguarded["calls"].sum())
    st.warning(
        f"{plural(total, 'tool call')} could not be compared, so loops among them cannot show here. "
        "Run `otel-repeat-guard doctor` on the collector's files (or `--store URL` on a ClickHouse table) "
        "for the setting that fixes each.",
        icon="⚠️",
    )
    frame = unguarded.assign(why=[explain(str(reason)) for reason in unguarded["reason"]])
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key="unguarded_calls",
        column_config={
            "reason": st.column_config.TextColumn("Reason"),
            "tool": st.column_config.TextColumn("Tool"),
            "calls": st.column_config.NumberColumn("Calls", format="localized"),
            "why": st.column_config.TextColumn("Why"),
        },
    )
