"""What needs attention: the overview's short list of where to look next, each with a link to its page."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import VIEWS, figures
from otel_repeat_guard.dashboard.sections.wording import Wording, loop_calls, plural


def items(
    by_tool: pd.DataFrame,
    by_agent: pd.DataFrame,
    outcomes: pd.DataFrame,
    unguarded: pd.DataFrame,
    excluded: pd.DataFrame,
    words: Wording,
) -> list[tuple[str, str]]:
    """(text, page file) of each thing worth a look, most telling first."""
    found: list[tuple[str, str]] = []
    if not by_tool.empty:
        top = by_tool.iloc[0]
        longest = f", longest run {int(top['longest_run'])}" if words.longest else ""
        found.append(
            (
                f"The loopiest tool: `{top['tool']}`, {loop_calls(int(top['repeated_calls']), words)}{longest}.",
                "runs.py",
            )
        )
    if not by_agent.empty:
        top = by_agent.iloc[0]
        found.append(
            (f"The loopiest agent: `{top['agent']}`, {loop_calls(int(top['repeated_calls']), words)}.", "hotspots.py")
        )
    broken, ignored, total = figures.heeded_rate(outcomes)
    if ignored:
        found.append(
            (
                f"{plural(ignored, 'reminder was', 'reminders were')} ignored (the same call again), "
                f"{broken:,} heeded, of {plural(total, 'reminder')}.",
                "reminders.py",
            )
        )
    if not unguarded.empty:
        calls = int(unguarded["calls"].sum())
        found.append(
            (f"{plural(calls, 'tool call')} could not be compared: loops among them cannot show.", "blind_spots.py")
        )
    if not excluded.empty:
        found.append((f"{plural(len(excluded), 'tool')} excluded from tracking in this selection.", "blind_spots.py"))
    return found


def draw(
    by_tool: pd.DataFrame,
    by_agent: pd.DataFrame,
    outcomes: pd.DataFrame,
    unguarded: pd.DataFrame,
    excluded: pd.DataFrame,
    words: Wording,
) -> None:
    st.subheader("What needs attention")
    found = items(by_tool, by_agent, outcomes, unguarded, excluded, words)
    if not found:
        st.caption(f"No {words.calls.lower()}, no ignored reminders and no blind spots in this selection.")
        return
    for text, page in found:
        left, right = st.columns([5, 1], vertical_alignment="center")
        left.markdown(text)
        right.page_link(str(VIEWS / page), label="Open", icon=":material/arrow_forward:")
