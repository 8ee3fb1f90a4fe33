"""The agent process's side of the distributed tests, and the worker processes it hands tool calls to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.decide.inbox import RedisReminderInbox
from otel_repeat_guard.setup.propagation import RunBaggagePropagator
from otel_repeat_guard.state.connection import STORE_FAILURES

WORKER = Path(__file__).with_name("worker.py")


class Workers:
    """``count`` worker processes (real subprocesses), each configured from ``environment``."""

    def __init__(self, count: int, environment: dict[str, str]) -> None:
        env = {**os.environ, **environment}
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(count)
        ]

    def ask(self, worker: int, request: dict[str, Any]) -> dict[str, Any]:
        process = self.processes[worker]
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            process.wait(10)
            assert process.stderr is not None
            raise AssertionError(f"worker {worker} exited {process.returncode}: {process.stderr.read()[-3000:]}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> list[str]:
        """Stop every worker; their standard error (the guard logs there)."""
        errors = []
        for process in self.processes:
            assert process.stdin is not None and process.stderr is not None
            process.stdin.close()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            errors.append(process.stderr.read())
            assert process.returncode == 0, errors[-1][-3000:]
        return errors


@contextmanager
def workers(count: int, url: str, **settings: str) -> Iterator[Workers]:
    environment = {"OTEL_REPEAT_GUARD_STORE": url, **{f"OTEL_REPEAT_GUARD_{k.upper()}": v for k, v in settings.items()}}
    fleet = Workers(count, environment)
    try:
        yield fleet
    finally:
        fleet.close()


@dataclass
class AgentProcess:
    """The agent loop's process: its guard on the shared store, the shared inbox, and a propagator that adds
    the run to the baggage header it injects."""

    config: GuardConfig
    provider: TracerProvider = field(init=False)
    guard: RepeatGuardSpanProcessor = field(init=False)
    inbox: RedisReminderInbox = field(init=False)
    exporter: InMemorySpanExporter = field(init=False)
    metrics: InMemoryMetricReader = field(init=False)
    propagator: CompositePropagator = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.inbox = RedisReminderInbox.from_config(self.config, meter_provider=meter_provider)
        self.guard = RepeatGuardSpanProcessor(self.config, self.inbox.put, meter_provider=meter_provider)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.guard)
        self.exporter = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.propagator = CompositePropagator([TraceContextTextMapPropagator(), RunBaggagePropagator(self.guard)])

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("tests.distributed.agent")

    @contextmanager
    def agent_run(self, name: str) -> Iterator[Span]:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes) as span:
            yield span

    def headers(self) -> dict[str, str]:
        """What the agent loop sends with a tool call: injected from the current context."""
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier)
        return carrier

    def drain(self) -> list[Reminder]:
        """What an adapter does before the next model request."""
        run_key = self.guard.current_agent_id()
        assert run_key is not None
        return self.inbox.drain(run_key)

    def store_failures(self) -> int:
        data = self.metrics.get_metrics_data()
        total = 0
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == STORE_FAILURES:
                        total += sum(int(point.value) for point in metric.data.data_points)  # type: ignore[union-attr]
        return total
