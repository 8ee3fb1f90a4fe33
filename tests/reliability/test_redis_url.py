"""GuardConfig checks a Redis URL fully, with the parser redis-py's ``Redis.from_url`` uses, and names the
field and the variable it came from; the password never appears in the message."""

from __future__ import annotations

import sys

import pytest
import redis

from otel_repeat_guard import GuardConfig

BAD = [
    ("redis://host:port", "Port could not be cast to integer value as 'port'"),
    ("redis://:99999", "Port out of range 0-65535"),
    ("redis://[::1", "Invalid IPv6 URL"),
    ("rediss://cache?socket_timeout=soon", "Invalid value for 'socket_timeout' in connection URL."),
    ("redis://user:s3cret@cache:65536/0", "Port out of range 0-65535"),
    # redis-py parses these, and then every call fails, or the value is quietly another
    ("redis://cache/0?foo=bar", "unknown option(s) foo"),
    ("rediss://cache/0?ssl_ca_cert=/etc/ca.pem", "unknown option(s) ssl_ca_cert"),  # ssl_ca_certs
    ("redis://cache/abc", "the database after the host must be a number, got 'abc'"),
    ("unix://", "a unix:// URL needs the socket's path, as unix:///run/redis.sock"),
]
GOOD = [
    "redis://localhost:6379/0",
    "rediss://user:s3cret@cache:6380/2",
    "unix:///run/redis.sock?db=1",
    "redis://cache",
    "redis://cache/",
    "rediss://cache/1?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required",
    "redis://cache/0?max_connections=4&client_name=me@host&health_check_interval=3&socket_keepalive=true",
]


@pytest.mark.parametrize(("url", "problem"), BAD)
def test_a_malformed_redis_url_is_refused_naming_the_field_and_the_variable(url: str, problem: str) -> None:
    shown = url.replace("user:s3cret", "***")  # the user part whole: user and password
    expected = f"chain_store is not a valid Redis URL ({problem}), got {shown!r}"
    with pytest.raises(ValueError) as in_code:
        GuardConfig(chain_store=url)
    assert str(in_code.value) == expected
    for variable in ("OTEL_REPEAT_GUARD_CHAIN_STORE", "OTEL_REPEAT_GUARD_STORE"):
        with pytest.raises(ValueError) as from_env:
            GuardConfig.from_env({variable: url})
        assert str(from_env.value) == f"{variable}: {expected}"
        assert "s3cret" not in str(from_env.value)
    for good in GOOD:  # what redis-py itself accepts passes, unchanged
        assert GuardConfig(chain_store=good).chain_store == good
        redis.connection.parse_url(good)  # type: ignore[no-untyped-call]


def test_without_redis_installed_only_the_scheme_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis.connection", None)  # as if the redis extra were not installed
    assert GuardConfig(chain_store="redis://host:port").chain_store == "redis://host:port"
    with pytest.raises(ValueError, match=r"^chain_store must be 'memory' or a Redis URL starting with redis://"):
        GuardConfig(chain_store="http://cache:6379")
