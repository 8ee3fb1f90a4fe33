"""Blind spots: the tools the guard is told to skip, the calls it could not compare, and the reminders that did not
reach the model."""

from __future__ import annotations

import streamlit as st

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import blind_spots
from otel_repeat_guard.dashboard.view import View, run_page


def draw(view: View) -> None:
    options = reads.filter_options(view.store)
    tools = view.filters.tools or tuple(str(t) for t in options.loc[options["kind"] == "tool", "value"])
    unguarded, excluded = reads.unguarded_calls(view.store, view.filters), reads.excluded_tools(view.store, tools)
    undelivered = reads.undelivered_reminders(view.store, view.filters)
    if unguarded.empty and excluded.empty:
        st.success("The guard compared every tool call in this selection, and no tool is excluded.")
    blind_spots.draw_excluded(excluded)
    blind_spots.draw_unguarded(unguarded)
    blind_spots.draw_undelivered(undelivered)


if __name__ == "__main__":
    run_page("Blind spots", "What the figures cannot show: loops among these calls are invisible.", draw)
