"""Real guard spans with every kind of detection, exported into a store: agents that cycle, make no
progress, ask for the same call twice in one step, and repeat inside a cycle. Shared by the store's and the
dashboard's tests."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.store import SQLiteSpanExporter

CONFIG = GuardConfig(thresholds=(2,), cycle_thresholds=(2, 3), no_progress_thresholds=(3,), collapse_parallel=True)
MODEL = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 1000,
    "gen_ai.usage.output_tokens": 100,
}
CYCLE = (("read_file", {"path": "app.py"}), ("edit_file", {"path": "app.py", "patch": "<b>fix</b>"}))


class LoopAgent:
    """A TracerProvider with the guard (``CONFIG``) and a SQLiteSpanExporter, exporting each span as it ends."""

    def __init__(self, db: Path, config: GuardConfig = CONFIG, *, facts: bool = True) -> None:
        """``facts=False``: the guard records none of its facts, so the store reads the spans as an older guard's."""
        self.reminders: list[Reminder] = []
        self.provider = TracerProvider(resource=Resource.create({"service.name": "loop-lab"}))
        self.provider.add_span_processor(RepeatGuardSpanProcessor(config, self.reminders.append, record_facts=facts))
        self.exporter = SQLiteSpanExporter(db, config=config)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("loop-lab")

    def run(self, name: str) -> trace.Span:
        return self.tracer.start_span(
            f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        )

    def model(self, run: trace.Span) -> None:
        self.tracer.start_span("chat gpt-4o-mini", context=trace.set_span_in_context(run), attributes=MODEL).end()

    def tool_span(self, parent: trace.Span, tool: str, arguments: object, result: str | None = None) -> trace.Span:
        span = self.tracer.start_span(f"execute_tool {tool}", context=trace.set_span_in_context(parent))
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": json.dumps(arguments),
            }
        )
        if result is not None:
            span.set_attribute("gen_ai.tool.call.result", result)
        return span

    def call(self, run: trace.Span, tool: str, arguments: object, result: str | None = None) -> None:
        """A model call, then the tool call it asked for."""
        self.model(run)
        self.tool_span(run, tool, arguments, result).end()

    def close(self) -> None:
        self.provider.shutdown()


def cycler(agent: LoopAgent) -> None:
    """read, edit, read, edit, read, edit: a cycle of period 2, its copies complete at calls 4 and 6."""
    run = agent.run("cycler")
    for tool, arguments in CYCLE * 3:
        agent.call(run, tool, arguments)
    run.end()


def searcher(agent: LoopAgent) -> None:
    """grep with four different patterns, all "no matches": no progress from the second call on."""
    run = agent.run("searcher")
    for pattern in ("TODO", "todo", "To-Do", "TODO:"):
        agent.call(run, "grep", {"pattern": pattern}, "no matches")
    run.end()


def parallel(agent: LoopAgent) -> None:
    """One model step asks for the same search twice at once: the second copy is a parallel duplicate."""
    run = agent.run("parallel")
    agent.model(run)
    spans = [agent.tool_span(run, "web_search", {"q": "otel"}) for _ in range(2)]  # same parent, overlapping
    for span in spans:
        span.end()
    run.end()


def repeat_in_cycle(agent: LoopAgent) -> None:
    """ls, cat, cat three times: cat repeats (reminded at 2 each time) inside a cycle of period 3 whose
    copies complete at calls 6 and 9, so calls 6 and 9 carry a repeat and a cycle reminder."""
    run = agent.run("mixer")
    for _ in range(3):
        agent.call(run, "ls", {"d": "."})
        agent.call(run, "cat", {"f": "x"})
        agent.call(run, "cat", {"f": "x"})
    run.end()


def every_kind(db: Path) -> LoopAgent:
    """A store holding each scenario above; the agent (closed) keeps the reminders the guard gave."""
    agent = LoopAgent(db)
    for scenario in (cycler, searcher, parallel, repeat_in_cycle):
        scenario(agent)
    agent.close()
    return agent


def upgraded_from(db: Path, version: int, *statements: str) -> None:
    """Turn ``db`` into a store of schema ``version`` (``statements`` undo what later versions added), then
    upgrade it as a writer would, once (a second upgrade finds nothing to do)."""
    from otel_repeat_guard.store.schema import upgrade

    with sqlite3.connect(db) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute("UPDATE repeat_guard_schema SET version = ?", (version,))
        conn.execute(f"PRAGMA user_version = {int(version)}")
    assert upgrade(db) == version
    assert upgrade(db) is None
