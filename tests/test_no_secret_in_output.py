"""No secret in any output: every command that takes a store URL (``--store``, ``--from``) quotes it without its
user, password or secret query parameters, however malformed it is; and a server's error text reaches the user
without the request's credentials, even from an endpoint that reflects the request's headers.

Each case starts the real command line, as a user does, and reads everything it printed.
"""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET = "Zq9SECRETpw"
"""Every URL below holds it (or a piece of it with 'SECRET' in it) where a password or a token goes."""

URLS = {
    "another scheme": f"http://u:{SECRET}@h:8123/otel",
    "a misspelt scheme": f"clickhous://u:{SECRET}@h/db",
    "one slash": f"clickhouse:/u:{SECRET}@h",
    "no slash": f"clickhouse:u:{SECRET}@h/otel",
    "no scheme": f"u:{SECRET}@h:8123/otel",
    "a port that is no number": f"clickhouse://u:{SECRET}@h:notaport/db",
    "a port out of range, a capital scheme and a token": f"CLICKHOUSE://u:{SECRET}@h:99999/otel?token={SECRET}",
    "an unclosed IPv6 address": f"https://u:{SECRET}@[::1/db",
    "a user on a chdb directory": f"chdb://u:{SECRET}@/x",
    "a well-formed URL with a password": f"clickhouse://u:{SECRET}@h:8123/otel",
    "a password in the query": f"clickhouse://h:8123/otel?table=t&password={SECRET}",
    "a password with a slash and a question mark": "clickhouse://u:Zq9/SECRET?pw@h/otel",
    "a percent-encoded colon": f"clickhouse://u%3A{SECRET}@h/otel",
    "a leading space": f" clickhouse://u:{SECRET}@h/otel",
    "a chdb path that holds a user part": f"chdb:///srv/u:{SECRET}@h",
}
COMMANDS = {
    "doctor": ["doctor", "--store"],
    "ingest": ["ingest", "--db", "{tmp}/x.db", "--from"],
    "dashboard": ["dashboard", "--port", "1", "--store"],
    "rollup": ["rollup", "--store"],
}


def _run(argv: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "otel_repeat_guard.cli.main", *argv],
        capture_output=True, text=True, timeout=120, env=environment, cwd=tmp_path, check=False,
    )  # fmt: skip


def _leaks(done: subprocess.CompletedProcess[str], *secrets: str) -> list[str]:
    said = done.stdout + done.stderr
    return [secret for secret in secrets if secret in said]


@pytest.mark.parametrize("url", list(URLS.values()), ids=list(URLS))
@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_a_store_url_is_never_quoted_with_its_secret(command: str, url: str, tmp_path: Path) -> None:
    argv = [word.format(tmp=tmp_path) for word in COMMANDS[command]]
    done = _run([*argv, url], tmp_path)
    assert (done.returncode, done.stderr.count("\n"), done.stdout) == (2, 1, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert _leaks(done, "SECRET") == [], done.stderr


class _Reflecting(http.server.BaseHTTPRequestHandler):
    """A debugging proxy's answer to everything: an error that quotes the request's headers, as a mapping and as
    header lines."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = dict(self.headers)
        body = f"Code: 999. DB::Exception: rejected; request headers {headers!r}\n{self.headers}".encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def reflecting() -> Iterator[int]:
    """A local HTTP server on 127.0.0.1 that reflects every request's headers in its error: yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Reflecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _needs_clickhouse_connect() -> None:
    if os.environ.get("OTEL_REPEAT_GUARD_REQUIRE_BACKENDS") != "1":  # `make test`: a missing client fails
        pytest.importorskip("clickhouse_connect", reason="the clickhouse extra (make test installs it)")


@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_a_server_that_reflects_the_request_never_shows_the_credentials(
    command: str, reflecting: int, tmp_path: Path
) -> None:
    _needs_clickhouse_connect()
    argv = [word.format(tmp=tmp_path) for word in COMMANDS[command]]
    url = f"clickhouse://reader@127.0.0.1:{reflecting}/db" + ("?rollup=guard" if command == "rollup" else "")
    done = _run([*argv, url], tmp_path, {"OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD": SECRET})
    basic = base64.b64encode(f"reader:{SECRET}".encode()).decode()
    assert (done.returncode, done.stderr.count("\n"), done.stdout) == (2, 1, ""), done.stderr
    assert "DB::Exception: rejected" in done.stderr  # the server's own words are still quoted
    assert _leaks(done, SECRET, basic, basic[:12], "SECRET") == [], done.stderr


def test_doctor_refuses_a_password_in_the_url_before_asking_the_reflecting_server(
    reflecting: int, tmp_path: Path
) -> None:
    done = _run(["doctor", "--store", f"http://reader:{SECRET}@127.0.0.1:{reflecting}/db"], tmp_path)
    basic = base64.b64encode(f"reader:{SECRET}".encode()).decode()
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"'http://***@127.0.0.1:{reflecting}/db' is no ClickHouse store URL" in done.stderr
    assert _leaks(done, SECRET, basic, "reader") == []
