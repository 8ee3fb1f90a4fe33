"""The headline figures at the top of the page, and the loops over time with the run-length distribution."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from otel_repeat_guard.dashboard import charts, figures
from otel_repeat_guard.dashboard.sections.headline import Figure, headline_html
from otel_repeat_guard.dashboard.sections.wording import WORDING, Wording, plural
from otel_repeat_guard.store.queries import TIERS, Filters
from otel_repeat_guard.store.records import REPEAT

TIME_HELP = (
    "The summed duration of the {calls}. Agents run concurrently, so this adds up the time of "
    "every agent and can exceed the wall-clock time of the workload."
)


def _seconds(value: float) -> str:
    return f"{value:,.1f} s" if value < 120 else f"{value / 60:,.1f} min"


def _reminder_metric(filters: Filters, tier: str, value: int) -> str:
    return f"{value:,}" if tier in (filters.tiers or TIERS) else "filtered"


def draw_headline(
    headline: pd.DataFrame,
    tokens: figures.TokenHeadline,
    outcomes: pd.DataFrame,
    filters: Filters,
    models: bool,
    words: Wording,
) -> None:
    row = headline.iloc[0]
    tracked, untracked = int(row["tool_calls"]), int(row["untracked_calls"])
    shown = [
        Figure(
            "Tool calls",
            f"{tracked:,}",
            f"Tracked calls. {plural(untracked, 'call')} of excluded tools (e.g. todo_write) "
            f"{'is' if untracked == 1 else 'are'} not counted.",
        ),
        Figure(words.calls, f"{int(row['repeated_calls']):,}", words.calls_help),
        Figure("Wasted-call share", f"{row['wasted_share']:.1%}", f"{words.calls} ÷ tracked calls."),
        Figure(words.time, _seconds(float(row["repeated_seconds"])), TIME_HELP.format(calls=words.calls.lower())),
        Figure("Gentle reminders", _reminder_metric(filters, "gentle", int(row["gentle_reminders"]))),
        Figure("Detailed reminders", _reminder_metric(filters, "detailed", int(row["detailed_reminders"]))),
        Figure("Agents with loops", f"{int(row['agents_with_loops']):,}"),
        Figure("Longest loop", "—", "A parallel duplicate has no length.")
        if words.longest is None
        else Figure(words.longest, f"{int(row['longest_run']):,}"),
    ]
    broken, ignored, reminders = figures.heeded_rate(outcomes)
    shown.append(
        Figure(
            "Reminders heeded",
            f"{broken / (broken + ignored):.0%}" if broken + ignored else "—",
            f"Of {plural(reminders, 'reminder')}, {broken:,} were followed by a different call (broken) and "
            f"{ignored:,} by the same call again (ignored); the rest ended with their run or wait for the next call.",
        )
    )
    if models:
        shown += [
            Figure("Model tokens", f"{tokens.tokens:,}", "Input and output tokens of every model call."),
            Figure(
                "Wasted tokens",
                f"{tokens.wasted_tokens:,}",
                "Tokens of the model calls that issued a repeated call (run position 2 or more) or a call in a "
                "detected cycle or no-progress run.",
            ),
            Figure(
                "Wasted cost",
                tokens.wasted_money,
                "Priced with genai-prices. "
                + (
                    f"No price for: {tokens.unpriced_models}." if tokens.unpriced_models else "Every model has a price."
                ),
            ),
        ]
    st.html(headline_html(shown))
    notes = [
        f"{plural(tracked, 'tracked tool call')}; {plural(untracked, 'call')} of excluded tools "
        f"{'is' if untracked == 1 else 'are'} stored but not counted.",
        f"{words.time} is summed over concurrent agents.",
    ]
    if models:
        notes.append(
            f"Wasted tokens are {tokens.wasted_share:.1%} of {tokens.tokens:,} model tokens (cost of all: {tokens.money})."
        )
        if tokens.unpriced_models:
            notes.append(f"Price unknown for: {tokens.unpriced_models}.")
    else:
        notes.append("No model calls in this selection, so no tokens or cost: the store keeps model-call spans too.")
    st.caption(" ".join(notes))


OVER_TIME_KEY = "over_time_open"
"""The session's key of the Overview's fold "Over time": whether its chart is open."""


def _fold(label: str, key: str) -> tuple[DeltaGenerator, bool]:
    """A folded section whose content is drawn only once opened (Streamlit's lazy expander), and whether it is
    open. On a Streamlit without it the content is drawn at once, open."""
    if "on_change" not in inspect.signature(st.expander).parameters:  # pragma: no cover - older Streamlit
        return st.expander(label, expanded=True), True
    fold = st.expander(label, key=key, on_change="rerun")
    return fold, bool(fold.open)


def draw_over_time(read: Callable[[], pd.DataFrame], bucket_s: float, words: Wording) -> None:
    """The loops over time per ``bucket_s``, folded: below the fold of a fresh page, the chart is read (``read``
    gives its frame) and drawn once opened. A chart costs the browser a megabyte of Vega, the largest part of
    a fresh Overview's load."""
    st.subheader("Over time")
    measure = words.calls.lower()
    fold, is_open = _fold(f"{words.calls} and reminders per {charts.bucket_text(bucket_s)}", OVER_TIME_KEY)
    if not is_open:
        return
    over_time = read()
    with fold:
        if over_time.empty:
            st.caption(f"No {measure} in this selection.")
        else:
            frame = over_time.replace({"series": {charts.SERIES[0]: measure}})
            st.vega_lite_chart(frame, charts.over_time(bucket_s, measure), width="stretch")


def draw_run_lengths(lengths: pd.DataFrame, words: Wording) -> None:
    st.subheader("Run-length distribution")
    if words is not WORDING[REPEAT]:
        st.caption("Runs of identical calls, whatever the loop kind.")
    loops = lengths[lengths["run_length"] >= 2]
    single = int(lengths.loc[lengths["run_length"] == 1, "runs"].sum())
    if loops.empty:
        st.caption("No runs of two or more identical calls in this selection.")
    else:
        st.altair_chart(charts.run_length_histogram(loops), width="stretch")
    st.caption(f"{plural(single, 'call was', 'calls were')} not repeated (runs of one).")
