"""The worst ``span.end()`` under each Redis fault, with the default ``store_timeout_ms``:
``python -m benchmarks.redis_faults [--seconds 3]``.

For each fault, tool spans end for ``--seconds`` (one every 10 ms, on one thread; on 8 for the restart) in
one agent run whose chain is in Redis, and the slowest ``span.end()`` is reported, with the median and how
many store calls fell back. The faults: Redis killed mid-run; a port nothing listens on; a server that
accepts connections and never answers; Redis paused (SIGSTOP); Redis killed and restarted on the same
port while 8 threads end spans; a proxy that passes Redis's replies on one byte every 30 ms (each read
within the timeout, no reply within it). The servers are real (Debian's ``redis-server``, loopback
sockets), the ones of tests/distributed/servers.py.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry.context import Context, get_current
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.state.connection import STORE_FAILURES
from tests.distributed.servers import RedisServer, TrickleProxy, free_port

ARGUMENTS = json.dumps({"q": "status"})


class Agent:
    """A guard on ``url`` (default timeout), its tracer, and one open agent run."""

    def __init__(self, url: str) -> None:
        self.reader = InMemoryMetricReader()
        self.guard = RepeatGuardSpanProcessor(
            GuardConfig(chain_store=url), meter_provider=MeterProvider(metric_readers=[self.reader])
        )
        provider = TracerProvider()
        provider.add_span_processor(self.guard)
        self.tracer: Tracer = provider.get_tracer("benchmarks.redis_faults")

    def failures(self) -> int:
        data = self.reader.get_metrics_data()
        return sum(
            int(point.value)  # type: ignore[union-attr,misc]
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == STORE_FAILURES
            for point in metric.data.data_points
        )

    def end_span(self, run: Context | None = None) -> float:
        """One tool call in ``run`` (default: the current context): how long its ``span.end()`` took, in seconds."""
        span = self.tracer.start_span(
            "execute_tool poll",
            context=run,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "poll",
                "gen_ai.tool.call.arguments": ARGUMENTS,
            },
        )
        started = time.perf_counter()
        span.end()
        return time.perf_counter() - started

    def spans_for(self, seconds: float, threads: int = 1, during: Callable[[], None] | None = None) -> list[float]:
        """End spans in the run for ``seconds`` on ``threads`` threads (``during`` runs meanwhile); every timing."""
        timings: list[float] = []
        lock = threading.Lock()
        stop = time.monotonic() + seconds

        def work(run: Context) -> None:
            mine = []
            while time.monotonic() < stop:
                mine.append(self.end_span(run))
                time.sleep(0.01)
            with lock:
                timings.extend(mine)

        with self.tracer.start_as_current_span(
            "invoke_agent poller", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "poller"}
        ):
            timings.append(self.end_span())  # the first connects (or meets the fault first)
            workers = [threading.Thread(target=work, args=(get_current(),)) for _ in range(threads)]
            for worker in workers:
                worker.start()
            if during is not None:
                during()
            for worker in workers:
                worker.join()
        return timings


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback server that accepts every connection and never answers: its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    finally:
        listener.close()
        for sock in held:
            sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis_faults", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each fault lasts")
    seconds = parser.parse_args().seconds
    rows: list[tuple[str, list[float], int]] = []

    def measure(fault: str, agent: Agent, timings: list[float]) -> None:
        rows.append((fault, timings, agent.failures()))

    with tempfile.TemporaryDirectory() as folder:
        server = RedisServer(Path(folder)).start()
        try:
            agent = Agent(server.url)
            measure("healthy", agent, agent.spans_for(seconds))

            agent = Agent(server.url)
            measure("paused (SIGSTOP)", agent, agent.spans_for(seconds, during=server.pause))
            server.resume()

            proxy = TrickleProxy(server.port, delay=0.03)
            agent = Agent(proxy.url)

            def trickle() -> None:
                proxy.trickling = True

            measure("trickling (1 byte / 30 ms)", agent, agent.spans_for(seconds, during=trickle))
            proxy.close()

            agent = Agent(server.url)
            measure("killed", agent, agent.spans_for(seconds, during=server.kill))
            server.start()

            agent = Agent(server.url)

            def restart() -> None:
                time.sleep(seconds / 3)
                server.kill()
                time.sleep(seconds / 6)
                server.start()

            measure("restarted, 8 threads", agent, agent.spans_for(seconds, threads=8, during=restart))
        finally:
            server.kill()

    agent = Agent(f"redis://127.0.0.1:{free_port()}/0")
    measure("wrong port", agent, agent.spans_for(seconds))
    with silent_server() as url:
        agent = Agent(url)
        measure("accepting, silent", agent, agent.spans_for(seconds))

    print("| fault | spans | worst span.end() | median | store calls fallen back |")
    print("|---|---|---|---|---|")
    for fault, timings, failures in rows:
        worst, median = max(timings) * 1000, statistics.median(timings) * 1000
        print(f"| {fault} | {len(timings)} | {worst:.1f} ms | {median:.3f} ms | {failures} |")


if __name__ == "__main__":
    main()
