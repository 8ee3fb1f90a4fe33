"""Conversations and sessions: their agent runs, and a chosen run's timeline.

The runs to list depend on the conversation chosen here, so this section reads them itself (through ``reads``).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import timeline
from otel_repeat_guard.dashboard.sections.wording import Wording, plural
from otel_repeat_guard.dashboard.settings import Settings
from otel_repeat_guard.store.queries import Filters


def draw(db: str, listed: pd.DataFrame, filters: Filters, settings: Settings, words: Wording) -> None:
    """``listed``: the conversations of the selection (``queries.conversations``)."""
    if listed.empty:
        st.caption(
            "No model call in this selection names a conversation (`gen_ai.conversation.id`) or a session (`session.id`)."
        )
        return
    st.dataframe(
        listed[["conversation", "runs", "model_calls", "tokens", "repeated_calls", "reminders", "last"]],
        key="conversations",
        hide_index=True,
        width="stretch",
        height="content",
        column_config={
            "conversation": st.column_config.TextColumn("Conversation or session"),
            "runs": st.column_config.NumberColumn("Agent runs"),
            "model_calls": st.column_config.NumberColumn("Model calls", format="localized"),
            "tokens": st.column_config.NumberColumn("Tokens", format="localized"),
            "repeated_calls": st.column_config.NumberColumn("Repeated calls", format="localized"),
            "reminders": st.column_config.NumberColumn("Reminders"),
            "last": st.column_config.DatetimeColumn("Last call (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    conversation = str(st.selectbox("Conversation", list(listed["conversation"]), key="conversation"))
    runs = reads.conversation_runs(db, conversation, filters)
    if runs.empty:
        return
    labels = {
        str(
            r.agent_key
        ): f"{r.agent} · {plural(int(r.model_calls), 'model call')} · {plural(int(r.repeated_calls), 'repeated call')}"
        for r in runs.itertuples(index=False)
    }
    choice = st.selectbox(
        "Run in this conversation", list(labels), format_func=labels.__getitem__, key=f"conversation_run:{conversation}"
    )
    calls = reads.run_timeline(db, str(choice or next(iter(labels))), focus_ns=None)
    timeline.draw(calls, settings, "conversation_timeline")
