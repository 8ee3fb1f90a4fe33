"""Collector ``file`` exporter output (OTLP JSON lines, optionally zstd) into the store."""

from otel_repeat_guard.ingest.framing import Record, RecordSplitter
from otel_repeat_guard.ingest.otlp_json import MalformedRecord, decode_line
from otel_repeat_guard.ingest.replay import Replayer
from otel_repeat_guard.ingest.runner import Ingest, IngestOptions, IngestStats, NoTraceRecords
from otel_repeat_guard.ingest.source import FileSource

__all__ = [
    "FileSource",
    "Ingest",
    "IngestOptions",
    "IngestStats",
    "MalformedRecord",
    "NoTraceRecords",
    "Record",
    "RecordSplitter",
    "Replayer",
    "decode_line",
]
