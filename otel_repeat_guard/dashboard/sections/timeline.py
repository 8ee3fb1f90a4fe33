"""An agent run's model and tool calls in order, as the runs and conversations pages show it: the picture,
then a table whose every column reads at 1280 px (its text wraps; arguments and outputs are shortened, in
full in the expander below it). Durations and statuses are the picture's (bar lengths, hover, colour).

The table is HTML the page builds itself, every cell escaped: Streamlit's ``st.table`` reads its cells as
Markdown (``__init__`` in bold, a backslash dropped, a URL made a link), and a call's text must read as
the agent sent it."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import run_chart
from otel_repeat_guard.dashboard.settings import Settings
from otel_repeat_guard.store.queries import TIMELINE_ROWS

TABLE_CHARS = 120
"""How much of a call's arguments or output the table shows (the expander shows all)."""
COLUMNS = {
    "time": "Started (UTC)",
    "kind": "Call",
    "name": "Tool or model",
    "position": "Run position",
    "tokens": "Tokens",
    "note": "What happened",
    "text": "Arguments or model output (text)",
    "trace": "Trace",
}
_UNBROKEN = frozenset(COLUMNS[c] for c in ("time", "kind", "name", "position", "tokens"))
"""Short values that read badly broken: they keep to one line; the others wrap anywhere."""
TABLE_CLASS = "repeat-guard-calls"
_STYLE = f"""<style>
.{TABLE_CLASS} {{ overflow-x: auto; }}
.{TABLE_CLASS} table {{ width: 100%; border-collapse: collapse; font-size: 0.875rem; line-height: 1.45; }}
.{TABLE_CLASS} th, .{TABLE_CLASS} td {{
  border: 1px solid rgba(49, 51, 63, 0.1); padding: 0.25rem 0.375rem; text-align: left; vertical-align: top;
}}
.{TABLE_CLASS} th {{ color: rgba(49, 51, 63, 0.6); font-weight: 400; }}
.{TABLE_CLASS} td {{ white-space: pre-wrap; overflow-wrap: anywhere; }}
.{TABLE_CLASS} td.keep, .{TABLE_CLASS} th.keep {{ white-space: nowrap; overflow-wrap: normal; }}
</style>"""


def _short(text: str) -> str:
    return text if len(text) <= TABLE_CHARS else text[: TABLE_CHARS - 1] + "…"


def table_frame(frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The table's cells, all text (nothing is rendered as HTML), under the labels of ``COLUMNS``."""
    texts = frame["text"].fillna("").astype(str)
    shown = pd.DataFrame(
        {
            "time": [f"{t:%H:%M:%S}.{t.microsecond // 1000:03d}" for t in frame["time"]],
            "kind": frame["kind"].astype(str),
            "name": frame["name"].astype(str),
            "position": frame["position"].astype(str),
            "tokens": frame["tokens"].astype(str),
            "note": [
                "error" + (f" · {note}" if note else "") if status == "error" else str(note)
                for note, status in zip(frame["note"], frame["status"], strict=True)
            ],
            "text": [_short(t) for t in texts],
        }
    )
    if settings.trace_url is not None:
        shown["trace"] = [
            settings.trace_link(t, s) or "" for t, s in zip(frame["trace_id"], frame["span_id"], strict=True)
        ]
    return shown.rename(columns=COLUMNS)


def table_html(shown: pd.DataFrame) -> str:
    """``shown`` (:func:`table_frame`) as an HTML table whose every cell is its text, escaped; a trace
    cell (an http or https address) is also a link to it."""
    trace = COLUMNS["trace"]

    def keep(column: str) -> str:
        return ' class="keep"' if column in _UNBROKEN else ""

    def cell(column: str, value: object) -> str:
        text = html.escape(str(value), quote=True)
        if column == trace and str(value).startswith(("http://", "https://")):
            return f'<td><a href="{text}" target="_blank" rel="noopener noreferrer">{text}</a></td>'
        return f"<td{keep(column)}>{text}</td>"

    head = "".join(f"<th{keep(c)}>{html.escape(str(c))}</th>" for c in shown.columns)
    rows = "".join(
        "<tr>" + "".join(cell(c, v) for c, v in zip(shown.columns, row, strict=True)) + "</tr>"
        for row in shown.itertuples(index=False)
    )
    return (
        f'{_STYLE}<div class="{TABLE_CLASS}"><table aria-label="The run, call by call">'
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def draw(frame: pd.DataFrame, settings: Settings, key: str) -> None:
    """A run's model and tool calls in order: the picture, the table, and each call's text in full."""
    if frame.empty:
        st.caption("No calls in this run.")
        return
    st.altair_chart(run_chart.run_timeline(frame), width="stretch", key=f"{key}_chart")
    shown = table_frame(frame, settings)
    st.html(table_html(shown))
    if len(frame) >= TIMELINE_ROWS:
        st.caption(f"The first {TIMELINE_ROWS} calls from a little before the loop.")
    texts = frame["text"].fillna("").astype(str)
    stored = (frame["stored"] if "stored" in frame.columns else frame["text"]).fillna("").astype(str)
    long = [i for i, text in enumerate(texts) if len(text) > TABLE_CHARS or text != stored.iloc[i]]
    if long:
        with st.expander(f"Arguments and outputs in full ({len(long)} shortened or read from JSON above)"):
            labels = {i: f"{shown.iloc[i, 0]} · {frame['kind'].iloc[i]} · {frame['name'].iloc[i]}" for i in long}
            picked = st.selectbox("Call", long, format_func=labels.__getitem__, key=f"{key}_full")
            at = int(picked if picked is not None else long[0])
            st.code(texts.iloc[at], language=None, wrap_lines=True)
            if stored.iloc[at] != texts.iloc[at]:
                st.caption("As the store keeps it:")
                st.code(stored.iloc[at], language=None, wrap_lines=True)
