"""The compose services' own commands, run here: the dashboard entrypoint and the demo agent."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

import yaml

from tests.backends.servers import ROOT, free_port, get_ok, poll, server_process
from tests.deploy.test_stack import env
from tests.ingest.otlp import otlp_json_line, record_workload
from tests.production.receiver import otlp_receiver

BIN = Path(sys.executable).parent


def compose_service(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][name]  # type: ignore[no-any-return]


@contextmanager
def running(tmp_path: Path) -> Iterator[tuple[Popen[bytes], Path, Path]]:
    """The entrypoint with its paths in tmp_path, once the dashboard answers: (process, log, traces file)."""
    traces, db, port = tmp_path / "otel" / "traces.jsonl", tmp_path / "store" / "repeat-guard.db", free_port()
    traces.parent.mkdir()
    db.parent.mkdir()
    variables = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    variables.update(env(compose_service("dashboard")))
    variables.update(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        TRACES_FILE=str(traces),
        OTEL_REPEAT_GUARD_DB=str(db),
        DASHBOARD_HOST="127.0.0.1",
        DASHBOARD_PORT=str(port),
    )
    log = tmp_path / "entrypoint.log"
    # SIGINT at its default, as a container's PID 1 gets it, whatever this test run inherited: `make test &` or
    # nohup in a script starts it with SIGINT ignored, every child inherits that, and bash cannot trap a signal
    # ignored when it started. (GNU env; a preexec_fn is unsafe in a process with threads.)
    command = ["env", "--default-signal=INT", str(ROOT / "deploy/dashboard-entrypoint.sh")]
    with server_process(command, log, variables) as process:
        poll(
            lambda: get_ok(f"http://127.0.0.1:{port}/_stcore/health"),
            timeout=60,
            what="dashboard",
            process=process,
            log=log,
        )
        yield process, log, traces


def test_dashboard_entrypoint_follows_the_collector_file_and_serves(tmp_path: Path) -> None:
    """``deploy/dashboard-entrypoint.sh``, the Dockerfile's ENTRYPOINT, with the paths pointed at tmp_path."""
    spans, _ = record_workload(guard=True)
    with running(tmp_path) as (process, log, traces):
        traces.write_bytes(otlp_json_line(spans[:6]) + b"\n")  # the Collector starts writing after the dashboard

        def stored() -> int | None:
            with sqlite3.connect(tmp_path / "store" / "repeat-guard.db") as conn:
                (count,) = conn.execute("SELECT count(*) FROM tool_calls").fetchone()
            return count if count == 12 else None

        with traces.open("ab") as out:
            out.write(otlp_json_line(spans[6:]) + b"\n")
        assert poll(stored, timeout=30, what="12 ingested tool calls", process=process, log=log) == 12


def test_demo_agent_command_exports_to_an_otlp_endpoint(tmp_path: Path) -> None:
    """The compose demo-agent's entrypoint, command and environment, with a short run and a local receiver."""
    service = compose_service("demo-agent")
    command = [str(BIN / service["entrypoint"][0]), *service["command"], "--seconds", "0", "--agents", "2"]
    command += ["--db", str(tmp_path / "demo.db")]  # later options win over the compose ones
    with otlp_receiver() as (endpoint, received):
        variables = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        variables.update(env(service))
        variables["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        log = tmp_path / "demo.log"
        with server_process(command, log, variables) as process:
            assert process.wait(120) == 0, log.read_text()
        deadline = time.monotonic() + 10
        while not received.metric_points("repeat_tool_guard.repeated_calls") and time.monotonic() < deadline:
            time.sleep(0.1)
        spans = [s for _, s in received.spans()]
        tools = [s for s in spans if s.name.startswith("execute_tool")]
        assert tools, log.read_text()
        assert any(e.name == "repeat_tool_guard.reminder" for s in tools for e in s.events)
        assert received.metric_points("repeat_tool_guard.repeated_calls")
        assert received.metric_points("repeat_tool_guard.reminders")
