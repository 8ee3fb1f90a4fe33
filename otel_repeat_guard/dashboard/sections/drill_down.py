"""The drill-down: a hotspot tool's loops, and the chosen loop's agent run call by call, with its cycles.

What to read depends on the boxes chosen here, so this section reads the store itself (through ``reads``).
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from otel_repeat_guard.dashboard import reads
from otel_repeat_guard.dashboard.sections import address, timeline
from otel_repeat_guard.dashboard.settings import Settings
from otel_repeat_guard.dashboard.source import lists_loops
from otel_repeat_guard.store.queries import Filters
from otel_repeat_guard.store.records import CYCLE, REPEAT


def _loop_label(loop: pd.Series) -> str:
    """A loop as the drill-down's box names it: the agent, what kind of loop and how long, when it ended."""
    ended = f"ended {loop['ended']:%Y-%m-%d %H:%M:%S} UTC"
    kind, length = str(loop["kind"]), loop["run_length"]
    if kind == REPEAT:
        what = f"run of {int(length)} identical calls"
    elif kind == CYCLE:
        what = f"cycle of {int(loop['period'])} calls × {int(loop['repetitions'])} copies"
    elif kind == "no_progress":
        what = f"{int(length)} calls without progress (same outcome)"
    else:
        what = "parallel duplicate"
    return f"{loop['agent']} · {what} · {ended}"


def _hotspot_loops(db: str, filters: Filters, tool: str, kinds: tuple[str, ...]) -> pd.DataFrame:
    """The tool's loops the drill-down offers: runs of identical calls (unless another kind is chosen), and
    the loops of the chosen kind, or of every other kind the store holds."""
    other = tuple(k for k in kinds if k != REPEAT) if filters.kind is None else (filters.kind,)
    frames = []
    if filters.kind in (None, REPEAT):
        frames.append(reads.hotspot_runs(db, filters, tool).assign(kind=REPEAT))
    if other != (REPEAT,) and other:
        frames.append(reads.hotspot_loops(db, filters, tool, other))
    frames = [frame for frame in frames if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def draw(db: str, filters: Filters, tools: list[str], settings: Settings, kinds: tuple[str, ...]) -> None:
    if not tools:
        st.caption("No hotspots to drill into.")
        return
    address.restore_choice("hotspot", {t: t for t in tools}, "drill_tool")
    tool = str(st.selectbox("Hotspot tool", tools, key="drill_tool"))
    address.show_choice("hotspot", tool)
    loops = _hotspot_loops(db, filters, tool, kinds)
    unlisted = [] if lists_loops(db) else [k.replace("_", " ") for k in kinds if k != REPEAT]
    if unlisted and filters.kind != REPEAT:  # counted in the figures above; never a silent "no loops"
        st.caption(
            f"This store's drill-down lists runs of identical calls only: {', '.join(unlisted)} loops are counted "
            "in the figures above but not listed here."
        )
    if loops.empty:
        st.caption("No loops for this tool in this selection.")
        return
    labels = {(str(loop["kind"]), int(loop["end_id"])): _loop_label(loop) for _, loop in loops.iterrows()}
    # Keyed by tool: the box shows this tool's loops, never the one picked for the previous tool.
    title = "Run of identical calls" if set(loops["kind"]) == {REPEAT} else "Loop"
    run_key = f"drill_run:{tool}"
    address.restore_choice("loop", {f"{k}:{i}": (k, i) for k, i in labels}, run_key)
    choice = st.selectbox(title, list(labels), format_func=labels.__getitem__, key=run_key)
    kind, end_id = choice if choice is not None else next(iter(labels))
    address.show_choice("loop", f"{kind}:{end_id}")  # a link opens this loop
    picked = loops.loc[(loops["kind"] == kind) & (loops["end_id"] == end_id)].iloc[0]
    agent_key = str(picked["agent_key"])
    length = 1 if pd.isna(picked["run_length"]) else int(picked["run_length"])
    focus = reads.loop_start_ns(db, agent_key, end_id, length)
    calls = reads.run_timeline(db, agent_key, focus_ns=focus)
    if kind == REPEAT:
        repeats = ~calls["position"].isin(["", "1", "excluded"])
        in_loop = (calls["kind"] == "tool") & (calls["name"] == tool) & repeats
        repeated = calls.loc[in_loop, "text"].dropna()
        st.caption("Arguments of the repeated call (shown as text):")
        st.code(
            str(repeated.iloc[-1]) if not repeated.empty else "(arguments not stored)", language=None, wrap_lines=True
        )
    timeline.draw(calls, settings, "timeline")
    if CYCLE in kinds:
        _cycle_section(db, agent_key, end_id if kind == CYCLE else None)


def _cycle_label(cycle: pd.Series) -> str:
    tools = json.loads(cycle["cycle_tools"]) if isinstance(cycle["cycle_tools"], str) else []
    steps = " → ".join(str(t) for t in tools) if tools else f"{int(cycle['period'])} calls"
    return f"{steps}, {int(cycle['repetitions'])} copies, completed {cycle['ended']:%H:%M:%S} UTC"


def _cycle_section(db: str, agent_key: str, picked: int | None) -> None:
    """The calls of a cycle in this agent run, copy by copy; none when the agent run has no cycle."""
    cycles = reads.agent_cycles(db, agent_key)
    if cycles.empty:
        return
    st.markdown("**The cycle in this agent run, call by call**")
    ids = [int(i) for i in cycles["end_id"]]
    end_id = ids[-1] if picked not in ids else picked
    if len(ids) > 1:
        labels = {int(c["end_id"]): _cycle_label(c) for _, c in cycles.iterrows()}
        chosen = st.selectbox(
            "Cycle in this agent run",
            ids,
            index=ids.index(end_id),
            format_func=labels.__getitem__,
            key=f"cycle:{agent_key}:{picked}",
        )
        end_id = int(chosen) if chosen is not None else end_id
    cycle = cycles.loc[cycles["end_id"] == end_id].iloc[0]
    period, repetitions = int(cycle["period"]), int(cycle["repetitions"])
    calls = reads.cycle_calls(db, agent_key, end_id, period, repetitions)
    st.caption(
        f"{_cycle_label(cycle)}: the agent run's last {period * repetitions} tracked calls up to the call that "
        "completed the last copy (excluded tools and parallel duplicates are not part of a cycle)."
    )
    st.dataframe(
        calls.assign(arguments=calls["arguments"].fillna("(arguments not stored)"))[
            ["copy", "step", "tool", "arguments", "status", "time"]
        ],
        key="cycle_calls",
        hide_index=True,
        width="stretch",
        column_config={
            "copy": st.column_config.NumberColumn("Copy", help="Which repetition of the cycle the call belongs to"),
            "step": st.column_config.NumberColumn("Step", help="The call's place in its copy"),
            "tool": st.column_config.TextColumn("Tool"),
            "arguments": st.column_config.TextColumn("Arguments (text)"),  # sized to its text, as every column
            "status": st.column_config.TextColumn("Status"),
            "time": st.column_config.DatetimeColumn("Started (UTC)", format="HH:mm:ss.SSS"),
        },
    )
