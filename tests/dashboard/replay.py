"""Expected dashboard figures, computed by replaying the demo's scripts with a plain counter.

Deliberately independent of the package's chain logic and of the dashboard's SQL: it
uses only the stdlib ``json`` module and the rules stated in the guard's issue
(per-agent runs of identical tool + arguments, excluded tools transparent, a new prompt
resets, reminders at exact thresholds, the first gentle and the rest detailed).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from otel_repeat_guard.demo.scenario import AgentScript, Call, Subagent

THRESHOLDS = (3, 5, 8)
EXCLUDED = ("todo_write",)


@dataclass(frozen=True)
class Replayed:
    agent: str
    tool: str
    run: int | None  # None: excluded tool
    tier: str | None
    duration_ms: int


@dataclass
class Figures:
    calls: list[Replayed] = field(default_factory=list)
    final_runs: Counter[int] = field(default_factory=Counter)

    @property
    def tracked(self) -> list[Replayed]:
        return [c for c in self.calls if c.run is not None]

    @property
    def repeated(self) -> list[Replayed]:
        return [c for c in self.calls if c.run is not None and c.run >= 2]

    def headline(self) -> dict[str, object]:
        repeated = self.repeated
        tiers = Counter(c.tier for c in self.calls if c.tier)
        return {
            "tool_calls": len(self.tracked),
            "untracked_calls": len(self.calls) - len(self.tracked),
            "repeated_calls": len(repeated),
            "wasted_share": len(repeated) / len(self.tracked),
            "gentle_reminders": tiers["gentle"],
            "detailed_reminders": tiers["detailed"],
            "agents_with_loops": len({c.agent for c in repeated}),
            "longest_run": max(c.run or 0 for c in self.calls),
            "repeated_seconds": sum(c.duration_ms for c in repeated) / 1000,
        }

    def grouped(self, by: str) -> dict[str, dict[str, object]]:
        groups: dict[str, list[Replayed]] = defaultdict(list)
        for call in self.tracked:
            groups[getattr(call, by)].append(call)
        out = {}
        for name, calls in groups.items():
            repeated = [c for c in calls if (c.run or 0) >= 2]
            if repeated:
                out[name] = {
                    "repeated_calls": len(repeated),
                    "reminders": sum(1 for c in calls if c.tier),
                    "longest_run": max(c.run or 0 for c in calls),
                    "wasted_seconds": sum(c.duration_ms for c in repeated) / 1000,
                    "calls": len(calls),
                    "repeated_share": len(repeated) / len(calls),
                }
        return out


def _replay_agent(name: str, calls: tuple[Call, ...], figures: Figures) -> None:
    previous: tuple[str, str] | None = None
    run = 0
    for call in calls:
        if call.tool in EXCLUDED:
            figures.calls.append(Replayed(name, call.tool, None, None, call.duration_ms))
            continue
        key = (call.tool, json.dumps(json.loads(call.arguments), sort_keys=True))
        if key == previous:
            run += 1
        else:
            if run:
                figures.final_runs[run] += 1
            previous, run = key, 1
        tier = None
        if run in THRESHOLDS:
            tier = "gentle" if run == THRESHOLDS[0] else "detailed"
        figures.calls.append(Replayed(name, call.tool, run, tier, call.duration_ms))
    if run:
        figures.final_runs[run] += 1


def replay(scripts: tuple[AgentScript, ...]) -> Figures:
    figures = Figures()
    for script in scripts:
        for prompt in script.prompts:  # each prompt is a fresh chain
            own = tuple(step for step in prompt.steps if isinstance(step, Call))
            _replay_agent(script.name, own, figures)
            for step in prompt.steps:
                if isinstance(step, Subagent):
                    _replay_agent(step.name, step.calls, figures)
    return figures
