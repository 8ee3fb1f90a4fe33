"""``otel-repeat-guard doctor``: can the guard see the loops in these spans, and if not, why not?

The spans (collector OTLP JSON files, or any ``ReadableSpan``s) are played through a real
guard, in the order the SDK would have seen them live, so the answer is the guard's own:
the same conventions, run resolution, joins and rules (see :class:`CallAudit`). For each
instrumentation scope and tool it reports how many tool calls it recognised, where their
arguments came from, how their agent runs were resolved, and each blind spot with the
setting that fixes it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_repeat_guard.conventions import DEFAULT_CONVENTIONS, Convention
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.decide.blind_spots import CallAudit, explain, fix_for
from otel_repeat_guard.processor import RepeatGuardSpanProcessor
from otel_repeat_guard.spans.playback import play


@dataclass(frozen=True)
class BlindSpot:
    scope: str
    tool: str
    reason: str
    calls: int
    fix: str

    @property
    def why(self) -> str:
        return explain(self.reason)


@dataclass
class ToolReport:
    """What the guard saw of one tool, from one instrumentation scope."""

    scope: str
    tool: str
    calls: int = 0
    arguments_from: Counter[str] = field(default_factory=Counter)
    runs_from: Counter[str] = field(default_factory=Counter)
    blind: Counter[str] = field(default_factory=Counter)


@dataclass
class Report:
    tools: list[ToolReport]
    spans: int

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tools)

    @property
    def blind_spots(self) -> list[BlindSpot]:
        return [
            BlindSpot(t.scope, t.tool, reason, n, fix_for(reason, t.scope))
            for t in self.tools
            for reason, n in sorted(t.blind.items())
        ]

    @property
    def exit_code(self) -> int:
        """0 when every recognised call is comparable, else 1."""
        return 1 if self.blind_spots else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "tool_calls": self.calls,
            "tools": [
                {
                    "scope": t.scope,
                    "tool": t.tool,
                    "calls": t.calls,
                    "arguments_from": dict(t.arguments_from),
                    "runs_from": dict(t.runs_from),
                }
                for t in self.tools
            ],
            "blind_spots": [
                {"scope": b.scope, "tool": b.tool, "reason": b.reason, "calls": b.calls, "why": b.why, "fix": b.fix}
                for b in self.blind_spots
            ],
            "ok": self.exit_code == 0,
        }

    def as_text(self) -> str:
        lines = [f"{self.spans:,} spans, {self.calls:,} tool calls recognised"]
        if not self.tools:
            lines.append("no tool calls recognised: are these spans from an instrumented agent runtime?")
        for scope in dict.fromkeys(t.scope for t in self.tools):
            lines.append(f"\nscope {scope or '(unnamed)'}")
            for t in (t for t in self.tools if t.scope == scope):
                lines.append(
                    f"  {t.tool}: {t.calls:,} calls; arguments from {_counts(t.arguments_from)}; "
                    f"agent runs from {_counts(t.runs_from)}"
                )
        spots = self.blind_spots
        if spots:
            lines.append(f"\n{len(spots)} blind spot(s): these calls are counted but cannot be compared")
            for b in spots:
                lines.append(f"  {b.scope or '(unnamed)'} / {b.tool}: {b.calls:,} calls, {b.reason}: {b.why}")
                lines.append(f"    fix: {b.fix}")
        else:
            lines.append("\nevery recognised tool call can be compared")
        return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in counter.most_common()) or "-"


def diagnose(
    spans: Iterable[ReadableSpan],
    *,
    config: GuardConfig | None = None,
    conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
) -> Report:
    """Play ``spans`` through a guard and report how it saw each recognised tool call."""
    spans = list(spans)
    audits: list[CallAudit] = []
    guard = RepeatGuardSpanProcessor(
        config,
        meter_provider=NoOpMeterProvider(),
        conventions=conventions,
        downstream=[_Discard()],
        audit=audits.append,
    )
    play(guard, spans)
    by_tool: dict[tuple[str, str], ToolReport] = {}
    for audit in audits:
        report = by_tool.get((audit.scope, audit.tool))
        if report is None:
            report = by_tool[(audit.scope, audit.tool)] = ToolReport(audit.scope, audit.tool)
        report.calls += 1
        report.arguments_from[audit.arguments_from] += 1
        report.runs_from[audit.run_from] += 1
        if audit.reason is not None:
            report.blind[audit.reason] += 1
    return Report(sorted(by_tool.values(), key=lambda t: (t.scope, t.tool)), len(spans))


@dataclass(frozen=True)
class CollectorFiles:
    """What collector files held: their spans, one line per record that could not be read, and how many
    records were OTLP trace requests (none: the input is not collector trace output)."""

    spans: list[ReadableSpan]
    problems: list[str]
    requests: int


def read_files(paths: Sequence[Path]) -> CollectorFiles:
    """The spans in collector OTLP JSON files (plain, or zstd as the file exporter writes them)."""
    from otel_repeat_guard.ingest.log_records import is_logs_document  # noqa: PLC0415
    from otel_repeat_guard.ingest.otlp_json import MalformedRecord, decode_record  # noqa: PLC0415
    from otel_repeat_guard.ingest.source import FileSource  # noqa: PLC0415

    spans: list[ReadableSpan] = []
    problems: list[str] = []
    requests = 0
    for path in paths:
        for chunk in FileSource(path, follow=False).chunks():
            for record in chunk.records:
                if record.data is None:
                    problems.append(f"{path}:{record.number}: {record.error or 'unreadable record'}")
                    continue
                if is_logs_document(record.data):  # log records: the guard decides again here, from the spans
                    continue
                try:
                    decoded = decode_record(record.data)
                except MalformedRecord as exc:
                    problems.append(f"{path}:{record.number}: {exc}")
                    continue
                spans.extend(decoded.spans)
                problems.extend(f"{path}:{record.number}: skipped {reason}" for reason in decoded.skipped)
                problems.extend(f"{path}:{record.number}: dropped {reason}" for reason in decoded.dropped)
                requests += 1
    return CollectorFiles(spans, problems, requests)


def render(report: Report, as_json: bool) -> str:
    return json.dumps(report.as_json(), indent=2) if as_json else report.as_text()


class _Discard(SpanProcessor):
    """The guard in wrapping mode hands spans on; the doctor only wants its audit."""
