"""The Loop kind filter and the cycle drill-down, under ``AppTest``, on a store of real guard spans with
every kind of detection (tests/store/loop_agent.py): exact figures per kind, and a cycle's calls in order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from test_app import goto, metrics, run_app, table

from otel_repeat_guard.store import open_for_reading, queries
from tests.store.loop_agent import LoopAgent, cycler, every_kind, repeat_in_cycle


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture(scope="module")
def loops_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cycler (read/edit x 3), searcher (4 greps, same outcome), parallel (a duplicate), mixer (ls cat cat x 3):
    21 tracked calls."""
    db = tmp_path_factory.mktemp("loops") / "loops.db"
    every_kind(db)
    return db


# kind -> (calls label, calls, longest label, longest, gentle, detailed, agents, tools in the hotspot table)
EXPECTED = {
    "repeat": ("Repeated calls", "3", "Longest run", "2", "3", "0", "1", ["cat"]),
    "cycle": ("Calls completing a cycle", "4", "Longest cycle (calls)", "9", "2", "2", "2", ["cat", "edit_file"]),
    "no_progress": ("Calls without progress", "3", "Longest no-progress run", "4", "1", "0", "1", ["grep"]),
    "parallel_duplicate": ("Parallel duplicates", "1", "Longest loop", "—", "0", "0", "1", ["web_search"]),
}


def test_all_kinds_count_each_call_in_a_loop_once(monkeypatch: pytest.MonkeyPatch, loops_db: Path) -> None:
    app = run_app(monkeypatch, loops_db)
    box = app.selectbox(key="loop_kind")
    assert box.value is None
    assert box.options == [
        "All kinds",
        "Repeat (identical calls in a row)",
        "Cycle",
        "No progress",
        "Parallel duplicate",
    ]
    shown = metrics(app)
    # 3 cat repeats (two of them also complete a cycle: counted once), 2 edit_file cycle calls, 3 greps, 1 duplicate
    assert shown["Calls in loops"] == "9"
    assert shown["Tool calls"] == "21"
    assert shown["Wasted-call share"] == f"{9 / 21:.1%}"
    assert (shown["Gentle reminders"], shown["Detailed reminders"]) == ("6", "2")  # 3 repeat + 2 cycle + 1 no progress
    assert (shown["Agents with loops"], shown["Longest run of identical calls"]) == ("4", "2")
    tools = table(goto(app, "hotspots"), "tool").set_index("tool")
    assert tools["repeated_calls"].to_dict() == {"cat": 3, "grep": 3, "edit_file": 2, "web_search": 1}
    assert tools["reminders"].to_dict() == {"cat": 5, "grep": 1, "edit_file": 2, "web_search": 0}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_kind_narrows_the_loop_figures_to_its_calls(
    monkeypatch: pytest.MonkeyPatch, loops_db: Path, kind: str
) -> None:
    calls_label, calls, longest_label, longest, gentle, detailed, agents, tools = EXPECTED[kind]
    app = run_app(monkeypatch, loops_db)
    app.selectbox(key="loop_kind").set_value(kind).run()
    assert not app.exception
    shown = metrics(app)
    assert shown["Tool calls"] == "21"  # the calls stay: only the loop figures narrow
    assert shown[calls_label] == calls
    assert shown["Wasted-call share"] == f"{int(calls) / 21:.1%}"
    assert shown[longest_label] == longest
    assert (shown["Gentle reminders"], shown["Detailed reminders"], shown["Agents with loops"]) == (
        gentle,
        detailed,
        agents,
    )
    assert sorted(table(goto(app, "hotspots"), "tool")["tool"]) == tools
    over_time = queries.over_time(open_for_reading(loops_db)[0], queries.Filters(kind=kind), 3600)
    assert int(over_time.loc[over_time["series"] == "repeated calls", "count"].sum()) == int(calls)


def test_the_cycle_drill_down_shows_the_cycles_calls_copy_by_copy(
    monkeypatch: pytest.MonkeyPatch, loops_db: Path
) -> None:
    app = run_app(monkeypatch, loops_db, page="runs")
    app.selectbox(key="loop_kind").set_value("cycle").run()
    app.selectbox(key="drill_tool").set_value("edit_file").run()
    box = app.selectbox(key="drill_run:edit_file")
    assert box.label == "Loop"
    assert len(box.options) == 1 and "cycler · cycle of 2 calls × 3 copies · ended" in box.options[0]
    cycle = table(app, "copy")
    assert cycle[["copy", "step", "tool", "arguments", "status"]].values.tolist() == [
        [1, 1, "read_file", '{"path":"app.py"}', "ok"],
        [1, 2, "edit_file", '{"patch":"<b>fix</b>","path":"app.py"}', "ok"],  # text, never HTML
        [2, 1, "read_file", '{"path":"app.py"}', "ok"],
        [2, 2, "edit_file", '{"patch":"<b>fix</b>","path":"app.py"}', "ok"],
        [3, 1, "read_file", '{"path":"app.py"}', "ok"],
        [3, 2, "edit_file", '{"patch":"<b>fix</b>","path":"app.py"}', "ok"],
    ]
    assert any("read_file → edit_file, 3 copies" in c.value for c in app.caption)


def test_a_run_of_identical_calls_inside_a_cycle_shows_the_cycle_too(
    monkeypatch: pytest.MonkeyPatch, loops_db: Path
) -> None:
    app = run_app(
        monkeypatch, loops_db, page="runs"
    )  # all kinds: cat's runs of identical calls and its cycle are listed
    app.selectbox(key="drill_tool").set_value("cat").run()
    box = app.selectbox(key="drill_run:cat")
    assert sorted(label.split(" · ")[1] for label in box.options) == [
        "cycle of 3 calls × 3 copies",
        "run of 2 identical calls",
        "run of 2 identical calls",
        "run of 2 identical calls",
    ]
    cycle = table(app, "copy")
    assert list(cycle["tool"]) == ["ls", "cat", "cat"] * 3
    assert list(cycle["copy"]) == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert list(cycle["step"]) == [1, 2, 3] * 3


def test_two_cycles_in_one_agent_run_are_offered_one_at_a_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    agent = LoopAgent(db)
    run = agent.run("twice")
    for tool, arguments in (("read", {"f": 1}), ("edit", {"f": 1})) * 2 + (("test", {}),) + (("a", {}), ("b", {})) * 2:
        agent.call(run, tool, arguments)
    run.end()
    agent.close()
    app = run_app(monkeypatch, db, page="runs")
    app.selectbox(key="loop_kind").set_value("cycle").run()
    app.selectbox(key="drill_tool").set_value("edit").run()
    assert list(table(app, "copy")["tool"]) == ["read", "edit", "read", "edit"]
    (cycles,) = [box for box in app.selectbox if box.label == "Cycle in this agent run"]
    assert len(cycles.options) == 2
    assert cycles.value == 4  # the call completing the picked cycle's last copy, the 4th
    cycles.set_value(9).run()  # the other cycle: a b a b, completed by the 9th call
    assert list(table(app, "copy")["tool"]) == ["a", "b", "a", "b"]


def test_a_store_with_repeats_only_has_no_kind_filter_and_reads_as_before(
    monkeypatch: pytest.MonkeyPatch, seeded_db: Path
) -> None:
    app = run_app(monkeypatch, seeded_db)
    assert [box for box in app.selectbox if box.key == "loop_kind"] == []
    assert "Repeated calls" in metrics(app) and "Calls in loops" not in metrics(app)
    goto(app, "runs")
    assert app.selectbox(key=f"drill_run:{app.selectbox(key='drill_tool').value}").label == "Run of identical calls"


def test_the_drill_down_of_a_repeat_run_in_an_agent_run_with_a_cycle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "mixed.db"
    agent = LoopAgent(db)
    repeat_in_cycle(agent)
    cycler(agent)
    agent.close()
    app = run_app(monkeypatch, db, page="runs")
    app.selectbox(key="loop_kind").set_value("repeat").run()
    app.selectbox(key="drill_tool").set_value("cat").run()
    assert app.code[0].value == '{"f":"x"}'  # the repeated call's arguments, as before
    assert len(table(app, "copy")) == 9  # and the cycle of its agent run
