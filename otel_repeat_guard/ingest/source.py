"""Reading one file of Collector output: once to the end, or following it as it grows and rotates.

Following handles what the Collector's ``file`` exporter does to its output:

- growth: new data is read as it is flushed (every ``flush_interval``);
- a partially written last record: it stays buffered until the rest arrives;
- rotation (``rotation:`` settings; the file is renamed and a new one created at the same
  path): the old file is read to its end, its last record is completed or reported, and
  reading continues from the start of the new file;
- truncation in place (``copytruncate`` style): reading restarts at the beginning.

Each step yields a :class:`Chunk` of whole records plus the position, for progress. While
following, an idle poll yields an empty chunk, so the caller can flush time-based work.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from otel_repeat_guard.ingest.framing import Record, RecordSplitter

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records cut from the data read by one step, and where reading stands."""

    records: list[Record]
    offset: int
    size: int
    layout: str | None


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


class FileSource:
    """Yields the records of ``path``; with ``follow`` it keeps going until ``stop`` is set."""

    def __init__(
        self,
        path: str | Path,
        *,
        follow: bool = False,
        poll_seconds: float = 0.5,
        stop: threading.Event | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.path = Path(path)
        self.follow = follow
        self.poll_seconds = poll_seconds
        self.stop = stop or threading.Event()
        self.chunk_bytes = chunk_bytes

    def chunks(self) -> Iterator[Chunk]:
        handle = self._open()
        if handle is None:
            return
        try:
            while (yield from self._read(handle)):  # True: the path now names a new file
                handle.close()
                reopened = self._open()
                if reopened is None:
                    return
                handle = reopened
        finally:
            handle.close()

    def _open(self) -> BinaryIO | None:
        while True:
            try:
                return self.path.open("rb")
            except FileNotFoundError:
                if not self.follow:
                    raise
            if self.stop.wait(self.poll_seconds):  # following a file that does not exist yet
                return None

    def _read(self, handle: BinaryIO) -> Generator[Chunk, None, bool]:
        """Read one file to its end (or, following, until it is rotated away or ``stop`` is set)."""
        identity = _identity(os.fstat(handle.fileno()))
        splitter = RecordSplitter()
        offset = 0
        while True:
            data = handle.read(self.chunk_bytes)
            if data:
                offset += len(data)
                size = max(offset, os.fstat(handle.fileno()).st_size)
                yield Chunk(splitter.feed(data), offset, size, splitter.layout)
                continue
            if not self.follow:
                yield Chunk(splitter.finish(), offset, offset, splitter.layout)
                return False
            try:
                current = self.path.stat()
            except FileNotFoundError:
                current = None  # between the rename and the creation of the new file
            if current is not None and _identity(current) != identity:
                rest = handle.read()  # the writer may have flushed the old file once more
                records = splitter.feed(rest) if rest else []
                offset += len(rest)
                yield Chunk(records + splitter.finish(), offset, offset, splitter.layout)
                return True
            if current is not None and current.st_size < offset:  # truncated in place
                yield Chunk(splitter.finish(), offset, offset, splitter.layout)
                handle.seek(0)
                splitter, offset = RecordSplitter(), 0
                continue
            yield Chunk([], offset, offset, splitter.layout)  # idle
            if self.stop.wait(self.poll_seconds):
                return False
