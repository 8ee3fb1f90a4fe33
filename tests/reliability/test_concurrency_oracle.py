"""16 threads x 5,000 tool spans over 512 agents, with random interleaving, resets and forgets,
against a sequential oracle: same run lengths, every reminder delivered exactly once."""

from __future__ import annotations

import random
import threading
from collections import Counter, defaultdict

from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.core.chains import ChainTracker

THREADS, SPANS_PER_THREAD, AGENTS = 16, 5_000, 512
THRESHOLDS = (3, 5, 8)


def _plan(seed: int) -> list[tuple[str, str, str]]:
    """(action, agent, arguments) steps for one thread; each thread owns its agents, as real agents do."""
    rng = random.Random(seed)
    agents = [f"agent-{seed}-{i}" for i in range(AGENTS // THREADS)]
    steps: list[tuple[str, str, str]] = []
    calls = 0
    while calls < SPANS_PER_THREAD:
        agent = rng.choice(agents)
        roll = rng.random()
        if roll < 0.01:
            steps.append(("reset", agent, ""))
        elif roll < 0.015:
            steps.append(("forget", agent, ""))
        else:
            arguments = f'{{"q": {rng.randint(0, 1)}}}'
            repeat = min(rng.randint(1, 9), SPANS_PER_THREAD - calls)
            steps.extend([("call", agent, arguments)] * repeat)
            calls += repeat
    return steps


def test_threads_match_the_sequential_oracle() -> None:
    plans = [_plan(seed) for seed in range(THREADS)]

    # the oracle: each agent's own steps in order, through the pure chain logic
    oracle = ChainTracker(max_agents=10**6)
    expected_runs: dict[str, list[int]] = defaultdict(list)
    expected_reminders: Counter[tuple[str, int]] = Counter()
    for plan in plans:
        for action, agent, arguments in plan:
            if action == "call":
                run = oracle.observe(agent, "grep", arguments.encode())
                expected_runs[agent].append(run)
                if run in THRESHOLDS:
                    expected_reminders[(agent, run)] += 1
            else:
                oracle.forget(agent)

    reminders: list[Reminder] = []
    lock = threading.Lock()

    def deliver(reminder: Reminder) -> None:
        with lock:
            reminders.append(reminder)

    guard = RepeatGuardSpanProcessor(GuardConfig(thresholds=THRESHOLDS), deliver)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    tracer = provider.get_tracer("oracle")
    runs: dict[str, list[int]] = defaultdict(list)
    barrier = threading.Barrier(THREADS)

    def worker(plan: list[tuple[str, str, str]]) -> None:
        barrier.wait()
        for action, agent, arguments in plan:
            if action == "reset":
                guard.reset(agent)
            elif action == "forget":
                guard.forget(agent)
            else:
                with tracer.start_as_current_span("execute_tool grep") as span:
                    span.set_attributes(
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "grep",
                            "gen_ai.tool.call.arguments": arguments,
                            "gen_ai.agent.id": agent,
                        }
                    )
                runs[agent].append(guard.run_length(agent))

    threads = [threading.Thread(target=worker, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (
        sum(len(r) for r in runs.values()) == sum(len(r) for r in expected_runs.values()) == THREADS * SPANS_PER_THREAD
    )
    assert runs == expected_runs
    delivered = Counter((r.agent_id, r.run_length) for r in reminders)
    assert delivered == expected_reminders  # none lost, none twice
    assert sum(delivered.values()) > 5_000


LOOPS = GuardConfig(thresholds=(3, 5), cycle_thresholds=(2, 3), no_progress_thresholds=(3,), stop_at=7)


def _loop_plan(seed: int) -> list[tuple[str, str, str, str]]:
    """(action, agent, arguments, result) steps: cycles, repeats and same-result runs, with resets."""
    rng = random.Random(1000 + seed)
    agents = [f"loop-{seed}-{i}" for i in range(8)]
    steps: list[tuple[str, str, str, str]] = []
    while len(steps) < 1_500:
        agent = rng.choice(agents)
        if rng.random() < 0.02:
            steps.append(("reset", agent, "", ""))
            continue
        shape = rng.choice(["cycle", "repeat", "no_progress"])
        unit = rng.sample("ABCD", rng.randint(2, 3))
        for i in range(rng.randint(2, 9)):
            letter = unit[i % len(unit)] if shape == "cycle" else unit[0] if shape == "repeat" else f"{rng.random()}"
            steps.append(("call", agent, f'{{"q": "{letter}"}}', "same" if shape == "no_progress" else letter))
    return steps


def _play(guard: RepeatGuardSpanProcessor, tracer: object, plan: list[tuple[str, str, str, str]]) -> None:
    for action, agent, arguments, result in plan:
        if action == "reset":
            guard.reset(agent)
            continue
        with tracer.start_as_current_span("execute_tool grep") as span:  # type: ignore[attr-defined]
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "grep",
                    "gen_ai.tool.call.arguments": arguments,
                    "gen_ai.tool.call.result": result,
                    "gen_ai.agent.id": agent,
                }
            )


def _guarded(config: GuardConfig) -> tuple[RepeatGuardSpanProcessor, object, list[Reminder]]:
    reminders: list[Reminder] = []
    lock = threading.Lock()

    def deliver(reminder: Reminder) -> None:
        with lock:
            reminders.append(reminder)

    guard = RepeatGuardSpanProcessor(config, deliver)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    return guard, provider.get_tracer("oracle"), reminders


def test_threads_match_the_sequential_oracle_with_every_detector_on() -> None:
    """The same plans, 16 threads at once against one after the other: the same reminders, of every kind."""
    plans = [_loop_plan(seed) for seed in range(THREADS)]
    guard, tracer, expected = _guarded(LOOPS)
    for plan in plans:
        _play(guard, tracer, plan)

    guard, tracer, reminders = _guarded(LOOPS)
    barrier = threading.Barrier(THREADS)

    def worker(plan: list[tuple[str, str, str, str]]) -> None:
        barrier.wait()
        _play(guard, tracer, plan)

    threads = [threading.Thread(target=worker, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    def summary(found: list[Reminder]) -> Counter[tuple[str, str, str, int, int]]:
        return Counter((r.agent_id, r.kind, r.tier, r.run_length, r.period) for r in found)

    assert summary(reminders) == summary(expected)
    kinds = Counter(r.kind for r in expected)
    assert kinds["cycle"] > 50 and kinds["repeat"] > 50 and kinds["no_progress"] > 50, kinds
    assert any(r.tier == "stop" for r in expected)
