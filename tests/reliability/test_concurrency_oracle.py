"""16 threads x 5,000 tool spans over 512 agents, with random interleaving, resets and forgets,
against a sequential oracle: same run lengths, every reminder delivered exactly once."""

from __future__ import annotations

import random
import threading
from collections import Counter, defaultdict

from opentelemetry.sdk.trace import TracerProvider

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.chains import ChainTracker

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
