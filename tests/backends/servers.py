"""Real servers for tests: started on free loopback ports, always stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRED_ENV = "OTEL_REPEAT_GUARD_REQUIRE_BACKENDS"  # set by `make test`: a missing server fails, never skips
T = TypeVar("T")


def find_tool(env: str, default: str | Path | None) -> Path:
    """The executable named by ``$env`` or ``default``; skip (or fail under ``make test``) if absent."""
    candidate = os.environ.get(env) or (str(default) if default else None)
    if candidate and Path(candidate).is_file():
        return Path(candidate)
    message = f"{env} / {default} not found: `make test` installs it"
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server_process(
    command: list[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` in its own process group; terminate the group (then kill) when done."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def get_ok(url: str, timeout: float = 5.0) -> bool | None:
    """True when ``url`` answers 200, else None (for :func:`poll`)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return True if response.status == 200 else None


def poll(probe: Callable[[], T | None], *, timeout: float, what: str, process: subprocess.Popen[bytes], log: Path) -> T:
    """Call ``probe`` until it returns a value; fail with the server's log if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"{what}: the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            value = probe()
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            value = None
        if value is not None:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: nothing after {timeout} s; server log:\n{log.read_text()[-3000:]}")
        time.sleep(0.25)


def which(name: str) -> str | None:
    return shutil.which(name)
