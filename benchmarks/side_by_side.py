"""Both builds in one run: ``python -m benchmarks.side_by_side [--quick] [--only matrix] [--instructions] [--markdown FILE]``.

Runs ``python -m benchmarks --build pure`` and ``--build compiled`` one after the other (never at
once: they would share the two cores), each in its own process with this interpreter, so run it
from the environment with the compiled wheel (``make bench`` uses ``.venv-compiled``). Every case
measures the same thing in both; each ratio is against a baseline timed in the same rounds of the
same process. ``--instructions`` adds ``benchmarks.instructions`` for both (valgrind, a few minutes).
The span-shape matrix (``benchmarks.matrix``) gets a table of its own; ``--only matrix`` runs it (and
the control that sets each build's noise band) alone. Exits non-zero when either build misses a goal,
as ``python -m benchmarks`` does, after naming each miss.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.builds import BUILDS, ENV, ROOT, exit_code


def _run(build: str, arguments: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "rows.json"
        command = [sys.executable, "-m", "benchmarks", "--build", build, "--json", str(out), *arguments]
        print(f"\n== {build}: {' '.join(command[1:])}", flush=True)
        done = subprocess.run(command, cwd=ROOT, env={**os.environ, ENV: build}, check=False)
        if not out.is_file():
            raise SystemExit(f"the {build} run stopped (exit {done.returncode}) before writing its rows")
        document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return document


def _met(row: dict[str, Any] | None) -> str:
    if row is None or row["met"] is None:
        return "-"
    return "yes" if row["met"] else "**NO**"


def table(runs: dict[str, dict[str, Any]], section: str = "main") -> str:
    """One line per case of ``section``: each build's measurement and whether it met the case's goal."""
    by_build = {
        build: {row["case"]: row for row in run["rows"] if row.get("section", "main") == section}
        for build, run in runs.items()
    }
    cases = list(dict.fromkeys(case for rows in by_build.values() for case in rows))
    lines = [
        "| case | "
        + " | ".join(f"{build}" for build in runs)
        + " | goal | "
        + " | ".join(f"met ({b})" for b in runs)
        + " |",
        "|---|" + "---|" * (2 * len(runs) + 1),
    ]
    for case in cases:
        rows = [by_build[build].get(case) for build in runs]
        goal = " / ".join(dict.fromkeys(row["goal"] for row in rows if row is not None))  # a goal per build, if so
        measured = " | ".join("(not run)" if row is None else row["measured"] for row in rows)
        lines.append(f"| {case} | {measured} | {goal} | " + " | ".join(_met(row) for row in rows) + " |")
    return "\n".join(lines)


_COUNT_LINE = re.compile(r"^(?P<variant>.+?)\s{2,}(?P<per_span>[\d,]+)\s+(?P<over>[+-][\d,]+ \([^)]*\))$")


def instruction_table(outputs: dict[str, str]) -> str:
    """``benchmarks.instructions``' lines for each build, side by side (a variant one build cannot run: n/a)."""
    counts = {
        build: {m["variant"]: (m["per_span"], m["over"]) for m in map(_COUNT_LINE.match, output.splitlines()) if m}
        for build, output in outputs.items()
    }
    variants = list(dict.fromkeys(variant for per_build in counts.values() for variant in per_build))
    lines = [
        "| variant | " + " | ".join(f"{build}: per span | {build}: over no processor" for build in outputs) + " |",
        "|---|" + "---:|" * (2 * len(outputs)),
    ]
    for variant in variants:
        cells = [counts[build].get(variant, ("n/a", "n/a")) for build in outputs]
        lines.append(f"| {variant} | " + " | ".join(f"{per_span} | {over}" for per_span, over in cells) + " |")
    return "\n".join(lines)


def _instructions(build: str) -> str:
    command = [sys.executable, "-m", "benchmarks.instructions"]
    print(f"\n== {build}: {' '.join(command[1:])}", flush=True)
    done = subprocess.run(
        command, cwd=ROOT, env={**os.environ, ENV: build}, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"benchmarks.instructions on the {build} build failed:\n{done.stdout}{done.stderr}")
    print(done.stdout, end="", flush=True)
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.side_by_side", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and agents, for a smoke run")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    parser.add_argument("--markdown", type=Path, help="also write the tables, with the machine, to this file")
    parser.add_argument("--builds", nargs="+", choices=BUILDS, default=list(BUILDS), help="in this order")
    parser.add_argument("--only", choices=("all", "matrix"), default="all", help="every case, or the matrix")
    parser.add_argument("--million", action="store_true", help="also the per-run state at 1,000,000 agents (slow)")
    args = parser.parse_args()

    started = time.perf_counter()
    arguments = ["--quick"] * args.quick + ["--million"] * args.million + ["--only", args.only]
    runs = {build: _run(build, arguments) for build in args.builds}
    counts = {build: _instructions(build) for build in args.builds} if args.instructions else {}
    elapsed = time.perf_counter() - started

    bands = " / ".join(f"{build} ±{run['band']:.3f}" for build, run in runs.items() if "band" in run)
    text = table(runs) if args.only == "all" else ""
    text += (
        "\n\n" * bool(text)
        + f"Span-shape matrix (each build's noise band, from its control: {bands}):\n\n"
        + table(runs, "matrix")
    )
    if counts:
        text += "\n\nInstructions per span (`python -m benchmarks.instructions`):\n\n" + instruction_table(counts)
    print("\n" + text)
    print(f"\n{' and '.join(runs)} in {elapsed:.0f} s")
    if args.markdown:
        python = next(iter(runs.values()))["python"]
        machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, {python}"
        flags = (
            " --quick" * args.quick
            + f" --only {args.only}" * (args.only != "all")
            + " --million" * args.million
            + " --instructions" * args.instructions
        )
        args.markdown.write_text(
            f"Machine: {machine}\n\nRun: `python -m benchmarks.side_by_side{flags}` ({elapsed:.0f} s)\n\n{text}\n",
            encoding="utf-8",
        )
    return exit_code(
        [f"{row['case']} ({build})" for build, run in runs.items() for row in run["rows"] if row["met"] is False]
    )


if __name__ == "__main__":
    raise SystemExit(main())
