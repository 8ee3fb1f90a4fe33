"""``deploy/dashboard-entrypoint.sh`` stopped: by a signal (``docker stop``, ``docker compose kill -s INT``, Ctrl+C),
or by one of its two processes dying. In a container the script is PID 1, and when it exits the kernel kills
whatever is left at once (SIGKILL): so it exits only once both are gone, the follower having closed its store."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from subprocess import Popen, TimeoutExpired

import pytest

from tests.backends.servers import poll, server_process
from tests.deploy.test_services_run import BIN, running
from tests.ingest.otlp import otlp_json_line, record_workload

STOPPED = 10.0  # seconds: well inside `docker stop`'s grace period, after which Docker kills the container


def group(pgid: int) -> dict[int, str]:
    """The live (not zombie) processes of the process group ``pgid``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
        state, _, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            found[int(entry.name)] = command
    return found


def exited(process: Popen[bytes], log: Path) -> int:
    """The script's exit status, within STOPPED seconds; by then no process of its group may be left."""
    try:
        status = process.wait(STOPPED)
    except TimeoutExpired:
        pytest.fail(f"the entrypoint still runs {STOPPED} s on: {group(process.pid)}\n{log.read_text()[-3000:]}")
    left = group(process.pid)
    assert not left, f"the entrypoint exited with these still running (killed at once in a container): {left}"
    return status


@pytest.mark.parametrize(
    ("signum", "to_group", "status"),
    [(signal.SIGINT, False, 130), (signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)],
    ids=["sigint", "sigint-to-the-group", "sigterm"],
)
def test_a_signal_stops_the_follower_and_the_dashboard_before_the_entrypoint_exits(
    tmp_path: Path, signum: signal.Signals, to_group: bool, status: int
) -> None:
    """SIGINT or SIGTERM to PID 1 (``docker compose kill -s INT``, ``docker stop``), or SIGINT to the whole group
    (Ctrl+C on ``docker run -it``). The children, started with ``&`` in a non-interactive shell, ignore SIGINT:
    the script stops them itself, waits for them, and exits 128 + the signal."""
    with running(tmp_path) as (process, log, traces):
        commands = " | ".join(group(process.pid).values())
        assert " ingest --follow " in commands and " dashboard --db " in commands
        began = time.monotonic()
        (os.killpg if to_group else os.kill)(process.pid, signum)
        assert exited(process, log) == status
        assert time.monotonic() - began < STOPPED
    # the follower stopped as on Ctrl+C: its store closed, what it ingested said; not killed mid-batch
    assert f"ingested {traces} into " in log.read_text()


def ignored(pid: int) -> set[int]:
    """The numbers of the signals process ``pid`` ignores (``SigIgn`` in its /proc status)."""
    (line,) = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn:")]
    mask = int(line.split()[1], 16)
    return {n for n in range(1, signal.NSIG) if mask >> (n - 1) & 1}


@contextmanager
def sigint_ignored_here() -> Iterator[None]:
    """This process with SIGINT ignored, as ``make test &`` (or ``nohup``) in a script starts the test run."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_entrypoint_gets_sigint_at_its_default_even_from_a_test_run_that_ignores_it(tmp_path: Path) -> None:
    """A test run started in the background by a script (``make test &``, ``nohup``) ignores SIGINT, and every child
    would inherit that; a non-interactive bash cannot trap a signal ignored when it started, so the SIGINT cases
    above timed out (SIGINT to PID 1) or ended 0 (to the group: only Streamlit, which sets its own handler, stopped).
    In a container PID 1 starts with SIGINT at its default: the tests start the entrypoint so too."""
    with sigint_ignored_here(), running(tmp_path) as (process, log, traces):
        assert signal.SIGINT not in ignored(process.pid)
        started = [
            pid
            for pid, command in group(process.pid).items()
            if " ingest --follow " in command or " dashboard --db " in command
        ]
        assert len(started) == 2 and all(signal.SIGINT in ignored(pid) for pid in started)  # `&` in the script does so
        os.killpg(process.pid, signal.SIGINT)
        assert exited(process, log) == 130
    assert f"ingested {traces} into " in log.read_text()


def test_when_the_follower_dies_the_dashboard_is_stopped_and_the_entrypoint_exits_with_its_status(
    tmp_path: Path,
) -> None:
    """Either process dying ends the container (``restart: unless-stopped`` starts it again), the other stopped first."""
    with running(tmp_path) as (process, log, _):
        (follower,) = [pid for pid, command in group(process.pid).items() if " ingest --follow " in command]
        os.kill(follower, signal.SIGKILL)
        assert exited(process, log) == 128 + signal.SIGKILL


def test_the_follower_stops_on_sigterm_as_on_ctrl_c_with_its_store_closed(tmp_path: Path) -> None:
    """What the entrypoint sends it: SIGTERM ends ``ingest --follow`` as Ctrl+C does (exit 0, the summary said,
    the store closed, its write-ahead log folded in), not as a kill that leaves the summary unsaid."""
    traces, db = tmp_path / "traces.jsonl", tmp_path / "repeat-guard.db"
    spans, _ = record_workload(guard=True)
    traces.write_bytes(otlp_json_line(spans) + b"\n")
    log = tmp_path / "ingest.log"
    command = [str(BIN / "otel-repeat-guard"), "ingest", "--follow", "--quiet", "--db", str(db), str(traces)]
    with server_process(command, log, {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}) as process:

        def stored() -> int | None:
            try:  # read-only: never the empty file a plain connect would make before the follower's
                with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
                    (count,) = conn.execute("SELECT count(*) FROM tool_calls").fetchone()
            except sqlite3.OperationalError:  # not there yet, or its schema not yet
                return None
            return count if count == 12 else None

        poll(stored, timeout=30, what="12 ingested tool calls", process=process, log=log)
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(STOPPED) == 0, log.read_text()
        assert time.monotonic() - began < STOPPED
    assert f"ingested {traces} into {db}: " in log.read_text()
    assert not db.with_name(db.name + "-wal").exists()  # the last connection closed: checkpointed and removed
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM tool_calls").fetchone() == (12,)
