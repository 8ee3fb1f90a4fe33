"""Every Python block of ``docs/distributed.md`` runs as written, against a real Redis."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.servers import RedisServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_blocks() -> None:
    assert len(BLOCKS) == 3
    assert all(language in ("python", "sh") for language in re.findall(r"```(\w+)\n", DOC.read_text(encoding="utf-8")))


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_python_block_runs(redis_server: RedisServer, index: int) -> None:
    env = {**os.environ, "OTEL_REPEAT_GUARD_STORE": redis_server.url}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]], check=False, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed" not in done.stderr  # the store answered: no outage was logged
    if "RunActivity" in BLOCKS[index]:
        assert done.stdout.strip() == "3"
