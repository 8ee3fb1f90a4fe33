"""A progress line for long ingests: bytes read of the file, spans, malformed records."""

from __future__ import annotations

import sys
import time
from typing import TextIO

LARGE_FILE_BYTES = 1 << 20  # below this an ingest is over before progress would help


def _megabytes(n: int) -> str:
    return f"{n / 1_000_000:.1f}"


class Progress:
    """Rewrites one status line on a terminal; prints a line every few seconds otherwise."""

    def __init__(self, stream: TextIO | None = None, *, min_bytes: int = LARGE_FILE_BYTES) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._interval = 0.2 if self._tty else 2.0
        self._min_bytes = min_bytes
        self._last = 0.0
        self._shown = False

    def update(self, label: str, offset: int, size: int, status: str, *, force: bool = False) -> None:
        if size < self._min_bytes and not self._shown:
            return
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        share = f"{100 * offset // size:3d}% " if size else ""
        line = f"{label}: {share}{_megabytes(offset)}/{_megabytes(size)} MB, {status}"
        if self._tty:
            self._stream.write("\r\x1b[2K" + line)
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown and self._tty:
            self._stream.write("\n")
            self._stream.flush()
