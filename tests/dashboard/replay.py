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

from otel_repeat_guard.demo.scenario import AgentScript, Call, Model, Subagent, model_tokens

THRESHOLDS = (3, 5, 8)
EXCLUDED = ("todo_write",)


@dataclass(frozen=True)
class Replayed:
    agent: str
    tool: str
    run: int | None  # None: excluded tool
    tier: str | None
    duration_ms: int


@dataclass(frozen=True)
class Turn:
    """One model call: the agent run's ``turn``-th, asking for ``call`` (None: the final answer)."""

    agent: str
    model: str
    input_tokens: int
    output_tokens: int
    call: Replayed | None


@dataclass
class Figures:
    calls: list[Replayed] = field(default_factory=list)
    final_runs: Counter[int] = field(default_factory=Counter)
    turns: list[Turn] = field(default_factory=list)
    outcomes: list[tuple[Replayed, str]] = field(default_factory=list)  # each reminder and its outcome

    @property
    def wasted_turns(self) -> list[Turn]:
        """The model calls that issued a repeated call."""
        return [t for t in self.turns if t.call is not None and (t.call.run or 0) >= 2]

    def outcome_counts(self) -> Counter[str]:
        return Counter(outcome for _, outcome in self.outcomes)

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


def _replay_agent(name: str, calls: tuple[Call, ...], figures: Figures, model: Model) -> None:
    """One agent run: its calls, the model call before each (and the answer after them), and what
    became of each reminder (decided by the run's next tracked call, or the run's end)."""
    previous: tuple[str, str] | None = None
    run = 0
    waiting: Replayed | None = None
    for turn, call in enumerate(calls):
        replayed = _replay_call(name, call, previous, run)
        figures.turns.append(Turn(name, model.name, *model_tokens(turn, call), replayed))
        figures.calls.append(replayed)
        if replayed.run is None:
            continue
        if waiting is not None:
            figures.outcomes.append((waiting, "ignored" if replayed.run == (waiting.run or 0) + 1 else "broken"))
            waiting = None
        if replayed.run == 1 and run:
            figures.final_runs[run] += 1
        previous = (call.tool, json.dumps(json.loads(call.arguments), sort_keys=True) if call.recorded else "")
        run = replayed.run
        if replayed.tier is not None:
            waiting = replayed
    if waiting is not None:
        figures.outcomes.append((waiting, "ended"))
    figures.turns.append(Turn(name, model.name, *model_tokens(len(calls), None), None))
    if run:
        figures.final_runs[run] += 1


def _replay_call(name: str, call: Call, previous: tuple[str, str] | None, run: int) -> Replayed:
    if call.tool in EXCLUDED:
        return Replayed(name, call.tool, None, None, call.duration_ms)
    key = (call.tool, json.dumps(json.loads(call.arguments), sort_keys=True))
    run = run + 1 if key == previous and call.recorded else 1  # unrecorded arguments: never identical
    tier = None
    if run in THRESHOLDS:
        tier = "gentle" if run == THRESHOLDS[0] else "detailed"
    return Replayed(name, call.tool, run, tier, call.duration_ms)


def replay(scripts: tuple[AgentScript, ...]) -> Figures:
    figures = Figures()
    for script in scripts:
        for prompt in script.prompts:  # each prompt is a fresh chain
            own = tuple(step for step in prompt.steps if isinstance(step, Call))
            _replay_agent(script.name, own, figures, script.model)
            for step in prompt.steps:
                if isinstance(step, Subagent):
                    _replay_agent(step.name, step.calls, figures, step.model or script.model)
    return figures
