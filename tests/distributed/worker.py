"""A worker process, as a Temporal activity worker or a job-queue consumer is: run by path, JSON lines on stdin.

Each request carries the W3C headers (``traceparent``, ``baggage``) the agent process injected and
one tool call; the worker extracts the context, runs the call as a tool span under it (inside an
``activity`` span, or directly), and answers with the run length and events the guard put on the
span. The guard's configuration comes from the environment (``OTEL_REPEAT_GUARD_STORE``), its
reminders go to the shared inbox. ``{"stats": true}`` answers the store failures counted here.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor
from otel_repeat_guard.decide.inbox import RedisReminderInbox
from otel_repeat_guard.state.connection import failure_counter

PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def main() -> None:
    config = GuardConfig.from_env()
    inbox = RedisReminderInbox.from_config(config)
    guard = RepeatGuardSpanProcessor(config, inbox.put)
    provider = TracerProvider()
    provider.add_span_processor(guard)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.distributed.worker")
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("stats"):
            answer: dict[str, Any] = {"failures": failure_counter().total()}
        else:
            exporter.clear()
            context = PROPAGATOR.extract(request["headers"])
            tool = request["tool"]
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": request["arguments"],
            }
            if request.get("activity", True):
                activity = tracer.start_as_current_span("RunActivity:tool", context=context, kind=SpanKind.SERVER)
                with activity, tracer.start_as_current_span(f"execute_tool {tool}") as span:
                    span.set_attributes(attributes)
            else:
                with tracer.start_as_current_span(f"execute_tool {tool}", context=context) as span:
                    span.set_attributes(attributes)
            (ended,) = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
            events = [[event.name, dict(event.attributes or {})] for event in ended.events]
            lengths = [a["repeat_tool_guard.run_length"] for name, a in events if name == "repeat_tool_guard.repeat"]
            answer = {"run_length": lengths[0] if lengths else 1, "events": events}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
