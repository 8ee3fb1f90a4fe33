"""Run every benchmark case and print the table: ``python -m benchmarks [--quick] [--only matrix] [--markdown FILE]``.

``--build pure`` or ``--build compiled`` picks the build of otel_repeat_guard (see ``benchmarks.builds``);
``python -m benchmarks.side_by_side`` runs both and prints one table. ``--only matrix`` runs the control
(for the noise band) and the span-shape matrix (``benchmarks.matrix``) alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import builds

if TYPE_CHECKING:
    from benchmarks.cases import Row


def _table(rows: list[Row]) -> str:
    lines = ["| case | measured (median [min-max]) | goal | met |", "|---|---|---|---|"]
    for row in rows:
        met = "-" if row.met is None else ("yes" if row.met else "**NO**")
        lines.append(f"| {row.case} | {row.measured} | {row.goal} | {met} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and agents, for a smoke run")
    parser.add_argument("--markdown", type=Path, help="also write the table, with the machine, to this file")
    parser.add_argument("--build", choices=builds.BUILDS, help="the build of otel_repeat_guard to measure")
    parser.add_argument("--json", type=Path, help="also write the rows and the build to this file")
    parser.add_argument("--million", action="store_true", help="also the per-run state at 1,000,000 agents (slow)")
    parser.add_argument(
        "--only",
        choices=("all", "matrix", "million"),
        default="all",
        help="every case, the control and matrix, or only the per-run state at 1,000,000 agents",
    )
    args = parser.parse_args()
    builds.select(args.build)
    build = builds.verify(args.build)
    print(f"otel_repeat_guard build: {build}", flush=True)
    from benchmarks import cases, matrix  # after select: the cases import the guard
    from benchmarks.cases import Settings

    quick = Settings(
        rounds=3, segment=500, memory_agents=5_000, max_scale=10_000, million_agents=20_000, million_window=4_000
    )
    settings = quick if args.quick else Settings()

    started = time.perf_counter()
    if args.only == "million":  # no timing: the control's noise band is not needed
        row = matrix.state_at_a_million(settings)
        print(f"{row.case}: {row.measured}  [goal {row.goal}]\n({time.perf_counter() - started:.0f} s)", flush=True)
        return builds.exit_code([] if row.met else [row.case])
    rows: list[Row] = []
    control_row, band = cases.control(settings)
    rows.append(control_row)
    print(f"noise band from the control: ±{band:.3f}", flush=True)
    steps: list[Callable[[], list[Row]]] = [
        lambda: cases.tool_overhead(settings, band),
        lambda: [cases.non_tool(settings, band)],
        lambda: [cases.non_tool_with_output(settings, band)],
        lambda: [cases.threshold_hits(settings)],
        lambda: cases.comparison_anchors(settings),
        lambda: cases.memory(settings),
        lambda: cases.scaling(settings),
        lambda: [cases.store_write(settings)],
    ]
    if args.only == "matrix":
        steps = []
    steps += [
        lambda: matrix.tool_shapes(settings, band),
        lambda: matrix.progress_shapes(settings, band),
        lambda: matrix.facts_off(settings),
        lambda: matrix.non_tool(settings, band),
        lambda: matrix.log_events(settings, band),
    ]
    if args.million:  # about two minutes per build; 20,000 agents with --quick
        steps.append(lambda: [matrix.state_at_a_million(settings)])
    for step in steps:
        step_started = time.perf_counter()
        for row in step():
            rows.append(row)
            print(f"{row.case}: {row.measured}  [goal {row.goal}]", flush=True)
        print(f"  ({time.perf_counter() - step_started:.0f} s)", flush=True)
    elapsed = time.perf_counter() - started
    table = _table(rows)
    print()
    print(table)
    print(f"\n{len(rows)} cases in {elapsed:.0f} s")
    if args.markdown:
        machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, {cases.python_info()}"
        args.markdown.write_text(
            f"Machine: {machine}\n\nRun: `python -m benchmarks --build {build}{' --only matrix' * (args.only == 'matrix')}`"
            f" ({elapsed:.0f} s)\n\n{table}\n",
            encoding="utf-8",
        )
    if args.json:
        document = {
            "build": build,
            "python": cases.python_info(),
            "seconds": elapsed,
            "band": band,
            "rows": [vars(r) for r in rows],
        }
        args.json.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return builds.exit_code([row.case for row in rows if row.met is False])


if __name__ == "__main__":
    raise SystemExit(main())
