"""What the guard says about real agents: public trajectories replayed through it as GenAI spans.

    python -m benchmarks.real_trajectories [--data DIR] [--limit N]

Each trajectory (see benchmarks/trajectories.py for the formats and where the data lives) becomes
one trace: an ``invoke_agent`` span for the run, and inside it, per step, a ``chat`` span for the
model call, then an ``execute_tool`` span per tool call it made, with its JSON arguments. They go
through a real TracerProvider and the guard, once per setting:

- ``default``: ``GuardConfig()``, the settings a user gets;
- ``scratchpad excluded``: also excluding the scratchpad tools ``think``, ``TodoWrite`` and
  ``update_plan``, calls that record the model's own notes and sit between the real retries;
- ``cycle detector on``: ``cycle_thresholds=(3,)`` (``A B A B A B`` fires), with the default exclude.

Then the any-order rule, counted without the guard: a trajectory is flagged when one call (tool and
canonical arguments) appears 3 times in it, in any order (OpenLIT's rule). The output is the table
docs/evidence.md shows; tests/test_docs.py holds the two equal.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from opentelemetry.sdk.trace import TracerProvider

from benchmarks.trajectories import Trajectory, default_data_dir, load
from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.core.canonical import canonical_arguments

SCRATCHPAD_TOOLS = ("think", "TodoWrite", "update_plan")
ANY_ORDER_COUNT = 3


class Setting(NamedTuple):
    name: str
    config: GuardConfig


SETTINGS = (
    Setting("default", GuardConfig()),
    Setting("scratchpad excluded", GuardConfig(exclude=(*GuardConfig().exclude, *SCRATCHPAD_TOOLS))),
    Setting("cycle detector on", GuardConfig(cycle_thresholds=(3,))),
)


class Fired(NamedTuple):
    trajectory: str
    reminder: Reminder


class Outcome(NamedTuple):
    """One setting's result over every trajectory."""

    name: str
    reminders: tuple[Fired, ...]

    @property
    def trajectories(self) -> int:
        return len({fired.trajectory for fired in self.reminders})


class Evidence(NamedTuple):
    trajectories: int
    calls: int
    outcomes: tuple[Outcome, ...]
    any_order_flagged: int
    any_order_example: str


def replay(trajectories: Sequence[Trajectory], setting: Setting) -> Outcome:
    """Every trajectory through one guard on one provider; the reminders it handed, with their trajectory."""
    fired: list[Fired] = []
    current = [""]
    guard = RepeatGuardSpanProcessor(setting.config, lambda r: fired.append(Fired(current[0], r)))
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("benchmarks.real_trajectories")
    for trajectory in trajectories:
        current[0] = trajectory.id
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": trajectory.agent}
        agent["gen_ai.agent.id"] = trajectory.id
        with tracer.start_as_current_span(f"invoke_agent {trajectory.agent}", attributes=agent):
            for step in trajectory.steps:
                model = {"gen_ai.operation.name": "chat", "gen_ai.request.model": step.model}
                with tracer.start_as_current_span(f"chat {step.model}", attributes=model):
                    pass
                for call in step.calls:
                    with tracer.start_as_current_span(f"execute_tool {call.tool}") as span:
                        span.set_attribute("gen_ai.operation.name", "execute_tool")
                        span.set_attribute("gen_ai.tool.name", call.tool)
                        span.set_attribute("gen_ai.tool.call.arguments", call.arguments)
    provider.shutdown()
    return Outcome(setting.name, tuple(fired))


def any_order(trajectories: Sequence[Trajectory]) -> tuple[int, str]:
    """How many trajectories hold one call ``ANY_ORDER_COUNT`` times in any order; and the most repeated call."""
    flagged = 0
    top = (0, "")
    for trajectory in trajectories:
        seen = Counter((call.tool, canonical_arguments(call.arguments)) for call in trajectory.calls)
        if not seen:
            continue
        (tool, arguments), count = seen.most_common(1)[0]
        if count >= ANY_ORDER_COUNT:
            flagged += 1
        if count > top[0]:
            top = (count, f"{tool} {arguments[:80]} ({count} times in {trajectory.id})")
    return flagged, top[1]


def measure(trajectories: Sequence[Trajectory]) -> Evidence:
    calls = sum(len(step.calls) for trajectory in trajectories for step in trajectory.steps)
    outcomes = tuple(replay(trajectories, setting) for setting in SETTINGS)
    flagged, example = any_order(trajectories)
    return Evidence(len(trajectories), calls, outcomes, flagged, example)


def per_thousand(count: int, calls: int) -> str:
    return f"{1000 * count / calls:.3f}" if calls else "-"


def render(evidence: Evidence) -> list[str]:
    """The figures as the markdown table docs/evidence.md shows, then each reminder on a line."""
    n, calls = evidence.trajectories, evidence.calls
    lines = [
        f"{n:,} trajectories, {calls:,} executed tool calls",
        "",
        "| setting | reminders | per 1,000 calls | trajectories flagged |",
        "|---|---|---|---|",
    ]
    for outcome in evidence.outcomes:
        count = len(outcome.reminders)
        share = f"{outcome.trajectories} of {n:,} ({100 * outcome.trajectories / n:.1f}%)"
        lines.append(f"| {outcome.name} | {count} | {per_thousand(count, calls)} | {share} |")
    flagged = evidence.any_order_flagged
    lines.append(
        f"| any order, one call {ANY_ORDER_COUNT} times | - | - | {flagged} of {n:,} ({100 * flagged / n:.1f}%) |"
    )
    lines.append("")
    for outcome in evidence.outcomes:
        for fired in outcome.reminders:
            r = fired.reminder
            lines.append(
                f"- {outcome.name}: {fired.trajectory}: {r.kind} {r.tool_name} x{r.run_length} "
                f"{r.arguments_preview[:100]}"
            )
    lines.append(f"- any order, most repeated: {evidence.any_order_example}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help=f"the trajectories (default {default_data_dir()})")
    parser.add_argument("--limit", type=int, default=None, help="only the first N trajectories")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    trajectories = load(args.data, limit=args.limit)
    loaded = time.perf_counter()
    evidence = measure(trajectories)
    print("\n".join(render(evidence)))
    print(
        f"\n(read in {loaded - started:.1f} s, replayed {len(SETTINGS)} times in {time.perf_counter() - loaded:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
