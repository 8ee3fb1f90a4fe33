"""Fixtures of the distributed tests: a fresh ``redis-server`` per test (they start in milliseconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.servers import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, durable=True).start()
    try:
        yield server
    finally:
        server.kill()
