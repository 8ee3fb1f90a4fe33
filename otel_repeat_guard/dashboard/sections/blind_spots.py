"""What the page cannot show: tools the guard's configuration excludes, and calls it could not compare."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard.sections.wording import plural
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
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$])")


def _plain(text: str) -> str:
    """``text`` for ``st.markdown`` as typed: every character Markdown (or Streamlit's directives) would read escaped."""
    return _MARKDOWN.sub(r"\\\1", text)


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
        st.markdown(f"**{_plain(title)}** · {plural(int(calls), 'call')}: {_plain(explain(code))}.")
        st.markdown(f"**Fix:** {_plain(fix_for(code, None))}.")
        tools = unguarded.loc[unguarded["reason"] == reason, ["tool", "calls"]]
        st.dataframe(
            tools,
            hide_index=True,
            width="content",
            key=f"unguarded_calls:{code}",
            column_config={
                "tool": st.column_config.TextColumn("Tool"),
                "calls": st.column_config.NumberColumn("Calls", format="localized"),
            },
        )
