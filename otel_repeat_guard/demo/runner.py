"""Runs the scripted scenario through real OpenTelemetry: a TracerProvider per service, the
guard, and a ``BatchSpanProcessor`` feeding the SQLite exporter. Agents run on their own
threads; subagents on theirs, alongside their parent."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, SpanRouter, find_tool_call
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.patterns import ToolFilter
from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.demo.scenario import (
    MODEL_LATENCY_MS,
    AgentScript,
    Call,
    Model,
    Prompt,
    Subagent,
    model_output,
    model_tokens,
)
from otel_repeat_guard.processor import REMINDER_EVENT, REPEAT_EVENT, RepeatGuardSpanProcessor
from otel_repeat_guard.store.exporter import SQLiteSpanExporter

ReminderSink = Callable[[Reminder], None]


@dataclass
class Counts:
    """Live counts of what the demo's spans carried, read off the exported spans.

    ``calls`` counts every tool call, ``excluded`` those of tools the guard does not track (the
    dashboard's "Tool calls" is ``calls - excluded``).
    """

    calls: int = 0
    excluded: int = 0
    repeats: int = 0
    reminders: int = 0
    model_calls: int = 0
    agents_done: int = 0
    agents_total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self) -> tuple[int, int, int, int, int]:
        with self._lock:
            return self.calls, self.repeats, self.reminders, self.agents_done, self.agents_total

    def details(self) -> tuple[int, int]:
        """Excluded tool calls and model calls so far."""
        with self._lock:
            return self.excluded, self.model_calls


class _CountingProcessor(SpanProcessor):
    """Counts tool spans, model calls and the guard's events on them, for the progress display."""

    def __init__(self, counts: Counts, config: GuardConfig) -> None:
        self._counts = counts
        self._tracked = ToolFilter(config.include, config.exclude)
        self._router = SpanRouter(DEFAULT_CONVENTIONS)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = dict(span.attributes or {})
        call = find_tool_call(DEFAULT_CONVENTIONS, span.name, attributes, span.events)
        if call is None:
            if self._router.route(span.name, attributes) & self._router.model_bits:
                with self._counts._lock:  # noqa: SLF001 - Counts is this module's own record
                    self._counts.model_calls += 1
            return
        names = [event.name for event in span.events]
        with self._counts._lock:  # noqa: SLF001
            self._counts.calls += 1
            self._counts.excluded += not self._tracked[call.tool_name]
            self._counts.repeats += REPEAT_EVENT in names
            self._counts.reminders += REMINDER_EVENT in names


class _DemoExporter(SQLiteSpanExporter):
    def _claim(self, conn: sqlite3.Connection) -> None:
        """The demo's own calls: the store stays the demo's, and a new demo run may empty it."""


def critical_path_ms(scripts: Sequence[AgentScript]) -> int:
    """Scripted time of the longest agent, counting its subagents' calls as if sequential."""

    def step_ms(step: Call | Subagent) -> int:
        calls = (step,) if isinstance(step, Call) else step.calls
        return sum(call.duration_ms + MODEL_LATENCY_MS for call in calls)

    return max(
        (sum(step_ms(s) + MODEL_LATENCY_MS for p in script.prompts for s in p.steps) for script in scripts), default=0
    )


class _Clock:
    """An agent run's simulated time: each call starts where the one before ended (sleeping ``scale`` of it)."""

    def __init__(self, start_ns: int, scale: float) -> None:
        self.now_ns = start_ns
        self._scale = scale

    def advance(self, ms: int) -> tuple[int, int]:
        start = self.now_ns
        if self._scale > 0:
            time.sleep(ms / 1000 * self._scale)
        self.now_ns += ms * 1_000_000
        return start, self.now_ns


class _Agents:
    """Executes scripts; one instance per demo run."""

    def __init__(
        self,
        tracers: dict[str, trace.Tracer],
        guards: dict[str, RepeatGuardSpanProcessor],
        scale: float,
        counts: Counts,
    ) -> None:
        self._tracers = tracers
        self._guards = guards
        self._scale = scale
        self._counts = counts

    def run_agent(self, script: AgentScript) -> None:
        tracer = self._tracers[script.service]
        clock = _Clock(time.time_ns(), self._scale)
        for prompt in script.prompts:
            if script.explicit_id is not None:
                self._guards[script.service].reset(script.explicit_id)  # a new user prompt
            self._run_prompt(tracer, script, prompt, clock)
        with self._counts._lock:  # noqa: SLF001
            self._counts.agents_done += 1

    def _run_prompt(self, tracer: trace.Tracer, script: AgentScript, prompt: Prompt, clock: _Clock) -> None:
        span = tracer.start_span(
            f"invoke_agent {script.name}",
            start_time=clock.now_ns,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": script.name},
        )
        context = trace.set_span_in_context(span)
        threads: list[threading.Thread] = []
        turn = 0
        for step in prompt.steps:
            if isinstance(step, Subagent):
                worker = threading.Thread(
                    target=self._run_subagent,
                    args=(tracer, context, step, script, _Clock(clock.now_ns, self._scale)),
                    name=step.name,
                    daemon=True,
                )
                worker.start()
                threads.append(worker)
            else:
                self._model_call(tracer, context, script, script.model, turn, step, clock)
                turn += 1
                self._call(tracer, context, step, script, clock)
        for worker in threads:
            worker.join()
        self._model_call(tracer, context, script, script.model, turn, None, clock)  # the answer
        span.end(end_time=clock.now_ns)

    def _run_subagent(
        self, tracer: trace.Tracer, parent: Context, subagent: Subagent, script: AgentScript, clock: _Clock
    ) -> None:
        span = tracer.start_span(
            f"invoke_agent {subagent.name}",
            context=parent,
            start_time=clock.now_ns,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": subagent.name},
        )
        context = trace.set_span_in_context(span)
        model = subagent.model or script.model
        for turn, call in enumerate(subagent.calls):
            self._model_call(tracer, context, script, model, turn, call, clock, explicit=False)
            self._call(tracer, context, call, None, clock)
        self._model_call(tracer, context, script, model, len(subagent.calls), None, clock, explicit=False)
        span.end(end_time=clock.now_ns)

    def _model_call(  # noqa: PLR0913, PLR0917 - one scripted model call's parts, by name
        self,
        tracer: trace.Tracer,
        context: Context,
        script: AgentScript,
        model: Model,
        turn: int,
        call: Call | None,
        clock: _Clock,
        *,
        explicit: bool = True,
    ) -> None:
        """The model call that asks for ``call`` (None: the final answer), as a GenAI ``chat`` span."""
        input_tokens, output_tokens = model_tokens(turn, call)
        start, end = clock.advance(MODEL_LATENCY_MS)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": model.provider,
            "gen_ai.request.model": model.name,
            "gen_ai.response.model": model.name,
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.response.finish_reasons": ("stop",) if call is None else ("tool_calls",),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": model_output(call)}]}]
            ),
        }
        if script.conversation is not None:
            attributes["gen_ai.conversation.id"] = script.conversation
        if explicit and script.explicit_id is not None:
            attributes["gen_ai.agent.id"] = script.explicit_id
            attributes["gen_ai.agent.name"] = script.name
        tracer.start_span(f"chat {model.name}", context=context, start_time=start, attributes=attributes).end(
            end_time=end
        )

    def _call(
        self, tracer: trace.Tracer, context: Context, call: Call, script: AgentScript | None, clock: _Clock
    ) -> None:
        start = clock.now_ns
        span = tracer.start_span(
            f"execute_tool {call.tool}",
            context=context,
            start_time=start,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool},
        )
        if script is not None and script.explicit_id is not None:
            span.set_attribute("gen_ai.agent.id", script.explicit_id)
            span.set_attribute("gen_ai.agent.name", script.name)
        # Instrumentations record the arguments (and the outcome) after the span starts, if at all.
        if call.recorded:
            span.set_attribute("gen_ai.tool.call.arguments", call.arguments)
        _, end = clock.advance(call.duration_ms)
        if call.denied:
            span.set_attribute("error.type", "permission_denied")
            span.set_status(Status(StatusCode.ERROR, "denied by the sandbox policy"))
        span.end(end_time=end)  # the scripted (simulated) latency


def run_scenario(  # noqa: PLR0913 - keyword options
    scripts: Sequence[AgentScript],
    db_path: str | Path,
    *,
    seconds: float = 0.0,
    config: GuardConfig | None = None,
    on_reminder: ReminderSink | None = None,
    counts: Counts | None = None,
    store_arguments: bool = True,
    extra_exporters: Callable[[], Sequence[SpanExporter]] | None = None,
    meter_provider: MeterProvider | None = None,
    logger_provider: LoggerProvider | None = None,
) -> Counts:
    """Run every script to completion and flush the store; returns the final counts.

    ``seconds`` paces the run: tool calls sleep their scripted latency, scaled so that the
    longest agent finishes within about that many seconds (0 runs flat out).
    ``extra_exporters`` makes further exporters for each agent service's provider (the
    compose stack's demo agent adds OTLP to the Collector this way); ``meter_provider`` receives
    the guard's metrics (default: the global one), ``logger_provider`` its log events (default: the global
    one). One guard serves every service's provider: its
    instruments are registered once, so its metrics count every agent.

    Each agent run keeps a simulated clock: a call starts where the one before it ended, so the
    timestamps tell each run's story in order, whatever the pacing.
    """
    config = GuardConfig() if config is None else config
    counts = Counts() if counts is None else counts
    counts.agents_total = len(scripts)
    critical = critical_path_ms(scripts)
    scale = 0.0 if seconds <= 0 or critical == 0 else min(1.0, seconds * 1000 / critical * 0.9)
    providers: list[TracerProvider] = []
    tracers: dict[str, trace.Tracer] = {}
    guard = RepeatGuardSpanProcessor(
        config, on_reminder, meter_provider=meter_provider, record_facts=True, logger_provider=logger_provider
    )
    guards: dict[str, RepeatGuardSpanProcessor] = {}
    for service in dict.fromkeys(script.service for script in scripts):
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(guard)
        provider.add_span_processor(_CountingProcessor(counts, config))
        exporter = _DemoExporter(db_path, config=config, store_arguments=store_arguments)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
        for extra in extra_exporters() if extra_exporters is not None else ():
            provider.add_span_processor(BatchSpanProcessor(extra, schedule_delay_millis=200))
        providers.append(provider)
        tracers[service] = provider.get_tracer("otel_repeat_guard.demo")
        guards[service] = guard
    agents = _Agents(tracers, guards, scale, counts)
    threads = [threading.Thread(target=agents.run_agent, args=(s,), name=s.name, daemon=True) for s in scripts]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for provider in providers:
            provider.force_flush()
            provider.shutdown()
    return counts
