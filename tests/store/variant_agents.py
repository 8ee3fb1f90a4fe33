"""A wording experiment's spans: agent runs under ``reminder_variants=("seed", "redirect")`` whose loops are
scripted, so every figure of the by-variant table is known from the script and the variants the guard drew.

Run ``i`` calls ``read_file`` with the same arguments ``LENGTHS[i % len(LENGTHS)]`` times, each call asked for by
a model call of ``TOKENS`` tokens (the model alternates between two), then, on most runs, one different call
(the loop is broken), and ends. Shared by the store's, the dashboard's and the ClickHouse reader's tests.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_repeat_guard import GuardConfig, Reminder, RepeatGuardSpanProcessor
from otel_repeat_guard.core.experiments import VariantCounts
from otel_repeat_guard.store import SQLiteSpanExporter

CONFIG = GuardConfig(reminder_variants=("seed", "redirect"))
LENGTHS = (3, 4, 6, 9, 2, 5, 8, 3, 7)
MODELS = ("gpt-4o-mini", "claude-sonnet-4-5")
INPUT, OUTPUT = 1000, 100
TOKENS = INPUT + OUTPUT
_IDS = itertools.count()


@dataclass(frozen=True)
class Scripted:
    """One run as scripted: its key (the guard's), the variant it drew, its model, its loop's length and whether
    a different call broke it."""

    key: str
    variant: str
    model: str
    length: int
    broken: bool


def _chat(tracer: trace.Tracer, run: trace.Span, model: str, asked: tuple[str, str, object] | None = None) -> None:
    """A model call; ``asked``: the tool call (id, tool, arguments) it asked for, as its output message says."""
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": INPUT,
        "gen_ai.usage.output_tokens": OUTPUT,
    }
    if asked is not None:
        part = {"type": "tool_call", "id": asked[0], "name": asked[1], "arguments": asked[2]}
        attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [part]}])
    tracer.start_span(f"chat {model}", context=trace.set_span_in_context(run), attributes=attributes).end()


def _call(tracer: trace.Tracer, run: trace.Span, model: str, tool: str, arguments: object) -> None:
    """A model call asking for a tool call, then the tool call."""
    call_id = f"call-{next(_IDS)}"
    _chat(tracer, run, model, (call_id, tool, arguments))
    attributes = {
        "gen_ai.tool.call.id": call_id,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(arguments),
    }
    tracer.start_span(f"execute_tool {tool}", context=trace.set_span_in_context(run), attributes=attributes).end()


def experiment(db: Path, runs: int = 60) -> tuple[list[Scripted], list[ReadableSpan], list[Reminder]]:
    """``runs`` scripted runs through the guard into the store at ``db``; the script, the spans (as the Collector
    gets them) and the reminders the guard gave."""
    reminders: list[Reminder] = []
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "wording-lab"}))
    provider.add_span_processor(RepeatGuardSpanProcessor(CONFIG, reminders.append, record_facts=True))
    exporter = SQLiteSpanExporter(db, config=CONFIG)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("wording-lab")
    script: list[tuple[int, str, int, bool]] = []
    for i in range(runs):
        model, length, broken = MODELS[i % 2], LENGTHS[i % len(LENGTHS)], i % 5 != 0
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{i}"}
        run = tracer.start_span(f"invoke_agent agent-{i}", attributes=attributes)
        before = len(reminders)
        for _ in range(length):
            _call(tracer, run, model, "read_file", {"path": f"r{i}.txt"})
        if broken:
            _call(tracer, run, model, "write_file", {"path": f"r{i}.txt", "text": "done"})
        _chat(tracer, run, model)  # the answer
        run.end()
        script.append((before, model, length, broken))
    provider.shutdown()
    scripted = []
    for before, model, length, broken in script:
        mine = reminders[before : before + 1]
        key, variant = (mine[0].agent_id, mine[0].variant or "") if mine else ("", "")
        scripted.append(Scripted(key, variant, model, length, broken))
    return scripted, list(memory.get_finished_spans()), reminders


def expected(scripted: list[Scripted], thresholds: tuple[int, ...] = CONFIG.thresholds) -> list[VariantCounts]:
    """The by-variant counts the script implies: a reminder at each threshold its loop reached, ignored when the
    loop went on after it, broken when a different call came next; the loop's calls after its first reminder;
    and the tokens of the model calls that asked for them."""
    counts: dict[tuple[str, str], list[int]] = {}
    for run in scripted:
        fired = [t for t in thresholds if t <= run.length]
        if not fired:
            continue
        row = counts.setdefault((run.variant, run.model), [0, 0, 0, 0, 0, 0])
        row[0] += len(fired)
        row[1] += sum(1 for t in fired if t == run.length and run.broken)  # broken
        row[2] += sum(1 for t in fired if t < run.length)  # ignored
        row[3] += 1
        row[4] += run.length - fired[0]
        row[5] += (run.length - fired[0]) * TOKENS
    return [VariantCounts(v, m, *c) for (v, m), c in sorted(counts.items())]
