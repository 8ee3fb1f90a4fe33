"""8 processes x 5,000 updates on shared runs: exactly what a sequential oracle counts.

Each process calls the store's ``observe`` directly (the Lua script each tool span ends in), spread
over four runs whose every call is identical: in any sequential order, run r's calls return
1, 2, ..., n_r, once each, and leave it at n_r. A lost update would repeat a value, a double
count skip one. A fifth run alternates between two calls in every process: each value a call
got is then a position in a streak of that call, and the streaks must add up exactly.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter

from otel_repeat_guard.state.redis import RedisChainStore
from tests.distributed.servers import RedisServer

PROCESSES = 8
UPDATES = 5_000
SHARED_RUNS = 4

UPDATER = """
import json, sys, time
from otel_repeat_guard.state.redis import RedisChainStore

url, index, updates, runs, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
store = RedisChainStore(url, 1000, timeout_ms=2000)
seen = {}
time.sleep(max(0.0, start_at - time.time()))  # every process starts at once
for i in range(updates):
    if i % 5 == 4:  # the alternating run: call A, then B, then A ... in this process
        key = b"A" if (i // 5) % 2 == 0 else b"B"
        seen.setdefault("alternating", []).append([key.decode(), store.observe("alternating", "tool", key)])
    else:
        run = f"shared-{(i + index) % runs}"
        seen.setdefault(run, []).append(store.observe(run, "grep", b"same-digest"))
print(json.dumps({"seen": seen, "failures": store.health.down}))
"""


def test_eight_processes_count_exactly_as_one(redis_server: RedisServer) -> None:
    start_at = time.time() + 3.0
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                UPDATER,
                redis_server.url,
                str(index),
                str(UPDATES),
                str(SHARED_RUNS),
                str(start_at),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(PROCESSES)
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    assert not any(result["failures"] for result in results)

    # A generous deadline: on a loaded machine a 50 ms connect can miss, and a store that fell back to
    # counting in this process would read 0 here, which is the outage tests' subject, not this one's.
    store = RedisChainStore(redis_server.url, 10, timeout_ms=5000)
    shared_total = 0
    for run in range(SHARED_RUNS):
        lengths = sorted(n for result in results for n in result["seen"].get(f"shared-{run}", []))
        assert lengths == list(range(1, len(lengths) + 1)), f"shared-{run}: a count lost or doubled"
        assert store.run_length(f"shared-{run}") == len(lengths)
        shared_total += len(lengths)
    assert shared_total == PROCESSES * UPDATES * 4 // 5

    # The alternating run: for each call, how many streaks reached length v is non-increasing in v, the
    # streaks of A and B alternate (their numbers differ by one at most), and they hold every call.
    pairs = [(key, n) for result in results for key, n in result["seen"]["alternating"]]
    assert len(pairs) == PROCESSES * UPDATES // 5
    streaks = {}
    for key in ("A", "B"):
        counts = Counter(n for k, n in pairs if k == key)
        reached = [counts.get(v, 0) for v in range(1, max(counts) + 2)]
        assert all(a >= b for a, b in itertools.pairwise(reached)), key
        streaks[key] = reached[0]
        assert sum(reached) == sum(1 for k, _ in pairs if k == key)
    assert abs(streaks["A"] - streaks["B"]) <= 1
    last = store.run_length("alternating")
    assert 1 <= last <= max(n for _, n in pairs)
