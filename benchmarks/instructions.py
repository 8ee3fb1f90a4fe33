"""Instructions per span lifecycle, counted by valgrind: ``python -m benchmarks.instructions``.

Timings on a shared 2-core machine swing by tens of percent; instruction counts do not.
Each variant runs one pipeline twice under cachegrind, with 500 and 1,500 spans after a
warm-up, and the difference per span is its cost: interpreter start-up and imports
cancel out. The guard's variants with its decision switched off show what the live-span
bookkeeping alone costs. Needs ``valgrind``; takes about two minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from opentelemetry.sdk.trace import SpanProcessor

from benchmarks import workloads as w
from benchmarks.sketch import MinimalSketch
from otel_repeat_guard import GuardConfig, RepeatGuardSpanProcessor, build_mode

VARIANTS = {
    "no-op processor": ("noop", "tool"),
    "minimal sketch, 200 B, 20% repeats": ("sketch", "tool"),
    "guard, 200 B, 20% repeats": ("guard", "tool"),
    "guard, 200 B, no repeats": ("guard", "tool-distinct"),
    "guard, 200 B, all repeats": ("guard", "tool-same"),
    "guard, live-span bookkeeping only": ("bookkeeping", "tool"),
    "guard, non-tool spans": ("guard", "non-tool"),
    "guard, non-tool spans, chat output messages": ("guard", "non-tool-output"),
    "guard + cycles, 200 B, 20% repeats": ("guard-cycle", "tool"),
    "guard + no progress, 200 B, 20% repeats": ("guard-no-progress", "tool"),
    "guard + parallel collapse, 200 B, 20% repeats": ("guard-parallel", "tool"),
    "guard + every detector, 200 B, 20% repeats": ("guard-all", "tool"),
}
_COUNTS = (500, 1_500)


class _BookkeepingOnly(RepeatGuardSpanProcessor):
    """The guard with its decision switched off: on_start, on_end and the calls into them."""

    def __init__(self) -> None:
        super().__init__()
        self._guard.ended = lambda span: None  # type: ignore[method-assign]


def _child(processor: str, workload: str, count: int) -> None:
    fronts: dict[str, Callable[[], list[SpanProcessor]]] = {  # built on demand: only the one this child runs
        "none": lambda: [],
        "noop": lambda: [w.NoopProcessor()],
        "sketch": lambda: [MinimalSketch()],
        "guard": lambda: [RepeatGuardSpanProcessor()],
        "bookkeeping": lambda: [_BookkeepingOnly()],
        "guard-cycle": lambda: [RepeatGuardSpanProcessor(GuardConfig(cycle_thresholds=(3,)))],
        "guard-no-progress": lambda: [RepeatGuardSpanProcessor(GuardConfig(no_progress_thresholds=(3,)))],
        "guard-parallel": lambda: [RepeatGuardSpanProcessor(GuardConfig(collapse_parallel=True))],
        "guard-all": lambda: [
            RepeatGuardSpanProcessor(
                GuardConfig(cycle_thresholds=(3,), no_progress_thresholds=(3,), collapse_parallel=True)
            )
        ],
    }
    p = w.pipeline(*fronts[processor]())
    share = {"tool": 0.2, "tool-distinct": 0.0, "tool-same": 1.0}.get(workload, 0.2)
    calls = w.tool_arguments(200, 2_000, share)

    def run(n: int) -> None:
        if workload.startswith("non-tool"):
            w.non_tool_segment(p, n, output_messages=workload == "non-tool-output")
        else:
            w.tool_segment(p, calls[:n])

    run(200)  # warm-up: first-call caches, specialization
    p.flush()
    if count:
        run(count)


def instructions_of(module: str, *child: str) -> int:
    """The instructions valgrind counts for ``python -m module --child *child``."""
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
        sys.executable, "-m", module, "--child", *child,
    ]  # fmt: skip
    # a fixed hash seed: string hashes decide dict layouts, which move counts by a few thousand
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=environment).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out}")
    return int(found.group(1).replace(",", ""))


def _per_span(processor: str, workload: str) -> float:
    low, high = (instructions_of("benchmarks.instructions", processor, workload, str(n)) for n in _COUNTS)
    return (high - low) / (_COUNTS[1] - _COUNTS[0])


def main() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    # A compiled class cannot be subclassed from Python: the bookkeeping-only variant is pure-only.
    compiled = build_mode() == "compiled"
    variants = {label: job for label, job in VARIANTS.items() if not (compiled and job[0] == "bookkeeping")}
    print(f"otel_repeat_guard build: {build_mode()}", flush=True)
    jobs = {("none", "tool"), ("none", "non-tool"), ("none", "non-tool-output"), *variants.values()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _per_span(*job), jobs), strict=True))
    print(f"{'variant':40} {'instructions per span':>22} {'over no processor':>18}")
    for label, (processor, workload) in variants.items():
        base = counts[("none", workload if workload.startswith("non-tool") else "tool")]
        extra = counts[(processor, workload)] - base
        print(f"{label:40} {counts[(processor, workload)]:22,.0f} {extra:+12,.0f} ({extra / base:+.1%})")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(main())
