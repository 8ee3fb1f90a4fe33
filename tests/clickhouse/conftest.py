"""A chdb ``otel_traces`` filled from the demo scenario's spans, beside the embedded store they also went to."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

if os.environ.get("OTEL_REPEAT_GUARD_REQUIRE_BACKENDS") == "1":  # `make test`: a missing engine fails, never skips
    import chdb  # noqa: F401
    import clickhouse_connect  # noqa: F401
else:
    pytest.importorskip("chdb", reason="the clickhouse extra (make test installs it)")

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.target import Target
from otel_repeat_guard.ingest.otlp_json import decode_line
from otel_repeat_guard.store import SQLiteSpanExporter
from tests.clickhouse.filling import demo_spans, fill

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "langchain_openinference" / "spans.jsonl"


@pytest.fixture(scope="session")
def demo_filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[ReadableSpan], Path, Target]]:
    """The demo spans, and (the SQLite store, the chdb target) holding them. One chdb directory for the whole
    session: chdb holds one session per process, and opening another after closing one may crash it."""
    root = _root(tmp_path_factory)
    spans = demo_spans(root / "store.db")
    target = fill(root / "chdb", spans)
    yield spans, root / "store.db", target
    ChdbClient.close_all()


def _root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's one directory: its ``chdb`` holds every table the tests fill."""
    root = tmp_path_factory.getbasetemp() / "clickhouse"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session")
def capture_pair(
    demo_filled: tuple[list[ReadableSpan], Path, Target], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Target]:
    """A real LangChain agent's spans under OpenInference (tests/fixtures/langchain_openinference): (the
    SQLite store its exporter wrote, the chdb table the Collector's exporter would), in the session's chdb."""
    spans = [span for line in CAPTURE.read_bytes().splitlines() if line for span in decode_line(line)]
    store = _root(tmp_path_factory) / "langchain.db"
    exporter = SQLiteSpanExporter(store)
    exporter.export(spans)
    exporter.shutdown()
    return store, fill(demo_filled[2].path, spans, table="langchain_traces")


@pytest.fixture(scope="session")
def demo_pair(demo_filled: tuple[list[ReadableSpan], Path, Target]) -> tuple[Path, Target]:
    """(the SQLite store, the chdb target) holding the same demo spans."""
    return demo_filled[1], demo_filled[2]
