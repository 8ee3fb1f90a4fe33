"""A real ``redis-server`` for the distributed tests: on a free loopback port, in a temporary folder, always stopped.

Debian's ``redis-server`` (``make test`` installs it). Absent, the tests skip, or fail under
``OTEL_REPEAT_GUARD_REQUIRE_BACKENDS=1``; so they do without the ``redis`` Python package.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REQUIRED_ENV = "OTEL_REPEAT_GUARD_REQUIRE_BACKENDS"


def _missing(what: str) -> None:
    message = f"{what} not found: `make test` installs it"
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def require_redis() -> str:
    """The ``redis-server`` executable, with the ``redis`` package importable; skip (or fail) otherwise."""
    found = shutil.which("redis-server")
    if found is None:
        _missing("redis-server (apt-get install redis-server)")
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("the redis package (pip install 'otel-repeat-guard[redis]')")
    return str(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process; ``durable`` keeps its data across a kill (append-only file, fsync always)."""

    def __init__(self, folder: Path, *, durable: bool = False) -> None:
        self.executable = require_redis()
        self.folder = folder
        self.port = free_port()
        self.durable = durable
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.durable else ["--appendonly", "no"]
        command = [
            self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--save", "", *persistence, "--daemonize", "no", "--logfile", "",
        ]  # fmt: skip
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"redis-server exited with {self.process.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"redis-server did not answer on port {self.port}: {self.log()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: an outage, not a shutdown (nothing is saved on the way out)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections and answers nothing (a slow Redis)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def log(self) -> str:
        path = self.folder / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


class TrickleProxy:
    """A TCP proxy on a free loopback port in front of ``target_port`` (a real ``redis-server``), on threads.

    Requests go through at once; replies too, unless ``trickling``: then every connection's replies, valid RESP
    from the real server, reach the client one byte every ``delay`` seconds (each read of the client's is
    answered within any per-read timeout, the command never within a short one). Switching it off lets what is
    left go through at once."""

    def __init__(self, target_port: int, delay: float = 0.03) -> None:
        self.target_port = target_port
        self.delay = delay
        self.trickling = False
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="trickle-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self.connections += 1
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, reply: bool) -> None:
        try:
            while data := source.recv(65536):
                for at in range(len(data)):
                    if not (reply and self.trickling):
                        sink.sendall(data[at:])
                        break
                    sink.sendall(data[at : at + 1])
                    time.sleep(self.delay)
        except OSError:
            pass
        finally:  # one side closed: close the other (a client that gave up closes its upstream too)
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
