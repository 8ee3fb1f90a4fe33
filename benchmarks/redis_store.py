"""The cost per tool span of the Redis chain store, against in-memory: ``python -m benchmarks.redis_store``.

Starts Debian's ``redis-server`` on a free loopback port (or uses ``--url``), then times the usual
pipeline (200 B arguments, 20% repeats, one agent run per segment) with the guard's chains in
memory and in Redis, default detectors and every detector, in interleaved ABBA rounds. Reports
microseconds per tool-span lifecycle and what Redis adds, beside one bare ``PING`` round trip on
the same connection settings: the network's share of that cost.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from benchmarks import workloads as w
from benchmarks.timing import compare
from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.state.connection import connect

EVERY_DETECTOR = {"cycle_thresholds": (3,), "no_progress_thresholds": (3,), "collapse_parallel": True}


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway ``redis-server`` on a free port, no persistence; its URL."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server), or pass --url")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory() as folder:
        command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", folder]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            client = connect(url, 1000)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except Exception:
                    time.sleep(0.05)
            yield url
        finally:
            process.terminate()
            process.wait(10)


def ping_us(url: str, count: int = 2_000) -> float:
    client = connect(url, 50)
    client.ping()
    started = time.perf_counter()
    for _ in range(count):
        client.ping()
    return (time.perf_counter() - started) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis_store", description=__doc__)
    parser.add_argument("--url", help="an existing Redis (default: start redis-server on a free port)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--segment", type=int, default=1_000, help="tool spans per timed segment")
    args = parser.parse_args()
    with redis_server() if args.url is None else _given(args.url) as url:
        calls = w.tool_arguments(200, args.segment, 0.2)
        print(f"Redis at {url}; PING round trip {ping_us(url):.1f} us", flush=True)
        print("| case | in memory (us per tool span) | Redis | Redis adds | ratio [min-max] |")
        print("|---|---|---|---|---|")
        for label, extra in (("default detectors", {}), ("every detector", EVERY_DETECTOR)):
            memory_guard = RepeatGuardSpanProcessor(GuardConfig(**extra))  # type: ignore[arg-type]
            shared_guard = RepeatGuardSpanProcessor(GuardConfig(chain_store=url, **extra))  # type: ignore[arg-type]
            found = w.count_repeat_events(RepeatGuardSpanProcessor(GuardConfig(chain_store=url)), calls)
            if found != w.expected_repeats(calls):
                raise SystemExit(f"correctness check failed: {found} repeat events via Redis")
            memory, shared = w.pipeline(memory_guard), w.pipeline(shared_guard)

            def flush(memory: w.Pipeline = memory, shared: w.Pipeline = shared) -> None:
                memory.flush()
                shared.flush()

            c = compare(
                partial(w.tool_segment, memory, calls), partial(w.tool_segment, shared, calls), args.rounds, flush
            )
            low, high = c.spread
            print(
                f"| 200 B, 20% repeats, {label} | {c.baseline_us:.1f} | {c.candidate_us:.1f} | "
                f"+{c.candidate_us - c.baseline_us:.1f} us | {c.ratio:.2f}x [{low:.2f}-{high:.2f}] |",
                flush=True,
            )
    return 0


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    sys.exit(main())
