"""``otel-repeat-guard ingest``: Collector output into the store, record by record, never aborting on bad input.

The input is a file of the Collector's file exporter, or any other :class:`~otel_repeat_guard.ingest.spans.SpanSource`
(the Collector's ClickHouse table: ``otel_repeat_guard/clickhouse/spans.py``); replay, the store, the counts and
the problem lines are the same for both."""

from __future__ import annotations

import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.ingest.framing import Record
from otel_repeat_guard.ingest.log_records import LogJoin, decode_logs_record, is_logs_document
from otel_repeat_guard.ingest.otlp_json import MalformedRecord, decode_record
from otel_repeat_guard.ingest.progress import Progress
from otel_repeat_guard.ingest.replay import Replayer
from otel_repeat_guard.ingest.source import FileSource
from otel_repeat_guard.ingest.spans import SpanSource
from otel_repeat_guard.ingest.store_writer import StoreWriter

MAX_REPORTED = 100  # malformed records shown one by one; the rest are only counted


class NoTraceRecords(ValueError):
    """The input held records but not one OTLP trace request: not collector output (text, binary, logs)."""


@dataclass
class IngestStats:
    """What one ingest did."""

    records: int = 0
    requests: int = 0  # records that were OTLP trace requests
    malformed: int = 0
    malformed_spans: int = 0  # spans of a request that could not be read, the rest of it kept
    malformed_values: int = 0  # attributes, events and links that could not be read, their spans kept
    spans: int = 0
    new_spans: int = 0
    duplicate_spans: int = 0
    unstored_spans: int = 0  # spans with no tool call, model call or agent run: nothing to store
    replayed_traces: int = 0
    guarded_traces: int = 0
    dropped_spans: int = 0
    losses: int = 0  # data the follower could not read (a truncation with no copy, a rotated file gone)
    lost_bytes: int = 0  # of it, the bytes known to have been written and never read
    log_records: int = 0  # records that were OTLP logs requests (ingest/log_records.py)
    log_events: int = 0  # the guard's log events put back on their spans

    def summary(self) -> str:
        text = (
            f"{self.records:,} records, {self.spans:,} spans: {self.new_spans:,} new, "
            f"{self.duplicate_spans:,} already stored"
        )
        if self.unstored_spans:
            text += f", {self.unstored_spans:,} with no tool call, model call or agent run to store"
        text += f"; {self.malformed:,} malformed records skipped"
        if self.malformed_spans:
            text += f"; {self.malformed_spans:,} malformed spans skipped"
        if self.malformed_values:
            text += f"; {self.malformed_values:,} malformed values dropped, their spans kept"
        if self.dropped_spans:
            text += f"; {self.dropped_spans:,} spans the store cannot hold skipped"
        if self.losses:
            text += (
                f"; {self.losses:,} unrecoverable gaps in the input (a truncation with no copy, or a rotated"
                f" file gone), {self.lost_bytes:,} bytes known lost"
            )
        if self.log_records:
            text += f"; {self.log_records:,} log records, {self.log_events:,} guard log events put on their spans"
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
    """Reads one file (optionally following it), or another span source, into the store at ``db``."""

    def __init__(  # noqa: PLR0913 - keyword options
        self,
        path: str | Path | SpanSource,
        db: str | Path,
        options: IngestOptions | None = None,
        *,
        errors: TextIO | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        on_batch: Callable[[IngestStats], None] | None = None,
    ) -> None:
        self._source = None if isinstance(path, str | Path) else path
        self.path = Path(path if isinstance(path, str | Path) else path.name)  # what problem lines name
        self.name = str(path) if isinstance(path, str | Path) else path.name  # what the summary names
        self.options = options or IngestOptions()
        self.stats = IngestStats()
        self.stop = stop or threading.Event()
        self._errors = sys.stderr if errors is None else errors
        self._reported = 0
        self._held: list[str] | None = None if self.options.follow else []  # see _report
        self._first_problem: str | None = None
        self._progress = progress
        self._on_batch = on_batch
        self._db = Path(db)
        self._config = self.options.config or GuardConfig.from_env()
        # Made with the first spans, so input that has none makes no store; when following, made at
        # once, so a dashboard started beside ``ingest --follow`` finds its store before the first trace.
        self._writer: StoreWriter | None = None
        # the guard's log events back on their spans: a file's log records (a table source joins its own)
        self._join = LogJoin(hold=not self.options.follow and self._source is None)
        self._replayer = (
            Replayer(self._config, idle_seconds=self.options.replay_idle_seconds) if self.options.replay else None
        )

    def run(self) -> IngestStats:
        """Ingest until the end of the file, or with ``follow`` until ``stop`` is set.

        Raises :class:`NoTraceRecords` (having created no store) when the whole input, read once,
        held records and not one of them was an OTLP trace request."""
        steps = self._from_file() if self._source is None else self._from_source(self._source)
        if self.options.follow:
            self._open_writer()
        last: tuple[str, int, int] | None = None
        try:
            for found, idle, where in steps:
                read = self._join.spans(found, time.monotonic())
                if self.options.follow:
                    read += self._join.due(time.monotonic())
                spans = read if self._replayer is None else self._replayer.add(read)
                if idle and self._replayer is not None:  # idle while following: finish traces whose root never came
                    spans += self._replayer.flush_idle()
                self._write(spans)
                if self._progress is not None and where is not None:
                    self._progress.update(*where, self._status())
                    last = where
            held = self._join.flush()
            if self._replayer is not None:
                self._write(self._replayer.add(held) + self._replayer.flush())
            else:
                self._write(held)
            if held and self._progress is not None and last is not None:  # what was held is written now
                self._progress.update(*last, self._status())
        finally:
            if self._writer is not None:
                self._writer.close()
            if self._progress is not None:
                self._progress.close()
        if self.stats.records and not self.stats.requests and not self.options.follow:
            raise NoTraceRecords(
                f"{self.name} holds no OTLP trace record: none of its {self.stats.records:,} records is an "
                f"ExportTraceServiceRequest in OTLP JSON (first: {self._first_problem}); no store was written"
            )
        return self.stats

    def _from_file(self) -> Iterator[tuple[list[ReadableSpan], bool, tuple[str, int, int] | None]]:
        """The file's spans, a chunk at a time: (spans, idle while following, where reading stands or None)."""
        source = FileSource(
            self.path, follow=self.options.follow, poll_seconds=self.options.poll_seconds, stop=self.stop
        )
        history_said = False
        for chunk in source.chunks():
            if source.history and not history_said:  # said once, as following begins
                self._say_history(source.history)
                history_said = True
            for loss in chunk.losses:
                self.stats.losses += 1
                self.stats.lost_bytes += loss.bytes
                self._report(_shorten(loss.what))  # it names the file
            spans = self._decode(chunk.path, chunk.records)
            shown = None if self._held is not None else (str(chunk.path), chunk.offset, chunk.size)
            yield spans, not chunk.records, shown

    def _say_history(self, history: list[Path]) -> None:
        """The rotated files there before following began are not read; said once, with how to read them."""
        names = " ".join(shlex.quote(str(path)) for path in history[:3]) + (" ..." if len(history) > 3 else "")
        self._errors.write(
            f"{self.path}: {len(history):,} rotated file(s) beside it, there before following began, are not read "
            f"(read them once: otel-repeat-guard ingest --db {shlex.quote(str(self._db))} {names})\n"
        )
        self._errors.flush()

    def _from_source(self, source: SpanSource) -> Iterator[tuple[list[ReadableSpan], bool, tuple[str, int, int]]]:
        """A span source's spans, a batch at a time (each of its records a span: problems are malformed records)."""
        self._held = None  # a source's records are spans: nothing to hold back
        for batch in source.batches():
            self.stats.records += batch.records
            self.stats.requests += batch.records - len(batch.problems)
            self.stats.spans += len(batch.spans)
            for where, reason in batch.problems:
                self.stats.malformed += 1
                self._first_problem = self._first_problem or f"{where}: {_shorten(reason, 120)}"
                self._report(f"{where}: skipped: {_shorten(reason)}")
            yield batch.spans, batch.idle, (source.name, batch.offset, batch.size)

    def _decode(self, path: Path, records: list[Record]) -> list[ReadableSpan]:
        spans: list[ReadableSpan] = []
        for record in records:
            self.stats.records += 1
            if record.data is None:
                self._malformed(path, record.number, record.error or "unreadable record")
                continue
            if is_logs_document(record.data):
                self._logs(path, record)
                continue
            try:
                decoded = decode_record(record.data)
            except MalformedRecord as exc:
                self._malformed(path, record.number, str(exc))
                continue
            for reason in decoded.skipped:  # a span of a good record: it costs only itself
                self.stats.malformed_spans += 1
                self._report(f"{path}:{record.number}: skipped malformed {_shorten(reason)}")
            for reason in decoded.dropped:  # a value of a span: it costs only itself
                self.stats.malformed_values += 1
                self._report(f"{path}:{record.number}: dropped malformed {_shorten(reason)}")
            self.stats.requests += 1
            self._show_held()
            self.stats.spans += len(decoded.spans)
            spans.extend(decoded.spans)
        return spans

    def _show_held(self) -> None:
        if self._held is not None:  # the input is collector output after all: show what was held
            held, self._held = self._held, None
            for line in held:
                self._errors.write(line + "\n")
            self._errors.flush()

    def _logs(self, path: Path, record: Record) -> None:
        """A logs request: the guard's events in it wait for their spans (``ingest/log_records.py``)."""
        try:
            events = decode_logs_record(record.data or b"")
        except MalformedRecord as exc:
            self._malformed(path, record.number, str(exc))
            return
        self._show_held()
        self._join.events(events)
        self.stats.log_records = self._join.log_records

    def _write(self, spans: list[ReadableSpan]) -> None:
        if spans:
            counts = self._open_writer().write(spans)
            self.stats.new_spans += counts.new
            self.stats.duplicate_spans += counts.duplicate
            self.stats.unstored_spans += counts.unstored
            for problem in counts.dropped:
                self.stats.dropped_spans += 1
                self._report(f"{self.path}: skipped span {_shorten(problem)}")
        self.stats.log_events = self._join.joined
        if self._replayer is not None:
            self.stats.replayed_traces = self._replayer.replayed_traces
            self.stats.guarded_traces = self._replayer.guarded_traces
        if self._on_batch is not None:
            self._on_batch(self.stats)

    def _open_writer(self) -> StoreWriter:
        if self._writer is None:
            self._writer = StoreWriter(self._db, config=self._config, store_arguments=self.options.store_arguments)
        return self._writer

    def _malformed(self, path: Path, number: int, reason: str) -> None:
        self.stats.malformed += 1
        if self._first_problem is None:
            self._first_problem = f"{path}:{number}: {_shorten(reason, 120)}"
        self._report(f"{path}:{number}: skipped malformed record: {_shorten(reason)}")

    def _report(self, line: str) -> None:
        """One problem line on stderr; past MAX_REPORTED they are only counted.

        Reading a file once, lines are held until its first OTLP request: input that holds none
        is refused in one line (:class:`NoTraceRecords`), not with a line per text line first."""
        self._reported += 1
        if self._reported <= MAX_REPORTED:
            text = line
        elif self._reported == MAX_REPORTED + 1:
            text = f"{self.path}: more skipped records and spans; they are counted, not shown"
        else:
            return
        if self._held is not None:
            self._held.append(text)
            return
        self._errors.write(text + "\n")
        self._errors.flush()

    def _status(self) -> str:
        return f"{self.stats.spans:,} spans ({self.stats.new_spans:,} new), {self.stats.malformed:,} malformed"


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
