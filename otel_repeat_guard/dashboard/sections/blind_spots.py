"""What the page cannot show: tools the guard's configuration excludes, calls it could not compare, and reminders
that never reached the model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard.sections.wording import plain, plural
from otel_repeat_guard.decide import delivery
from otel_repeat_guard.decide.blind_spots import NO_AGENT, NO_ARGUMENTS, NO_GUARD, NO_RESULT, explain, fix_for


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


REASON_TITLES = {
    NO_ARGUMENTS: "No arguments recorded",
    NO_AGENT: "No agent run",
    NO_GUARD: "No guard where the spans were made",
    NO_RESULT: "No result recorded",
}
"""Each reason the store records (``tool_calls.unguarded_reason``), as the page names it."""


def draw_unguarded(unguarded: pd.DataFrame) -> None:
    """Calls the guard could not compare (never a reassuring zero for what it could not see): each reason in
    words, what fixes it, and its calls by tool."""
    if unguarded.empty:
        return
    alone = int(unguarded.loc[unguarded["reason"] == NO_RESULT, "calls"].sum())  # compared, by arguments alone
    total = int(unguarded["calls"].sum()) - alone
    if total:
        st.warning(
            f"{plural(total, 'tool call')} could not be compared, so loops among them cannot show here.", icon="⚠️"
        )
    if alone:
        st.warning(
            f"{plural(alone, 'tool call')} recorded no result, so progress: results compared "
            f"{'it' if alone == 1 else 'them'} by tool and arguments alone: a poll that moved counts as a repeat.",
            icon="⚠️",
        )
    by_reason = unguarded.groupby("reason", sort=False)["calls"].sum().sort_values(ascending=False, kind="stable")
    for reason, calls in by_reason.items():
        code = str(reason)
        title = REASON_TITLES.get(code, code.replace("_", " ").capitalize())
        heading = f"{plural(int(calls), 'call')}: {plain(explain(code))}"
        _reason(title, heading, fix_for(code, None))
        st.dataframe(
            unguarded.loc[unguarded["reason"] == reason, ["tool", "calls"]],
            hide_index=True,
            width="content",
            key=f"unguarded_calls:{code}",
            column_config={
                "tool": st.column_config.TextColumn("Tool"),
                "calls": st.column_config.NumberColumn("Calls", format="localized"),
            },
        )


def _reason(title: str, heading: str, fix: str) -> None:
    """One reason's words, before its table: its title, how many and what happened, then what fixes it."""
    st.markdown(f"**{plain(title)}** · {heading}.")
    st.markdown(f"**Fix:** {plain(fix)}.")


UNDELIVERED_TITLES = {
    delivery.NO_ADAPTER: "No adapter asked",
    delivery.NO_RUN: "The adapter found no agent run",
    delivery.NOT_ADDED: "The adapter could not add it",
    delivery.RUN_ENDED: "The run ended first",
}
"""Each reason a reminder did not reach the model (``undelivered_reminders.reason``), as the page names it."""


def draw_undelivered(undelivered: pd.DataFrame) -> None:
    """Reminders the guard handed on that no adapter took before the run's next model call ended: the reminder
    figures elsewhere count them, but the model never read them. Each reason in words, what fixes it, by tool."""
    if undelivered.empty:
        return
    total = int(undelivered["reminders"].sum())
    st.warning(
        f"{plural(total, 'reminder')} never reached the model: the guard handed {'it' if total == 1 else 'them'} "
        "on, but no adapter added them to the run's next model request.",
        icon="⚠️",
    )
    by_reason = undelivered.groupby("reason", sort=False)["reminders"].sum().sort_values(ascending=False, kind="stable")
    for reason, reminders in by_reason.items():
        code = str(reason)
        title = UNDELIVERED_TITLES.get(code, code.replace("_", " ").capitalize())
        heading = f"{plural(int(reminders), 'reminder')}: {plain(delivery.explain(code))}"
        _reason(title, heading, delivery.fix_for(code, ""))
        rows = undelivered.loc[undelivered["reason"] == reason, ["tool", "tier", "reminders"]]
        st.dataframe(
            rows,
            hide_index=True,
            width="content",
            key=f"undelivered_reminders:{code}",
            column_config={
                "tool": st.column_config.TextColumn("Tool"),
                "tier": st.column_config.TextColumn("Tier"),
                "reminders": st.column_config.NumberColumn("Reminders", format="localized"),
            },
        )
