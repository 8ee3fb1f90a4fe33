"""benchmarks/real_trajectories.py on small files of each harness's format, written here: what it reads and counts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from benchmarks.real_trajectories import main, measure, render
from benchmarks.trajectories import load

SED = "sed -i 's/a/a/' f.py"


def _gz(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(data, handle)


def _tool_message(name: str, arguments: dict[str, Any], number: int) -> dict[str, Any]:
    call = {"id": f"c{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call], "extra": {"response": {"model": "m2"}}}


def write_data(root: Path) -> Path:
    """One file per format: a mini-swe-agent 1.x run of the same sed 4 times (and one message with two
    blocks, not executed), a 2.x run, a SWE-agent run and two tau-bench runs, one retrying through ``think``."""
    v1 = [{"role": "system", "content": "s"}]
    for _ in range(4):
        v1 += [{"role": "assistant", "content": f"THOUGHT\n```bash\n{SED}\n```"}, {"role": "user", "content": "ok"}]
    v1.append({"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"})
    v2 = [_tool_message("bash", {"command": "pytest"}, n) for n in range(3)]
    v2.insert(1, _tool_message("bash", {"command": "ls"}, 9))
    retry = []
    for n in range(3):
        retry += [_tool_message("book", {"id": 1}, n), _tool_message("think", {"thought": "again"}, 10 + n)]
    tau = [
        {"task_id": 0, "trial": 0, "traj": retry},
        {"task_id": 1, "trial": 0, "traj": [{"role": "assistant", "content": "hello"}]},
    ]
    swe = {"trajectory": [{"action": "open f.py"}, {"action": "edit 1:1\nx\nend_of_edit"}]}
    files = [
        ("mini-v1", "v1/a.traj.json.gz", {"messages": v1}),
        ("mini-v2", "v2/b.traj.json.gz", {"messages": [{"role": "system", "content": "s"}, *v2]}),
        ("swe-agent", "swe/c.traj.gz", swe),
        ("tau", "tau/d.json.gz", tau),
    ]
    entries = []
    for fmt, name, data in files:
        _gz(root / name, data)
        entry = {"source": name.split("/")[0], "agent": f"agent-{fmt}", "model": "m1, m2", "format": fmt, "file": name}
        if fmt != "tau":
            entry["id"] = name.split(".")[0]
        entries.append(entry)
    (root / "manifest.json").write_text(json.dumps({"trajectory_files": entries}), encoding="utf-8")
    return root


def test_each_format_yields_the_calls_its_harness_executed(tmp_path: Path) -> None:
    trajectories = load(write_data(tmp_path))
    assert [t.id for t in trajectories] == ["v1/a", "v2/b", "swe/c", "tau/task000-trial0", "tau/task001-trial0"]
    assert [sum(1 for _ in t.calls) for t in trajectories] == [4, 4, 2, 6, 0]
    assert next(trajectories[0].calls).arguments == json.dumps({"command": SED})
    assert [c.tool for c in trajectories[2].calls] == ["open", "edit"]
    assert [step.model for step in trajectories[1].steps] == ["m2"] * 4


def test_the_replay_counts_reminders_per_setting_and_the_any_order_rule(tmp_path: Path) -> None:
    evidence = measure(load(write_data(tmp_path)))
    assert (evidence.trajectories, evidence.calls) == (5, 16)
    by_setting = {
        o.name: [(f.trajectory, f.reminder.kind, f.reminder.tool_name) for f in o.reminders] for o in evidence.outcomes
    }
    assert by_setting == {
        "default": [("v1/a", "repeat", "bash")],
        "scratchpad excluded": [("v1/a", "repeat", "bash"), ("tau/task000-trial0", "repeat", "book")],
        "cycle detector on": [("v1/a", "repeat", "bash"), ("tau/task000-trial0", "cycle", "think")],
    }
    assert evidence.any_order_flagged == 3  # the sed 4 times, pytest 3 times around an ls, book 3 times
    table = render(evidence)
    assert table[0] == "5 trajectories, 16 executed tool calls"
    assert "| default | 1 | 62.500 | 1 of 5 (20.0%) |" in table
    assert "| any order, one call 3 times | - | - | 3 of 5 (60.0%) |" in table


def test_the_script_prints_the_table(tmp_path: Path, capsys: Any) -> None:
    assert main(["--data", str(write_data(tmp_path)), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 trajectories, 8 executed tool calls\n")
