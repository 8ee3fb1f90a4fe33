"""Public agent trajectories, read into one shape: steps of a model call and the tool calls it made.

The files come from four harnesses and their formats differ (``manifest.json`` names each file's
``format``); each reader keeps exactly the calls the harness executed:

- ``mini-v2`` (mini-swe-agent 2.x): every ``tool_calls`` entry of an assistant message, with its
  JSON arguments as the model wrote them;
- ``mini-v1`` (mini-swe-agent 1.x, bash-only): an assistant message with exactly one fenced
  bash block, the harness's own rule (one with none or several is a format error, not run);
  the call is ``bash`` with ``{"command": ...}``;
- ``swe-agent`` (ACI commands): each ``trajectory`` entry's ``action``; its first word is the
  tool, the rest its arguments;
- ``tau`` (tau-bench): one file of many trajectories; every ``tool_calls`` entry of an assistant
  message.

Where the data lives: ``$OTEL_REPEAT_GUARD_TRAJECTORIES``, else ``../shared/data/trajectories``
beside the checkout (``SOURCES.md`` there gives repo, path, commit and licence of each file).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

DATA_ENV = "OTEL_REPEAT_GUARD_TRAJECTORIES"
BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # mini-swe-agent 1.x's own action regex


class Call(NamedTuple):
    tool: str
    arguments: str  # JSON text, as the span attribute gen_ai.tool.call.arguments carries it


class Step(NamedTuple):
    """One model call and the tool calls it asked for (none for a plain answer)."""

    model: str
    calls: tuple[Call, ...]


class Trajectory(NamedTuple):
    id: str
    source: str
    agent: str
    model: str
    steps: tuple[Step, ...]

    @property
    def calls(self) -> Iterator[Call]:
        return (call for step in self.steps for call in step.calls)


def default_data_dir() -> Path:
    configured = os.environ.get(DATA_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"


def _step_model(message: dict[str, Any], default: str) -> str:
    response = (message.get("extra") or {}).get("response") or {}
    model = response.get("model")
    return model if isinstance(model, str) and model else default


def _tool_call_steps(messages: list[dict[str, Any]], default_model: str) -> tuple[Step, ...]:
    steps = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        calls = tuple(
            Call(call["function"]["name"], call["function"]["arguments"] or "{}")
            for call in message.get("tool_calls") or ()
        )
        steps.append(Step(_step_model(message, default_model), calls))
    return tuple(steps)


def _bash_block_steps(messages: list[dict[str, Any]], default_model: str) -> tuple[Step, ...]:
    steps = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        blocks = BASH_BLOCK.findall(message.get("content") or "")
        calls = (Call("bash", json.dumps({"command": blocks[0]})),) if len(blocks) == 1 else ()
        steps.append(Step(_step_model(message, default_model), calls))
    return tuple(steps)


def _aci_steps(entries: list[dict[str, Any]], model: str) -> tuple[Step, ...]:
    steps = []
    for entry in entries:
        tool, _, rest = entry["action"].strip().partition(" ")
        steps.append(Step(model, (Call(tool, json.dumps({"args": rest.strip()})),)))
    return tuple(steps)


def _read(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def load(data_dir: Path | None = None, *, limit: int | None = None) -> list[Trajectory]:
    """Every trajectory the manifest lists, in its order (the first ``limit`` only, if given)."""
    root = data_dir or default_data_dir()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    trajectories: list[Trajectory] = []
    for entry in manifest["trajectory_files"]:
        if limit is not None and len(trajectories) >= limit:
            break
        data = _read(root / entry["file"])
        model = entry["model"].split(",")[0].strip()
        fmt = entry["format"]
        base = Trajectory(entry.get("id", entry["file"]), entry["source"], entry["agent"], model, ())
        if fmt == "mini-v2":
            trajectories.append(base._replace(steps=_tool_call_steps(data["messages"], model)))
        elif fmt == "mini-v1":
            trajectories.append(base._replace(steps=_bash_block_steps(data["messages"], model)))
        elif fmt == "swe-agent":
            trajectories.append(base._replace(steps=_aci_steps(data["trajectory"], model)))
        elif fmt == "tau":
            for record in data:
                name = f"{entry['source']}/task{record['task_id']:03d}-trial{record['trial']}"  # the manifest's names
                trajectories.append(base._replace(id=name, steps=_tool_call_steps(record["traj"], model)))
        else:
            raise ValueError(f"manifest.json: unknown trajectory format {fmt!r} for {entry['file']}")
    return trajectories if limit is None else trajectories[:limit]
