"""Every wait on a ClickHouse server is bounded (issue 41.6): a port that accepts connections and never answers is
refused by ``doctor``, ``ingest --from``, ``rollup`` and ``dashboard`` after the store URL's ``connect_timeout``
(5 s unless the URL says), in one line naming the bound and how to raise it, exit 2. ``doctor`` waited 62 s."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote_plus

import pytest

from otel_repeat_guard.clickhouse.client import ClickHouseStoreError, ServerClient
from otel_repeat_guard.clickhouse.target import (
    CONNECT_TIMEOUT_S,
    SEND_RECEIVE_TIMEOUT_S,
    TargetError,
    parse,
)

pytest.importorskip("clickhouse_connect", reason="the clickhouse extra (make test installs it)")

CLI = shutil.which("otel-repeat-guard") or str(Path(sys.executable).with_name("otel-repeat-guard"))
START_S = 15.0
"""What the command's own start may take on a busy 2-core machine (imports), on top of the bound."""


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    listener.close()
    for connection in held:
        connection.close()


def _run(argv: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [CLI, *argv], capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path, stdin=subprocess.DEVNULL
    )
    return done, time.monotonic() - started


def test_doctor_refuses_a_silent_clickhouse_port_within_the_default_connect_timeout(
    silent_port: int, tmp_path: Path
) -> None:
    done, elapsed = _run(["doctor", "--store", f"clickhouse://reader@127.0.0.1:{silent_port}/otel"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert elapsed < CONNECT_TIMEOUT_S + START_S  # it waited 62 s (the old 60 s read timeout)
    assert elapsed >= CONNECT_TIMEOUT_S - 0.5  # the bound it states, not an earlier give-up
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr == (
        f"otel-repeat-guard: error: ClickHouse at reader@http://127.0.0.1:{silent_port} (otel.otel_traces) gave no "
        f"answer within connect_timeout={CONNECT_TIMEOUT_S} s (connecting and its first answer): is that port "
        "ClickHouse's HTTP interface? Raise the bound with the store URL option connect_timeout=SECONDS\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--store", "{url}"],
        ["ingest", "--from", "{url}", "--db", "from.db", "--quiet"],
        ["rollup", "--store", "{url}&rollup=guard"],
        ["dashboard", "--store", "{url}"],
    ],
    ids=["doctor", "ingest-from", "rollup", "dashboard"],
)
def test_every_command_refuses_a_silent_port_within_the_connect_timeout_the_url_sets(
    silent_port: int, tmp_path: Path, argv: list[str]
) -> None:
    url = f"clickhouse://reader@127.0.0.1:{silent_port}/otel?table=otel_traces&connect_timeout=1"
    done, elapsed = _run([arg.format(url=url) for arg in argv], tmp_path)
    assert done.returncode == 2, done.stderr
    assert elapsed < 1 + START_S
    assert done.stderr.count("\n") == 1
    assert "gave no answer within connect_timeout=1 s" in done.stderr
    assert done.stderr.endswith("Raise the bound with the store URL option connect_timeout=SECONDS\n")


def test_the_timeouts_default_and_are_read_from_the_store_url() -> None:
    target = parse("clickhouse://h/otel")
    assert (
        (target.connect_timeout, target.send_receive_timeout) == (CONNECT_TIMEOUT_S, SEND_RECEIVE_TIMEOUT_S) == (5, 60)
    )
    target = parse("clickhouse://h/otel?connect_timeout=2&send_receive_timeout=600")
    assert (target.connect_timeout, target.send_receive_timeout) == (2, 600)
    assert parse("chdb:///tmp/x?connect_timeout=2").connect_timeout == 5  # no server, nothing to wait on


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "abc", "", "86401", "٣"])
@pytest.mark.parametrize("option", ["connect_timeout", "send_receive_timeout"])
def test_a_timeout_that_is_no_whole_number_of_seconds_is_refused_by_name(option: str, value: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse(f"clickhouse://h/otel?{option}={value}", {})
    assert str(caught.value) == (
        f"the store URL option {option}={value!r} is not a whole number of seconds from 1 to 86400 "
        f"(the default is {CONNECT_TIMEOUT_S if option == 'connect_timeout' else SEND_RECEIVE_TIMEOUT_S})"
    )


class _SlowQueries(BaseHTTPRequestHandler):
    """Answers clickhouse-connect's questions at connect as a server would (its version; no settings), then takes
    2 s over ``SELECT 2`` and never answers any other query."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        text = unquote_plus(self.path) + self.rfile.read(length).decode("utf-8", "replace")
        if "version()" in text:
            body = b"25.8.1.1\tUTC\n"
        elif "system.settings" not in text and "AS check" not in text:
            time.sleep(2 if "SELECT 2" in text else 30)
            body = b""
        else:
            body = b""  # no rows
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up first
            pass

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def slow_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowQueries)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()


def test_a_query_the_server_never_answers_is_refused_after_send_receive_timeout(slow_server: int) -> None:
    client = ServerClient(parse(f"clickhouse://reader@127.0.0.1:{slow_server}/otel?send_receive_timeout=1", {}))
    started = time.monotonic()
    with pytest.raises(ClickHouseStoreError) as caught:
        client.frame("SELECT 1", {})
    assert time.monotonic() - started < 1 + 5
    assert str(caught.value) == (
        f"ClickHouse at reader@http://127.0.0.1:{slow_server} (otel.otel_traces) gave no answer within "
        "send_receive_timeout=1 s (waiting on a query's next bytes): narrow the time range, or raise the bound with "
        "the store URL option send_receive_timeout=SECONDS"
    )


def test_a_query_may_take_longer_than_connecting_may(slow_server: int) -> None:
    """The first answer waits connect_timeout; a query waits send_receive_timeout, not the shorter bound."""
    url = f"clickhouse://reader@127.0.0.1:{slow_server}/otel?connect_timeout=1&send_receive_timeout=20"
    assert ServerClient(parse(url, {})).frame("SELECT 2", {}).empty
