"""A dashboard port that something else listens on: one line, exit 2, before anything else is printed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_repeat_guard.cli.ports import busy_port
from otel_repeat_guard.store import open_for_writing


@pytest.fixture
def listener() -> Iterator[int]:
    """A real socket listening on a loopback port the system chose; yields the port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_port_something_listens_on_is_named_busy(listener: int) -> None:
    assert busy_port("127.0.0.1", listener) == (
        f"port {listener} on 127.0.0.1 is in use: stop what listens there or choose another with --port"
    )


def test_a_port_nothing_listens_on_is_free() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert busy_port("127.0.0.1", port) is None


def test_the_dashboard_on_a_busy_port_prints_one_line_and_exits_2(tmp_path: Path, listener: int) -> None:
    db = tmp_path / "ok.db"
    open_for_writing(db).close()
    result = run_cli("dashboard", "--db", str(db), "--port", str(listener))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"otel-repeat-guard: error: port {listener} on 127.0.0.1 is in use: "
        "stop what listens there or choose another with --port\n"
    )


def test_the_demo_with_a_dashboard_on_a_busy_port_refuses_before_the_demo_runs(tmp_path: Path, listener: int) -> None:
    db = tmp_path / "demo.db"
    result = run_cli("demo", "--db", str(db), "--seconds", "0", "--agents", "1", "--dashboard", "--port", str(listener))
    assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1)
    assert result.stderr.startswith(f"otel-repeat-guard: error: port {listener} on 127.0.0.1 is in use")
    assert not db.exists()


def test_an_address_of_another_machine_is_named_as_the_problem_not_the_port() -> None:
    said = busy_port("192.0.2.1", 8501)  # TEST-NET-1: never an address of this machine
    assert said == "192.0.2.1 is no address of this machine: give one of its own with --host (127.0.0.1 by default)"


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("target", ["demo", "dashboard"])
def test_under_make_the_busy_port_hint_names_port_equals(tmp_path: Path, listener: int, target: str) -> None:
    """`make demo` sets --port from PORT=: its hint names PORT=, which is what the user changes there. The real
    make runs the real recipe, with the demo's virtualenv's command standing for this interpreter's CLI."""
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    bin_dir = tmp_path / "demo" / "bin"
    bin_dir.mkdir(parents=True)
    command = bin_dir / "otel-repeat-guard"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m otel_repeat_guard.cli.main "$@"\n')
    command.chmod(0o755)
    (bin_dir / ".installed").touch()  # newer than every source: make runs the recipe alone
    db = tmp_path / "ok.db"
    open_for_writing(db).close()
    # a make of its own, not a job of the make running these tests (whose jobserver it would warn about)
    environ = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", target, f"VENV_DEMO={tmp_path / 'demo'}",
         f"PORT={listener}", f"DB={db}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        f"otel-repeat-guard: error: port {listener} on 127.0.0.1 is in use: "
        f"stop what listens there or choose another with make {target} PORT=…"
    ), done.stderr
