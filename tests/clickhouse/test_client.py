"""The store URL, the credentials, and the server client's failures: each one line, never a traceback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from otel_repeat_guard.cli.main import main
from otel_repeat_guard.clickhouse.client import ClickHouseStoreError, ServerClient, explain, scrubbed
from otel_repeat_guard.clickhouse.target import PASSWORD_ENV, PASSWORD_FILE_ENV, Target, TargetError, parse

pytest.importorskip("clickhouse_connect", reason="the clickhouse extra (make test installs it)")


def test_a_server_url_names_host_port_database_and_table() -> None:
    target = parse("clickhouse://reader@ch.internal:9000/traces?table=spans", {PASSWORD_ENV: "s3cret"})
    assert (target.host, target.port, target.user, target.database, target.table) == (
        "ch.internal", 9000, "reader", "traces", "spans"
    )  # fmt: skip
    assert target.password == "s3cret"
    assert "s3cret" not in repr(target) and "s3cret" not in target.describe()


def test_the_defaults_are_the_exporters(tmp_path: Path) -> None:
    target = parse(f"chdb://{tmp_path}")
    assert (target.path, target.database, target.table) == (tmp_path, "otel", "otel_traces")
    assert parse("clickhouse://h").port == 8123 and parse("clickhouse://h?secure=1").port == 8443


def test_the_password_comes_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    assert parse("clickhouse://u@h/otel", {PASSWORD_FILE_ENV: str(secret)}).password == "from-file"
    with pytest.raises(TargetError, match="cannot read the ClickHouse password file"):
        parse("clickhouse://u@h/otel", {PASSWORD_FILE_ENV: str(tmp_path / "missing")})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("clickhouse://u:pw@h/otel", "a password in the store URL is refused"),
        ("clickhouse://h/otel?table=x;drop", "not a plain ClickHouse identifier"),
        ("clickhouse://h/otel?table=otel_traces%0A", "not a plain ClickHouse identifier"),  # $ matches before \n
        ("chdb:///tmp/ch?table=t&rollup=g%0A", "not a plain ClickHouse identifier"),
        ("clickhouse://h/otel?colour=red", "unknown store URL option"),
        ("clickhouse:///otel", "needs a host"),
        ("chdb://", "needs a data directory"),
        ("repeat-guard.db", "'repeat-guard.db' is no store URL: .* or --db FILE for a SQLite store"),
        ("postgres://h/db", "'postgres://h/db' is no ClickHouse store URL: use clickhouse://… or chdb://…"),
        ("clickhouse:/h/otel", "'clickhouse:/h/otel' is no ClickHouse store URL"),  # one slash: no host at all
        ("chdb://me@/tmp/x", "'chdb://\\*\\*\\*@/tmp/x': chdb:// takes a data directory"),
    ],
)
def test_unusable_urls_are_refused_in_one_line(url: str, message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        parse(url, {})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["clickhouse://u:hunter2@[::1/otel", "chdb://u:hunter2@/tmp/x", "clickhouse://u:hunter2@h:abc/otel"],
    ids=["an-unclosed-ipv6-bracket", "a-chdb-directory", "a-port-in-words"],
)
def test_a_password_in_a_url_too_broken_to_use_is_never_quoted(url: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse(url, {})
    assert "hunter2" not in str(caught.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_one_line() -> None:
    port = _free_port()
    with pytest.raises(ClickHouseStoreError) as caught:
        ServerClient(parse(f"clickhouse://reader@127.0.0.1:{port}/otel?connect_timeout=2", {}))
    assert (
        str(caught.value)
        == f"cannot reach ClickHouse at reader@http://127.0.0.1:{port} (otel.otel_traces): connection refused"
    )


class _RefusesCredentials(BaseHTTPRequestHandler):
    """Answers every request as a ClickHouse server answers a wrong password (HTTP 516 and its exception)."""

    def _refuse(self) -> None:
        body = b"Code: 516. DB::Exception: reader: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED) (version 25.8.1.1)\n"
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def refusing_server() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _RefusesCredentials)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


def test_bad_credentials_are_one_line(refusing_server: int) -> None:
    target = parse(f"clickhouse://reader@127.0.0.1:{refusing_server}/otel", {PASSWORD_ENV: "wrong"})
    with pytest.raises(ClickHouseStoreError) as caught:
        ServerClient(target)
    assert str(caught.value).startswith("ClickHouse at reader@http://127.0.0.1:")
    assert "refused the credentials of user 'reader'" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_table_is_one_line() -> None:
    """The server's exception for an unknown table, as clickhouse-connect raises it from a query."""
    from clickhouse_connect.driver.exceptions import DatabaseError

    target = parse("clickhouse://reader@ch:8123/otel?table=otel_traces", {})
    error = DatabaseError(
        "HTTPDriver for http://ch:8123 received ClickHouse error code 60\n"
        " Code: 60. DB::Exception: Unknown table expression identifier 'otel.otel_traces'. (UNKNOWN_TABLE)"
    )
    assert str(explain(target, error)) == (
        "ClickHouse at reader@http://ch:8123 (otel.otel_traces) has no table otel.otel_traces: "
        "is the Collector's clickhouse exporter writing there (database and traces_table_name)?"
    )


def test_a_missing_chdb_table_refuses_the_commands_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["doctor", "--store", f"chdb://{tmp_path}"], ["dashboard", "--store", f"chdb://{tmp_path}"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "has no table otel.otel_traces" in err


def test_a_chdb_directory_that_does_not_exist_is_refused_and_never_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped directory: reading commands say so in one line, and leave no directory behind."""
    typo = tmp_path / "typo" / "deeper"
    for argv in (["doctor", "--store", f"chdb://{typo}"], ["ingest", "--from", f"chdb://{typo}"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"no chdb data directory at {typo}" in err
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["dashboard", "--store", "clickhouse://u:pw@127.0.0.1/otel"],
        ["dashboard", "--store", "chdb://x", "--db", "x.db"],
        ["doctor"],
        ["doctor", "f.jsonl", "--store", "chdb://x"],
    ],
)
def test_cli_refusals_are_exit_2_and_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("otel-repeat-guard: error: ") and err.count("\n") == 1


class _WebServer(BaseHTTPRequestHandler):
    """A port where something other than ClickHouse answers: a web server, a proxy (HTTP 404)."""

    def _not_found(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _not_found

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


def test_a_port_where_no_clickhouse_answers_is_named_as_such() -> None:
    server = HTTPServer(("127.0.0.1", 0), _WebServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ClickHouseStoreError) as caught:
            ServerClient(parse(f"clickhouse://reader@127.0.0.1:{server.server_address[1]}/otel?connect_timeout=2", {}))
    finally:
        server.shutdown()
    message = str(caught.value)
    assert "\n" not in message and "404" in message
    assert message.endswith("(is that port ClickHouse's HTTP interface: 8123, or 8443 with secure=1?)")


def test_a_servers_text_loses_every_header_like_credential_and_keeps_its_own_words() -> None:
    target = Target(host="h", user="reader", password="hunter2-long")
    text = (
        "Code: 516. DB::Exception: reader: Authentication failed\n"
        "Authorization: Basic cmVhZGVyOmh1bnRlcjItbG9uZw==\n"
        "Proxy-Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig\n"
        "Cookie: session=abc; other=def\n"
        "X-ClickHouse-Key: hunter2-long\n"
        "{'Authorization': 'Digest username=\"reader\", response=\"6629fae49393a05397450978507c4ef1\"'}\n"
        "echoed hunter2-long and QWxhZGRpbjpvcGVuIHNlc2FtZQ== and token=t0k3n&x=1"
    )
    clean = scrubbed(target, text)
    for secret in ("hunter2", "cmVhZGVy", "eyJhbGci", "abc", "def", "6629fae4", "QWxhZGRp", "t0k3n"):
        assert secret not in clean, (secret, clean)
    assert clean.splitlines()[0] == "Code: 516. DB::Exception: reader: Authentication failed"
    assert "Authorization: ***" in clean and "Cookie: ***" in clean and "token=***" in clean
