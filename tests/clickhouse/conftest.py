"""A chdb ``otel_traces`` filled from the demo scenario's spans, beside the embedded store they also went to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

pytest.importorskip("chdb", reason="the clickhouse extra (make test installs it)")

from otel_repeat_guard.clickhouse.client import ChdbClient
from otel_repeat_guard.clickhouse.target import Target
from tests.clickhouse.filling import demo_spans, fill


@pytest.fixture(scope="session")
def demo_filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[ReadableSpan], Path, Target]]:
    """The demo spans, and (the SQLite store, the chdb target) holding them. One chdb directory for the whole
    session: chdb holds one session per process, and opening another after closing one may crash it."""
    root = tmp_path_factory.mktemp("clickhouse")
    spans = demo_spans(root / "store.db")
    target = fill(root / "chdb", spans)
    yield spans, root / "store.db", target
    ChdbClient.close_all()


@pytest.fixture(scope="session")
def demo_pair(demo_filled: tuple[list[ReadableSpan], Path, Target]) -> tuple[Path, Target]:
    """(the SQLite store, the chdb target) holding the same demo spans."""
    return demo_filled[1], demo_filled[2]
