"""Every refusal of the command line is exit 2 and one line on stderr, never a traceback."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ingest.otlp import otlp_json_line, record_workload, write_lines

NOBODY = pwd.getpwnam("nobody")
SETPRIV = shutil.which("setpriv")
needs_permissions = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None, reason="needs root and util-linux's setpriv to meet file permissions"
)


def _cli(*args: str, without_override: bool = False, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The command; ``without_override``: as root without the capability to ignore file permissions,
    so a file of another user's with mode 600 is unreadable, as it is for an ordinary user."""
    drop = [str(SETPRIV), "--bounding-set=-dac_override,-dac_read_search", "--"] if without_override else []
    return subprocess.run(
        [*drop, sys.executable, "-m", "otel_repeat_guard.cli.main", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _give_away(path: Path, mode: int) -> None:
    os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    path.chmod(mode)


def _one_line_refusal(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("otel-repeat-guard: error: ")
    for text in expected:
        assert text in done.stderr


@pytest.mark.parametrize("follow", [[], ["--follow"]], ids=["once", "follow"])
def test_a_directory_is_refused(tmp_path: Path, follow: list[str]) -> None:
    db = tmp_path / "store.db"
    _one_line_refusal(_cli("ingest", str(tmp_path), "--db", str(db), *follow), "is a directory")
    assert not db.exists()


@pytest.mark.parametrize("follow", [[], ["--follow"]], ids=["once", "follow"])
def test_a_symlink_loop_is_refused_before_the_store_is_created(tmp_path: Path, follow: list[str]) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    db = tmp_path / "store.db"
    _one_line_refusal(_cli("ingest", str(loop), "--db", str(db), *follow), str(loop))
    assert not db.exists()


@needs_permissions
def test_an_unreadable_input_is_refused(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "traces.json", [otlp_json_line(record_workload(guard=True)[0])])
    _give_away(path, 0o600)
    db = tmp_path / "store.db"
    _one_line_refusal(_cli("ingest", str(path), "--db", str(db), without_override=True), "Permission denied")
    assert not db.exists()
    _one_line_refusal(_cli("doctor", str(path), without_override=True), "Permission denied")


@needs_permissions
def test_a_read_only_store_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "traces.json", [otlp_json_line(record_workload(guard=True)[0])])
    db = tmp_path / "store.db"
    assert _cli("ingest", str(path), "--db", str(db)).returncode == 0
    _give_away(db, 0o444)
    more = write_lines(tmp_path / "more.json", [otlp_json_line(record_workload(guard=True)[0])])
    _one_line_refusal(_cli("ingest", str(more), "--db", str(db), without_override=True), str(db))
