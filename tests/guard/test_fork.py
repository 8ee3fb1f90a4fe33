"""Forked while another thread is inside the guard (a pre-forking server: gunicorn ``--preload``, multiprocessing
with fork), the child's guard starts with fresh locks and nothing in flight, keeps its configuration, and
counts its own spans; the parent goes on as if nothing happened."""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.decide.inbox import ReminderInbox
from otel_repeat_guard.decide.metrics import REPEATED_CALLS

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")

FORKS = 200
CHILD_SECONDS = 10.0
"""How long a child may take to make its spans (a few milliseconds when it does not hang)."""


class Agent:
    """A guard with an inbox and a metric reader, and a tracer on it."""

    def __init__(self, config: GuardConfig) -> None:
        self.reader = InMemoryMetricReader()
        self.inbox = ReminderInbox()
        self.guard = RepeatGuardSpanProcessor(
            config, self.inbox.put, meter_provider=MeterProvider(metric_readers=[self.reader])
        )
        provider = TracerProvider()
        provider.add_span_processor(self.guard)
        self.tracer: Tracer = provider.get_tracer("tests.fork")

    def run(self, name: str, arguments: list[str]) -> tuple[str, int]:
        """One agent run making a tool call per item of ``arguments``: its key and its final run length."""
        with self.tracer.start_as_current_span(
            f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        ):
            key = self.guard.current_agent_id()
            assert key is not None
            for argument in arguments:
                attributes = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "poll",
                    "gen_ai.tool.call.arguments": json.dumps({"q": argument}),
                }
                with self.tracer.start_as_current_span("execute_tool poll", attributes=attributes):
                    pass
            return key, self.guard.run_length(key)

    def repeated_calls(self) -> int:
        data = self.reader.get_metrics_data()
        return sum(
            int(point.value)  # type: ignore[union-attr,misc]
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == REPEATED_CALLS
            for point in metric.data.data_points
        )


@contextmanager
def busy(agent: Agent) -> Iterator[list[int]]:
    """A thread inside the guard all the time (runs of spans, each with repeats); the final run lengths it saw."""
    stop = threading.Event()
    lengths: list[int] = []

    def work() -> None:
        while not stop.is_set():
            lengths.append(agent.run("busy", ["a", "a", "b", "b", "b"])[1])

    thread = threading.Thread(target=work, name="busy-agent")
    thread.start()
    try:
        yield lengths
    finally:
        stop.set()
        thread.join(30)


def in_child(agent: Agent) -> str:
    """What a forked child does: four identical calls in a run of its own. What it found wrong, "" if nothing."""
    key, length = agent.run("child", ["x", "x", "x", "x"])
    reminders = agent.inbox.drain(key)
    problems = []
    if length != 4:
        problems.append(f"run length {length}, not 4")
    if [r.run_length for r in reminders] != [3]:
        problems.append(f"reminders at {[r.run_length for r in reminders]}, not [3]")
    if agent.repeated_calls() != 3:  # the child's own three repeats, none of its parent's
        problems.append(f"{agent.repeated_calls()} repeated calls counted, not 3")
    if agent.inbox.pending():
        problems.append(f"reminders left for {len(agent.inbox.pending())} runs of its parent's")
    if agent.guard.config.thresholds != (3,):
        problems.append(f"thresholds {agent.guard.config.thresholds}")
    return "; ".join(problems)


def fork_once(agent: Agent, child: Callable[[Agent], str] = in_child) -> str:
    """Fork, let the child do ``child`` (by default, make its spans); what went wrong in it ("" if nothing, "hung"
    if it did not finish)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: it never returns into pytest
        status = 1
        try:
            os.close(read_end)
            problem = child(agent)
            os.write(write_end, problem.encode())
            status = 0
        except BaseException as error:
            os.write(write_end, f"raised {error!r}".encode())
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_SECONDS
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return "hung"
        time.sleep(0.002)
    message = os.read(read_end, 4096).decode()
    os.close(read_end)
    return message if done[1] == 0 else message or f"exited {done[1]}"


def test_a_fork_while_another_thread_is_inside_the_guard_leaves_the_child_a_guard_that_counts_its_own_spans() -> None:
    agent = Agent(GuardConfig(thresholds=(3,)))
    with busy(agent) as lengths:
        while len(lengths) < 5:
            time.sleep(0.001)  # it is inside the guard
        problems = [problem for _ in range(FORKS) if (problem := fork_once(agent))]
    assert problems == []
    # The parent is unaffected: every run of its busy thread ended on its three b's, and its counts are its own.
    assert len(lengths) > 5 and set(lengths) == {3}
    assert agent.repeated_calls() == 3 * len(lengths)


def test_the_fork_hook_keeps_no_processor_or_inbox_alive() -> None:
    inbox = ReminderInbox()
    processor = RepeatGuardSpanProcessor(GuardConfig(), inbox.put)  # no provider: the SDK's atexit would hold it
    # Not a weak reference to the processor itself: the compiled build's classes crash the collector under one
    # (forks.py); its fork handle is what the registry holds, and it goes with the processor.
    handle, box = weakref.ref(processor._fork), weakref.ref(inbox)
    del processor, inbox
    gc.collect()
    assert handle() is None
    assert box() is None
