"""Time to cut a large collector file into records: ``python -m benchmarks.framing [--megabytes 1024]``.

Writes a file of OTLP-JSON-shaped lines (about 2 KB each, as a busy Collector's ``file`` exporter
writes them) into a temporary folder, reads it through :class:`FileSource` (the reader ``ingest``
and ``doctor`` use: 1 MiB reads, framing into records), and prints seconds and MB/s. Then the same
for one line with no newline for ``--huge`` MB (a writer that never ended its line, or a binary
file): it too must stay linear. The files are deleted afterwards. Only framing is timed, not JSON
decoding or the store.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from otel_repeat_guard.ingest.source import FileSource

_LINE = (
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"agent-svc"}}]},'
    b'"scopeSpans":[{"scope":{"name":"bench"},"spans":[{"traceId":"%032x","spanId":"%016x","name":"execute_tool grep",'
    b'"kind":1,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000100000000",'
    b'"attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"grep"}},'
    b'{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"%s"}}]}]}]}]}\n'
)


def _write_lines(path: Path, megabytes: int) -> int:
    target = megabytes * 1_000_000
    written = lines = 0
    padding = b"x" * 1500
    with path.open("wb") as out:
        block: list[bytes] = []
        while written < target:
            line = _LINE % (lines, lines, padding)
            block.append(line)
            written += len(line)
            lines += 1
            if len(block) == 4096:
                out.write(b"".join(block))
                block.clear()
        out.write(b"".join(block))
    return lines


def _write_one_line(path: Path, megabytes: int) -> None:
    piece = b"y" * 1_000_000
    with path.open("wb") as out:
        for _ in range(megabytes):
            out.write(piece)
        out.write(b"\n")


def _frame(path: Path, *, follow: bool = False) -> tuple[float, int, int]:
    """Seconds to read and frame the whole file, records cut, bytes of data in them.

    ``follow``: as ``--follow`` reads it (checking after each read that the file still holds
    what was read before), until the first idle poll at its end."""
    started = time.perf_counter()
    records = size = 0
    total = path.stat().st_size
    for chunk in FileSource(path, follow=follow).chunks():
        records += len(chunk.records)
        size += sum(len(record.data) for record in chunk.records if record.data is not None)
        if follow and not chunk.records and chunk.offset >= total:
            break
    return time.perf_counter() - started, records, size


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.framing", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=1024, help="size of the file of lines (default 1024)")
    parser.add_argument("--huge", type=int, default=300, help="size of the single unterminated line (default 300)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="framing-bench-") as folder:
        lines_file = Path(folder) / "traces.jsonl"
        lines = _write_lines(lines_file, args.megabytes)
        total = lines_file.stat().st_size
        seconds, records, _ = _frame(lines_file)
        assert records == lines, (records, lines)
        print(
            f"{total / 1e6:,.0f} MB of {lines:,} lines: framed in {seconds:.2f} s ({total / 1e6 / seconds:,.0f} MB/s)"
        )
        seconds, records, _ = _frame(lines_file, follow=True)
        assert records == lines, (records, lines)
        print(f"the same file read as --follow reads it: {seconds:.2f} s")
        lines_file.unlink()

        huge_file = Path(folder) / "one-line.jsonl"
        _write_one_line(huge_file, args.huge)
        total = huge_file.stat().st_size
        seconds, records, size = _frame(huge_file)
        assert records == 1 and size == total - 1, (records, size)
        print(f"one line of {total / 1e6:,.0f} MB, no newline until its end: framed in {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
