"""``ingest --follow`` loses no record to rotation or truncation, and counts what it cannot recover.

Real files, a real store and the follower on its own thread. Rotation is done as the Collector's
``file`` exporter does it (lumberjack: rename to ``<name>-<timestamp><ext>`` beside it, then create
the path anew, deleting backups beyond ``max_backups``); truncation as logrotate's ``copytruncate``
(copy to ``<name>.1``, then truncate in place).
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otel_repeat_guard.ingest import Ingest, IngestOptions
from tests.ingest.otlp import batches, otlp_json_line, record_workload, store_rows

POLL = 1.0  # long, so that what a test does between two polls happens within one


@pytest.fixture
def lines() -> list[bytes]:
    """One OTLP request per tool or agent span: 14 lines, 12 tool calls."""
    return [otlp_json_line(batch) + b"\n" for batch in batches(record_workload(guard=True)[0], 1)]


@pytest.fixture
def following() -> Iterator[Callable[[Path, Path], tuple[Ingest, io.StringIO]]]:
    jobs: list[tuple[Ingest, threading.Thread]] = []

    def start(path: Path, db: Path) -> tuple[Ingest, io.StringIO]:
        errors = io.StringIO()
        job = Ingest(path, db, IngestOptions(follow=True, poll_seconds=POLL), errors=errors)
        thread = threading.Thread(target=job.run, daemon=True)
        thread.start()
        jobs.append((job, thread))
        return job, errors

    yield start
    for job, thread in jobs:
        job.stop.set()
        thread.join(10)


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def stored_spans(job: Ingest) -> int:
    return job.stats.new_spans + job.stats.duplicate_spans


def test_two_rotations_within_one_poll_with_max_backups_lose_no_file(
    tmp_path: Path, lines: list[bytes], following: Callable[[Path, Path], tuple[Ingest, io.StringIO]]
) -> None:
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    older = tmp_path / "traces-2026-12-02T19-00-00.000.jsonl"  # a backup from before the follower started
    older.write_bytes(b"not ours to read\n")
    path.write_bytes(b"".join(lines[:4]))
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 4)
    first = tmp_path / "traces-2026-12-02T19-30-00.123.jsonl"
    second = tmp_path / "traces-2026-12-02T19-30-00.456.jsonl"
    with path.open("ab") as out:  # the exporter's last write to the file before it rotates
        out.write(lines[4])
    os.rename(path, first)
    path.write_bytes(b"".join(lines[5:9]))  # lumberjack creates the path anew ...
    os.rename(path, second)  # ... and rotates it again within the same poll
    path.write_bytes(b"".join(lines[9:12]))
    older.unlink()  # max_backups: 2, so the oldest backup goes
    with path.open("ab") as out:
        out.write(lines[12] + lines[13])
    wait_for(lambda: stored_spans(job) == len(lines))
    assert job.stats.records == len(lines) and job.stats.malformed == 0 and job.stats.losses == 0
    assert len(store_rows(db)) == 12
    assert errors.getvalue() == (  # the backup it does not read is named, with how to read it
        f"{path}: 1 rotated file(s) beside it, there before following began, are not read "
        f"(read them once: otel-repeat-guard ingest --db {db} {older})\n"
    )


def test_a_rotated_file_on_an_inode_a_deleted_backup_freed_is_read(
    tmp_path: Path, lines: list[bytes], following: Callable[[Path, Path], tuple[Ingest, io.StringIO]]
) -> None:
    """Lumberjack renames the file, creates the path anew and deletes the backups past ``max_backups``: the next
    new file can get a deleted backup's inode number. Known by device and inode alone, such a file, rotated away
    within one poll, was taken for one read before and skipped without a word."""
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    history = [tmp_path / f"traces-2026-12-01T{n // 60:02d}-{n % 60:02d}-00.000.jsonl" for n in range(200)]
    for old in history:
        old.write_bytes(b"a backup from before the follower started\n")
    freed = {old.stat().st_ino for old in history}
    path.write_bytes(b"".join(lines[:4]))
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 4)
    with path.open("ab") as out:
        out.write(lines[4])
    os.rename(path, tmp_path / "traces-2026-12-02T19-30-00.123.jsonl")  # rotation 1 ...
    for old in history:
        old.unlink()  # ... max_backups deletes the old backups
    path.write_bytes(b"".join(lines[5:9]))
    if path.stat().st_ino not in freed:  # pragma: no cover - a file system that never hands an inode on at once
        pytest.skip("this file system gave the new file a fresh inode")
    os.rename(path, tmp_path / "traces-2026-12-02T19-30-00.456.jsonl")  # rotation 2, within the same poll
    path.write_bytes(b"".join(lines[9:]))
    wait_for(lambda: stored_spans(job) == len(lines))
    assert job.stats.records == len(lines) and job.stats.malformed == 0 and job.stats.losses == 0
    assert len(store_rows(db)) == 12
    assert errors.getvalue().startswith(f"{path}: 200 rotated file(s) beside it, there before following began")


@pytest.mark.parametrize("rotations", [1, 2])
def test_a_record_a_rotation_cut_in_two_is_read_whole_from_both_files(
    tmp_path: Path,
    lines: list[bytes],
    following: Callable[[Path, Path], tuple[Ingest, io.StringIO]],
    rotations: int,
) -> None:
    """The Collector's file exporter writes through a 4 KiB buffer and lumberjack rotates between two of its
    flushes, so a request's line can end in the next file. It was reported malformed, and lost, once per rotation.
    With two rotations within one poll, the line's middle is a whole backup of its own."""
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    stream = b"".join(lines)
    start = len(b"".join(lines[:4]))
    path.write_bytes(stream[:start])
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 4)
    step = len(lines[4]) // (rotations + 1)
    cuts = [start + step * (n + 1) for n in range(rotations)]  # inside the fifth request's line
    with path.open("ab") as out:
        out.write(stream[start : cuts[0]])  # the last flush before the rotation ends mid-line
    for n, (begin, end) in enumerate(zip(cuts, [*cuts[1:], len(stream)], strict=True)):
        os.rename(path, tmp_path / f"traces-2026-12-02T19-30-00.{n:03d}.jsonl")  # lumberjack rotates ...
        path.write_bytes(stream[begin:end])  # ... and the next flush goes to the new file
    wait_for(lambda: stored_spans(job) == len(lines))
    assert job.stats.records == len(lines) and job.stats.malformed == 0 and job.stats.losses == 0
    assert len(store_rows(db)) == 12 and errors.getvalue() == ""


def test_two_logrotate_create_rotations_within_one_poll_lose_no_file(
    tmp_path: Path, lines: list[bytes], following: Callable[[Path, Path], tuple[Ingest, io.StringIO]]
) -> None:
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(b"".join(lines[:4]))
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 4)
    one, two = tmp_path / "traces.jsonl.1", tmp_path / "traces.jsonl.2"
    os.rename(path, one)  # logrotate `create`: rename, then a new file at the path
    path.write_bytes(b"".join(lines[4:9]))
    os.rename(one, two)  # the next rotation shifts the numbers first
    os.rename(path, one)
    path.write_bytes(b"".join(lines[9:]))
    wait_for(lambda: stored_spans(job) == len(lines))
    assert job.stats.records == len(lines) and job.stats.malformed == 0 and job.stats.losses == 0
    assert len(store_rows(db)) == 12 and errors.getvalue() == ""


def test_copytruncate_regrown_past_the_read_position_is_noticed_and_finished_from_the_copy(
    tmp_path: Path, lines: list[bytes], following: Callable[[Path, Path], tuple[Ingest, io.StringIO]]
) -> None:
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(b"".join(lines[:3]))
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 3)
    read = path.stat().st_size
    with path.open("ab") as out:  # a fast writer: written after the follower's last read
        out.write(lines[3] + lines[4])
    shutil.copyfile(path, tmp_path / "traces.jsonl.1")  # logrotate copytruncate: copy ...
    with path.open("r+b") as out:  # ... then truncate in place, and the writer goes on from 0
        out.truncate(0)
        out.write(b"".join(lines[5:]))
    assert path.stat().st_size > read  # grown past the read position before the next poll
    wait_for(lambda: stored_spans(job) == len(lines))  # lines 3 and 4 came from the copy
    assert job.stats.records == len(lines) and job.stats.malformed == 0 and job.stats.losses == 0
    assert len(store_rows(db)) == 12 and errors.getvalue() == ""


def test_a_truncation_with_no_copy_is_reported_with_a_count(
    tmp_path: Path, lines: list[bytes], following: Callable[[Path, Path], tuple[Ingest, io.StringIO]]
) -> None:
    path, db = tmp_path / "traces.jsonl", tmp_path / "store.db"
    path.write_bytes(b"".join(lines[:6]))
    job, errors = following(path, db)
    wait_for(lambda: stored_spans(job) == 6)
    with path.open("r+b") as out:  # truncated and regrown past the read position, no copy anywhere
        out.truncate(0)
        out.write(b"".join(lines[6:]))
    wait_for(lambda: stored_spans(job) == len(lines))
    assert job.stats.losses == 1 and job.stats.malformed == 0
    assert errors.getvalue().startswith(f"{path} was truncated in place with no copy beside it: ")
    assert "; 1 unrecoverable gaps in the input (a truncation with no copy" in job.stats.summary()
    assert len(store_rows(db)) == 12
