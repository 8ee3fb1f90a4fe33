"""Reading one file of Collector output: once to the end, or following it as it grows and rotates.

Following handles what the Collector's ``file`` exporter (and logrotate) do to its output:

- growth: new data is read as it is flushed (every ``flush_interval``);
- a partially written last record: it stays buffered until the rest arrives;
- rotation (the exporter's ``rotation:`` settings, lumberjack underneath: the file is renamed
  to ``<name>-<timestamp><ext>`` beside it and a new one is created at the path; logrotate's
  ``create`` mode names it ``<file>.1``): the old file is read to its end; then every rotated file
  beside it that appeared since and was never read (several rotations within one poll) is read,
  oldest first, and reading goes on from the start of the new file. A line a rotation cut (the
  exporter writes through a 4 KiB buffer, so a request can end in the next file) goes on in the
  file read next;
- truncation in place (logrotate's ``copytruncate``): noticed when the bytes already read are
  no longer in the file, compared by size and by a fingerprint (the first bytes and the bytes
  just before the read position), so a file truncated and grown past the read position again
  between two polls is noticed too. What was not read yet is taken from the copy beside it
  (the rotated file whose bytes match the fingerprint), then reading restarts at the beginning.

What cannot be recovered is reported as a :class:`Loss` on the chunk, with the bytes known to
be lost. Limits, as they are: with ``copytruncate`` the records written between logrotate's
copy and its truncation are in neither file (logrotate documents this window); a truncation
without a copy loses what was written after the last read, which cannot be measured; a rotated
file deleted (``max_backups``) before the follower's next poll saw it is gone without trace (it
needs more than ``max_backups`` rotations within one poll); a file rewritten with bytes identical
to the fingerprint is taken for the same file.

Each step yields a :class:`Chunk` of whole records plus the position, for progress. While
following, an idle poll yields an empty chunk, so the caller can flush time-based work.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from otel_repeat_guard.ingest.framing import Record, RecordSplitter

CHUNK_BYTES = 1 << 20
_PRINT_BYTES = 4096  # the fingerprint: this many bytes at the start and just before the read position
_LUMBERJACK_TIME = r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}"  # lumberjack's backup timestamp


@dataclass(frozen=True, slots=True)
class Loss:
    """Data the reader knows it could not read: what happened, and the bytes known lost (0: unknown)."""

    what: str
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records cut from the data read by one step, and where reading stands."""

    records: list[Record]
    offset: int
    size: int
    layout: str | None
    path: Path
    losses: tuple[Loss, ...] = ()


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def rotated_name(path: Path) -> re.Pattern[str]:
    """Names a rotated copy of ``path`` gets beside it: lumberjack's ``traces-2026-12-02T19-30-00.123.jsonl``
    for ``traces.jsonl``, logrotate's ``traces.jsonl.1`` and ``traces.jsonl-20261202``."""
    stem, ext = os.path.splitext(path.name)  # as Go's filepath.Ext: the last dot
    lumberjack = re.escape(stem) + _LUMBERJACK_TIME + re.escape(ext)
    logrotate = re.escape(path.name) + r"[.-]\d+"
    return re.compile(f"(?:{lumberjack}|{logrotate})")


class _Print:
    """The bytes read so far, as far as needed to tell that the file still holds them."""

    def __init__(self) -> None:
        self.head = b""
        self.tail = b""

    def add(self, data: bytes) -> None:
        if len(self.head) < _PRINT_BYTES:
            self.head += data[: _PRINT_BYTES - len(self.head)]
        self.tail = (self.tail + data[-_PRINT_BYTES:])[-_PRINT_BYTES:]

    def held_by(self, fd: int, offset: int) -> bool:
        """Whether the file ``fd`` still has these bytes at the start and just before ``offset``."""
        if not self.head:
            return True
        return (
            os.pread(fd, len(self.head), 0) == self.head
            and os.pread(fd, len(self.tail), offset - len(self.tail)) == self.tail
        )


class _Reading:
    """One file being read: its handle, framing and position."""

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle = handle
        self.path = path
        self.identity = _identity(os.fstat(handle.fileno()))
        self.splitter = RecordSplitter()
        self.offset = 0
        self.seen_size = 0  # the largest size seen: what was written, read or not
        self.print = _Print()

    def chunk(self, records: list[Record], losses: tuple[Loss, ...] = ()) -> Chunk:
        size = max(self.offset, self.seen_size)
        return Chunk(records, self.offset, size, self.splitter.layout, self.path, losses)

    def take(self, data: bytes) -> list[Record]:
        self.offset += len(data)
        self.print.add(data)
        return self.splitter.feed(data)

    def restart(self) -> None:
        self.handle.seek(0)
        self.splitter, self.offset, self.seen_size, self.print = RecordSplitter(), 0, 0, _Print()


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
        self._rotated = rotated_name(self.path)
        self._seen: dict[tuple[int, int], bytes] = {}  # files read (or there before following began): their heads
        self._handed: RecordSplitter | None = None  # a rotated-away file's unterminated line, for the next file
        self.history: list[Path] = []
        """Following: the rotated files beside the path when following began, not read (a restart after the
        follower was down leaves what rotated meanwhile here: ``ingest`` them once; the store keeps each span once)."""

    def chunks(self) -> Iterator[Chunk]:
        if not self.follow:
            with _open(self.path) as once:
                yield from self._read(_Reading(once, self.path))
            return
        history = self._siblings()
        self.history = [path for path, _ in history]
        self._seen.update((identity, _head(path)) for path, identity in history)  # not ours to read
        handle: BinaryIO | None = self._wait_for_file()
        while handle is not None:
            try:
                reading = _Reading(handle, self.path)
                self._seen[reading.identity] = b""
                yield from self._unread_rotated()  # rotated before the path was opened: older than it
                reading.splitter = self._next_splitter()
                rotated = yield from self._read(reading)
                self._seen[reading.identity] = reading.print.head  # how to know it again, renamed
                if not rotated:
                    break
            finally:
                handle.close()
            handle = self._wait_for_file()
        if self._handed is not None:  # stopped before the file that held the rest of a line was read
            yield Chunk(self._handed.finish(), 0, 0, "json-lines", self.path)
            self._handed = None

    def _next_splitter(self) -> RecordSplitter:
        """What the file read next starts with: the line the last rotated-away file left unterminated, if any."""
        splitter, self._handed = self._handed or RecordSplitter(), None
        return splitter

    def _hand_on(self, reading: _Reading) -> list[Record]:
        """A file left for the next one at a rotation: its unterminated line goes on to that file (see
        :meth:`RecordSplitter.handed_on`); anything else held is finished here."""
        self._handed = reading.splitter.handed_on()
        return reading.splitter.finish() if self._handed is None else []

    def _wait_for_file(self) -> BinaryIO | None:
        while True:
            try:
                return _open(self.path)
            except FileNotFoundError:
                pass
            if self.stop.wait(self.poll_seconds):  # following a file that does not exist (yet)
                return None

    def _siblings(self) -> list[tuple[Path, tuple[int, int]]]:
        """Rotated copies of the path beside it, oldest first: by last write, and where file times tie (they
        are as coarse as the kernel's tick) by lumberjack's timestamp, or logrotate's number, highest first."""
        found: list[tuple[int, int, str, Path, tuple[int, int]]] = []
        try:
            entries = list(os.scandir(self.path.parent))
        except OSError:
            return []
        for entry in entries:
            if entry.name == self.path.name or not self._rotated.fullmatch(entry.name):
                continue
            try:
                stat = entry.stat()
            except OSError:
                continue  # deleted meanwhile
            number = entry.name[len(self.path.name) + 1 :] if entry.name.startswith(self.path.name) else ""
            rank = -int(number) if number.isdigit() else 0  # traces.jsonl.2 is older than traces.jsonl.1
            found.append((stat.st_mtime_ns, rank, entry.name, Path(entry.path), _identity(stat)))
        return [(path, identity) for *_, path, identity in sorted(found)]

    def _was_read(self, path: Path, identity: tuple[int, int]) -> bool:
        """Whether the file at ``path`` is one read before (or there before following began). Its device and inode
        say so only with its first bytes: the inode of a backup that ``max_backups`` deleted is the next new
        file's, so a file rotated away within one poll could have an inode already seen."""
        known = self._seen.get(identity)
        if known is None:
            return False
        head = _head(path)
        return head[: len(known)] == known and bool(known or not head)

    def _unread_rotated(self) -> Iterator[Chunk]:
        for path, identity in self._siblings():
            if self._was_read(path, identity):
                continue
            self._seen[identity] = b""
            try:
                handle = _open(path)
            except OSError as exc:  # deleted (max_backups) or unreadable between the listing and now
                yield Chunk([], 0, 0, None, path, (Loss(f"rotated file {path} could not be read: {exc}"),))
                continue
            with handle:
                if _identity(os.fstat(handle.fileno())) == identity:
                    reading = _Reading(handle, path)
                    reading.splitter = self._next_splitter()
                    yield from self._read(reading, rotated=True)
                    self._seen[identity] = reading.print.head

    def _read(self, reading: _Reading, *, rotated: bool = False) -> Generator[Chunk, None, bool]:
        """Read one file to its end (or, following, until it is rotated away or ``stop`` is set); ``rotated``: a
        rotated file, read once, whose successor holds the rest of its last line, if any.

        Returns True when the path now names a new file."""
        follow = self.follow and not rotated
        fd = reading.handle.fileno()
        while True:
            data = reading.handle.read(self.chunk_bytes)
            if follow and reading.offset and not reading.print.held_by(fd, reading.offset):
                yield from self._truncated(reading)  # what was just read may be the new content: read again
                continue
            if data:
                reading.seen_size = max(reading.seen_size, os.fstat(fd).st_size)
                yield reading.chunk(reading.take(data))
                continue
            if not follow:
                yield reading.chunk(self._hand_on(reading) if rotated else reading.splitter.finish())
                return False
            try:
                current = self.path.stat()
            except FileNotFoundError:
                current = None  # between the rename and the creation of the new file
            if current is not None and _identity(current) != reading.identity:
                rest = reading.handle.read()  # the writer may have flushed the old file once more
                records = reading.take(rest) if rest else []
                yield reading.chunk(records + self._hand_on(reading))
                return True
            yield reading.chunk([])  # idle
            if self.stop.wait(self.poll_seconds):
                return False

    def _truncated(self, reading: _Reading) -> Iterator[Chunk]:
        """The file no longer holds what was read: finish its old content from a copy if there is one."""
        copy = self._copy_of(reading)
        losses: tuple[Loss, ...] = ()
        if copy is not None:
            with copy:
                copy.seek(reading.offset)
                while data := copy.read(self.chunk_bytes):
                    yield reading.chunk(reading.take(data))
        else:
            unread = max(0, reading.seen_size - reading.offset)
            losses = (
                Loss(
                    f"{reading.path} was truncated in place with no copy beside it: what was written after byte "
                    f"{reading.offset:,} before the truncation is lost ({unread:,} bytes known unread)",
                    unread,
                ),
            )
        yield reading.chunk(reading.splitter.finish(), losses)
        reading.restart()

    def _copy_of(self, reading: _Reading) -> BinaryIO | None:
        """The rotated copy (copytruncate) that still holds what was read, opened; None if none does."""
        for path, identity in reversed(self._siblings()):  # the newest copy is the likeliest
            if self._was_read(path, identity):
                continue
            try:
                handle = _open(path)
            except OSError:
                continue
            if reading.print.held_by(handle.fileno(), reading.offset):
                self._seen[identity] = reading.print.head
                return handle
            handle.close()
        return None


def _head(path: Path) -> bytes:
    """The file's first bytes (as many as a reading's fingerprint keeps); none for a file gone or unreadable."""
    try:
        with _open(path) as handle:
            return os.pread(handle.fileno(), _PRINT_BYTES, 0)
    except OSError:
        return b""


def _open(path: Path) -> BinaryIO:
    """Unbuffered: the read position is exactly the bytes handed on, so the fingerprint checks them."""
    return path.open("rb", buffering=0)
