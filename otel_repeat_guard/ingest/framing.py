"""Cutting the Collector ``file`` exporter's output into records, incrementally.

Three layouts, told apart by the first bytes of the file:

- plain JSON lines (``format: json``): one ``ExportTraceServiceRequest`` per line;
- ``compression: zstd`` (the exporter's default behaviour): each request is a separate
  zstd frame, preceded by its length as a 4-byte big-endian integer;
- ``compression: zstd`` with the ``exporter.file.nativeCompression`` feature gate: the
  whole file is one zstd stream of JSON lines (a standard ``.zst`` file).

Data arrives in chunks (``feed``) because ``--follow`` reads a file while the Collector
writes it: a record cut off at the end of the data read so far stays buffered until the
rest arrives. ``finish`` hands over whatever is left when no more data can come (end of
file, or the file was rotated away).
"""

from __future__ import annotations

from dataclasses import dataclass

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SNIFF_BYTES = 8
_BOM = b"\xef\xbb\xbf"
_MAX_RECORD = 512 * 1024 * 1024  # a length prefix beyond this is corruption, not a request


@dataclass(frozen=True, slots=True)
class Record:
    """One request's bytes, or the reason it could not be cut out; ``number`` counts from 1."""

    number: int
    data: bytes | None
    error: str | None = None


class _Lines:
    """Splits bytes into newline-terminated lines, keeping an unterminated tail.

    Linear in the input: the tail is kept as a list of pieces and joined once, when its
    newline arrives, so a line that comes in many chunks (or a file with no newline at all)
    is never copied again per chunk. A line longer than ``max_line`` is not held: it is
    dropped as it comes and reported as one malformed record when it ends.
    """

    def __init__(self, max_line: int = _MAX_RECORD) -> None:
        self._pieces: list[bytes] = []
        self._held = 0
        self._skipped = 0  # bytes of an over-long line dropped so far
        self._number = 0
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[Record]:
        last = chunk.rfind(b"\n")
        if last < 0:
            self._hold(chunk)
            return []
        first = chunk.find(b"\n")
        records: list[Record] = []
        if (record := self._end_line(chunk[:first])) is not None:
            records.append(record)
        if last > first:
            for line in chunk[first + 1 : last].split(b"\n"):
                if (record := self._record(line)) is not None:
                    records.append(record)
        self._hold(chunk[last + 1 :])
        return records

    def finish(self) -> list[Record]:
        if self._skipped:
            record = self._end_line(b"")
        else:
            tail = b"".join(self._pieces)
            self._pieces, self._held = [], 0
            record = self._record(tail) if tail.strip() else None
        return [] if record is None else [record]

    def _hold(self, piece: bytes) -> None:
        if not piece:
            return
        if self._skipped:
            self._skipped += len(piece)
            return
        self._pieces.append(piece)
        self._held += len(piece)
        if self._held > self._max_line:  # no request is this large: stop holding it
            self._skipped, self._pieces, self._held = self._held, [], 0

    def _end_line(self, rest: bytes) -> Record | None:
        """The line held so far, completed by ``rest``."""
        if self._skipped:
            size, self._skipped = self._skipped + len(rest), 0
            self._number += 1
            return Record(self._number, None, f"a line of {size:,} bytes, over the {self._max_line:,} a record may be")
        if not self._pieces:
            return self._record(rest)
        line = b"".join([*self._pieces, rest])
        self._pieces, self._held = [], 0
        return self._record(line)

    def _record(self, line: bytes) -> Record | None:
        self._number += 1
        if self._number == 1 and line.startswith(_BOM):  # a file saved by an editor that marks UTF-8
            line = line[len(_BOM) :]
        return Record(self._number, line) if line.strip() else None

    @property
    def count(self) -> int:
        """Lines cut so far, blank ones included (so numbers match an editor's)."""
        return self._number

    def handed_on(self) -> _Lines | None:
        """The unterminated line held, moved into the lines of the file written next (numbered from its first
        line); None when none is held."""
        if not (self._pieces or self._skipped):
            return None
        successor = _Lines(self._max_line)
        successor._pieces, successor._held, successor._skipped = self._pieces, self._held, self._skipped
        self._pieces, self._held, self._skipped = [], 0, 0
        return successor

    @property
    def pending(self) -> int:
        return self._held  # an over-long line's bytes are dropped, not held


class _ZstdStream:
    """A zstd stream (possibly several frames back to back) of JSON lines."""

    def __init__(self, max_record: int = _MAX_RECORD) -> None:
        self._lines = _Lines(max_record)
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._failed: str | None = None
        self._in_frame = False  # a frame begun and not ended: at the input's end, it was cut short

    def feed(self, chunk: bytes) -> list[Record]:
        if self._failed is not None:
            return []
        out: list[bytes] = []
        try:
            while chunk:
                out.append(self._obj.decompress(chunk))
                self._in_frame = not self._obj.eof
                if self._in_frame:
                    break
                chunk = self._obj.unused_data  # the next frame starts here
                self._obj = self._dctx.decompressobj()
        except zstandard.ZstdError as exc:
            self._failed = f"corrupt zstd stream: {exc}"
            records = self._lines.feed(b"".join(out))
            return [*records, Record(self._lines.count + 1, None, self._failed)]
        return self._lines.feed(b"".join(out))

    def finish(self) -> list[Record]:
        records = self._lines.finish()
        if self._in_frame and self._failed is None:  # what the cut frame held past its last whole line is lost
            records.append(Record(self._lines.count + 1, None, "truncated zstd stream: its last frame is cut short"))
        return records

    @property
    def pending(self) -> int:
        return self._lines.pending


class _ZstdMessages:
    """Length-prefixed zstd frames, one request each."""

    def __init__(self, max_record: int = _MAX_RECORD) -> None:
        self._max_record = max_record
        self._buffer = bytearray()
        self._number = 0
        self._dctx = zstandard.ZstdDecompressor()
        self._failed = False

    def feed(self, chunk: bytes) -> list[Record]:
        if self._failed:
            return []
        self._buffer += chunk
        records: list[Record] = []
        while len(self._buffer) >= 4:
            size = int.from_bytes(self._buffer[:4], "big")
            if size > self._max_record:
                self._failed = True  # the framing is lost: nothing after this can be trusted
                self._number += 1
                records.append(Record(self._number, None, f"length prefix {size} is not a plausible record size"))
                self._buffer.clear()
                break
            if len(self._buffer) < 4 + size:
                break  # the rest of this record has not been written yet
            payload = bytes(self._buffer[4 : 4 + size])
            del self._buffer[: 4 + size]
            self._number += 1
            records.append(self._decompress(payload))
        return records

    def _decompress(self, payload: bytes) -> Record:
        try:
            return Record(self._number, self._dctx.decompressobj().decompress(payload))
        except zstandard.ZstdError as exc:
            return Record(self._number, None, f"corrupt zstd frame: {exc}")

    def finish(self) -> list[Record]:
        if not self._buffer:
            return []
        self._buffer.clear()
        self._number += 1
        return [Record(self._number, None, "truncated record at the end of the file")]

    @property
    def pending(self) -> int:
        return len(self._buffer)


class RecordSplitter:
    """Detects the layout from the first bytes, then cuts records out of fed chunks."""

    def __init__(self, max_record: int = _MAX_RECORD) -> None:
        """``max_record``: the largest record held; a longer line or length prefix is corruption."""
        self._max_record = max_record
        self._head = b""
        self._inner: _Lines | _ZstdStream | _ZstdMessages | None = None

    @property
    def layout(self) -> str | None:
        """``json-lines``, ``zstd-stream``, ``zstd-messages``, or None until enough bytes arrived."""
        names = {_Lines: "json-lines", _ZstdStream: "zstd-stream", _ZstdMessages: "zstd-messages"}
        return None if self._inner is None else names[type(self._inner)]

    @property
    def pending(self) -> int:
        """Bytes held back as an incomplete record."""
        return len(self._head) if self._inner is None else self._inner.pending

    def feed(self, chunk: bytes) -> list[Record]:
        if self._inner is None:
            self._head += chunk
            if len(self._head) < _SNIFF_BYTES:
                return []
            chunk, self._head = self._head, b""
            self._inner = _detect(chunk, self._max_record)
        return self._inner.feed(chunk)

    def handed_on(self) -> RecordSplitter | None:
        """At a rotation: a splitter for the file written next that starts with this file's unterminated line. The
        Collector's file exporter writes through a 4 KiB buffer, so a request's line can be cut by the rotation
        and end in the next file. None when no line is held (or the layout is not JSON lines): :meth:`finish`."""
        lines = self._inner.handed_on() if isinstance(self._inner, _Lines) else None
        if lines is None:
            return None
        successor = RecordSplitter(self._max_record)
        successor._inner = lines
        return successor

    def finish(self) -> list[Record]:
        if self._inner is None:
            chunk, self._head = self._head, b""
            if not chunk:
                return []
            self._inner = _detect(chunk, self._max_record)
            records = self._inner.feed(chunk)
            return records + self._inner.finish()
        return self._inner.finish()


def _detect(head: bytes, max_record: int) -> _Lines | _ZstdStream | _ZstdMessages:
    if head.startswith(ZSTD_MAGIC):
        return _ZstdStream(max_record)
    if head[4:8] == ZSTD_MAGIC:
        return _ZstdMessages(max_record)
    return _Lines(max_record)
