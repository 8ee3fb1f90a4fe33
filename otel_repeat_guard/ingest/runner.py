"""``otel-repeat-guard ingest``: Collector output into the store, record by record, never aborting on bad input."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.config import GuardConfig
from otel_repeat_guard.ingest.framing import Record
from otel_repeat_guard.ingest.otlp_json import MalformedRecord, decode_line
from otel_repeat_guard.ingest.progress import Progress
from otel_repeat_guard.ingest.replay import Replayer
from otel_repeat_guard.ingest.source import FileSource
from otel_repeat_guard.ingest.store_writer import StoreWriter

MAX_REPORTED = 100  # malformed records shown one by one; the rest are only counted


@dataclass
class IngestStats:
    """What one ingest did."""

    records: int = 0
    malformed: int = 0
    spans: int = 0
    new_spans: int = 0
    duplicate_spans: int = 0
    replayed_traces: int = 0
    guarded_traces: int = 0
    dropped_spans: int = 0

    def summary(self) -> str:
        text = (
            f"{self.records:,} records, {self.spans:,} spans: {self.new_spans:,} new, "
            f"{self.duplicate_spans:,} already stored; {self.malformed:,} malformed records skipped"
        )
        if self.dropped_spans:
            text += f"; {self.dropped_spans:,} spans the store cannot hold skipped"
        if self.replayed_traces or self.guarded_traces:
            text += (
                f"; replayed {self.replayed_traces:,} traces through the guard"
                f" ({self.guarded_traces:,} already had guard events)"
            )
        return text


@dataclass
class IngestOptions:
    follow: bool = False
    replay: bool = False
    store_arguments: bool = True
    poll_seconds: float = 0.5
    replay_idle_seconds: float = 30.0
    config: GuardConfig | None = None


class Ingest:
    """Reads one file (optionally following it) into the store at ``db``."""

    def __init__(
        self,
        path: str | Path,
        db: str | Path,
        options: IngestOptions | None = None,
        *,
        errors: TextIO | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        on_batch: Callable[[IngestStats], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.options = options or IngestOptions()
        self.stats = IngestStats()
        self.stop = stop or threading.Event()
        self._errors = sys.stderr if errors is None else errors
        self._reported = 0
        self._progress = progress
        self._on_batch = on_batch
        config = self.options.config or GuardConfig.from_env()
        self._writer = StoreWriter(db, config=config, store_arguments=self.options.store_arguments)
        self._replayer = (
            Replayer(config, idle_seconds=self.options.replay_idle_seconds) if self.options.replay else None
        )

    def run(self) -> IngestStats:
        """Ingest until the end of the file, or with ``follow`` until ``stop`` is set."""
        source = FileSource(
            self.path, follow=self.options.follow, poll_seconds=self.options.poll_seconds, stop=self.stop
        )
        try:
            for chunk in source.chunks():
                spans = self._decode(chunk.records)
                if self._replayer is not None:
                    spans = self._replayer.add(spans)
                    if not chunk.records:  # idle while following: finish traces whose root never came
                        spans += self._replayer.flush_idle()
                self._write(spans)
                if self._progress is not None:
                    self._progress.update(str(self.path), chunk.offset, chunk.size, self._status())
            if self._replayer is not None:
                self._write(self._replayer.flush())
        finally:
            self._writer.close()
            if self._progress is not None:
                self._progress.close()
        return self.stats

    def _decode(self, records: list[Record]) -> list[ReadableSpan]:
        spans: list[ReadableSpan] = []
        for record in records:
            self.stats.records += 1
            if record.data is None:
                self._malformed(record.number, record.error or "unreadable record")
                continue
            try:
                decoded = decode_line(record.data)
            except MalformedRecord as exc:
                self._malformed(record.number, str(exc))
                continue
            self.stats.spans += len(decoded)
            spans.extend(decoded)
        return spans

    def _write(self, spans: list[ReadableSpan]) -> None:
        if spans:
            new, duplicate, dropped = self._writer.write(spans)
            self.stats.new_spans += new
            self.stats.duplicate_spans += duplicate
            for problem in dropped:
                self.stats.dropped_spans += 1
                self._report(f"{self.path}: skipped span {_shorten(problem)}")
        if self._replayer is not None:
            self.stats.replayed_traces = self._replayer.replayed_traces
            self.stats.guarded_traces = self._replayer.guarded_traces
        if self._on_batch is not None:
            self._on_batch(self.stats)

    def _malformed(self, number: int, reason: str) -> None:
        self.stats.malformed += 1
        self._report(f"{self.path}:{number}: skipped malformed record: {_shorten(reason)}")

    def _report(self, line: str) -> None:
        """One problem line on stderr; past MAX_REPORTED they are only counted."""
        self._reported += 1
        if self._reported <= MAX_REPORTED:
            self._errors.write(line + "\n")
        elif self._reported == MAX_REPORTED + 1:
            self._errors.write(f"{self.path}: more skipped records and spans; they are counted, not shown\n")
        self._errors.flush()

    def _status(self) -> str:
        return f"{self.stats.spans:,} spans ({self.stats.new_spans:,} new), {self.stats.malformed:,} malformed"


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
