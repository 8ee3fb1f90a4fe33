"""The Claude Code command hook's cost per call: one new process per hook event (issue 24, item 2; issue 40, item 5).

    python -m benchmarks.claude_code_hook [--calls 50]

Times, wall clock, ``--calls`` PostToolUse events of one session (identical calls, so reminders fire at 3, 5
and 8) piped one by one into each entry point, with the chain in SQLite and the call written to the store (no
span: the fast path), as Claude Code starts them; beside a bare ``python -c pass`` of the same interpreter in
the same run, the floor any Python hook pays. Prints the load average, the median [min-max] per call of each,
wall clock and CPU time, against the goal (:data:`GOAL_MS`, median wall clock at load about 1); then where a call's
imports go (``python -X importtime``: the modules, the package's own share, the largest) and what it imports of
OpenTelemetry, which the goal leaves no room for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SESSION = "0f1e2d3c-4b5a-4968-8776-655443322110"
GOAL_MS = 50.0
"""Issue 40, item 5: the hook's median wall clock per call, at load about 1."""


def _event(i: int) -> bytes:
    hook_input = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls -la"},
        "tool_response": {"stdout": "total 0", "stderr": ""},
        "tool_use_id": f"toolu_{i:04d}",
    }
    return json.dumps(hook_input).encode()


def time_calls(command: Sequence[str], calls: int, folder: Path) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) seconds per call of ``command``, each a new process reading one
    event on stdin. The CPU time is the steadier figure on a shared machine."""
    env = {**os.environ, "OTEL_REPEAT_GUARD_DB": str(folder / "store.db")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: byte code cached
    subprocess.run(command, input=_event(0), env=env, capture_output=True, check=True)  # warm the caches
    wall, cpu = [], []
    for i in range(1, calls + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, input=_event(i), env=env, capture_output=True, check=True)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def _summary(seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{statistics.median(ms):.0f} ms [{min(ms):.0f}-{max(ms):.0f}]"


def import_times(folder: Path) -> dict[str, float]:
    """Each module one hook call imports, with its own import time in ms (``python -X importtime``, which inflates
    them: compare them with each other, not with the wall clock)."""
    env = {**os.environ, "OTEL_REPEAT_GUARD_DB": str(folder / "store.db")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = "import sys, otel_repeat_guard_entry; sys.exit(otel_repeat_guard_entry.claude_code_hook())"
    command = [sys.executable, "-X", "importtime", "-c", code]  # as the console script starts it
    subprocess.run(command, input=_event(9_998), env=env, capture_output=True, check=True)  # byte code cached
    done = subprocess.run(command, input=_event(9_999), env=env, capture_output=True, check=True)
    own_ms = {}
    for line in done.stderr.decode().splitlines():
        if line.startswith("import time:") and not line.endswith("package"):
            own_us, _, name = line.removeprefix("import time:").split("|")
            own_ms[name.strip()] = int(own_us) / 1000
    return own_ms


def _import_lines(own_ms: dict[str, float], shown: int = 8) -> list[str]:
    package = sum(ms for name, ms in own_ms.items() if name.startswith("otel_repeat_guard"))
    otel = [ms for name, ms in own_ms.items() if name.startswith("opentelemetry")]
    largest = sorted(own_ms.items(), key=lambda item: -item[1])[:shown]
    return [
        f"imports of one hook call (python -X importtime, own times): {len(own_ms)} modules, "
        f"{sum(own_ms.values()):.0f} ms in all, otel_repeat_guard's {package:.0f} ms",
        "  the largest: " + ", ".join(f"{name} {ms:.1f}" for name, ms in largest),
        f"OpenTelemetry on the hook's path: {len(otel)} modules, {sum(otel):.0f} ms of their own",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    commands = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "otel-repeat-guard-claude-code-hook": [str(bin_dir / "otel-repeat-guard-claude-code-hook")],
        "otel-repeat-guard claude-code-hook": [str(bin_dir / "otel-repeat-guard"), "claude-code-hook"],
    }
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.calls} PostToolUse calls per command, chain in SQLite, the call into the store; load average {load}")
    print(f"per call (median [min-max]); goal: the hook's median wall clock at most {GOAL_MS:.0f} ms at load about 1")
    for name, command in commands.items():
        with tempfile.TemporaryDirectory() as folder:
            wall, cpu = time_calls(command, args.calls, Path(folder))
            print(f"  {name}: wall {_summary(wall)}, CPU {_summary(cpu)}")
    with tempfile.TemporaryDirectory() as folder:
        own_ms = import_times(Path(folder))
    print("\n".join(_import_lines(own_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
