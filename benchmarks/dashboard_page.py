"""A fresh dashboard page against a bare Streamlit page, side by side on the same machine, in Debian's chromium.

    python benchmarks/dashboard_page.py [--runs 7] [--chromium /usr/bin/chromium]

Both servers run headless here: ``otel-repeat-guard dashboard`` on the demo's store, and a Streamlit app that
writes one line. Each run opens each page in a new browser context (a new Streamlit session, so the page's
script runs from the top) and times it to the first figure drawn (the dashboard's first headline figure, the bare
page's line) and to network idle; the pages alternate, so both see the same load. The first run warms each
server (imports) and is reported apart. Goal (issue 40): the dashboard within 0.5 s of the bare page, median
to network idle.

Wall times grow with the machine's load, so each page also gets what does not: the files and bytes it loads
(the same on every run), and the CPU time of the browser's main thread (``ThreadTime``: the page's scripts,
style and layout), where a fresh Streamlit page spends most of its time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

from otel_repeat_guard.dashboard.sections.headline import FIGURE_SELECTOR

BARE = 'import streamlit as st\n\nst.write("hello from a bare Streamlit page")\n'
GOAL_S = 0.5
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@dataclass(frozen=True, slots=True)
class Page:
    """A page to time: its name, its address, and what shows it is drawn."""

    name: str
    url: str
    drawn: str  # a CSS selector


@dataclass(frozen=True, slots=True)
class Timing:
    drawn_s: float
    idle_s: float
    files: int
    bytes: int
    cpu_s: float  # the browser's main thread


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(command: list[str], port: int) -> Iterator[str]:
    """``command`` serving on ``port`` until the block ends (bounded: 60 s to start, 20 s to stop)."""
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{command[:4]} did not start (exit {server.poll()})") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def _time(browser: Browser, page: Page) -> Timing:
    """One fresh page: a new context, to the first figure drawn and to network idle (bounded: 60 s)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        tab = context.new_page()
        devtools = context.new_cdp_session(tab)
        devtools.send("Performance.enable")
        devtools.send("Network.enable")
        loaded: dict[str, int] = {}  # request -> bytes received
        devtools.on("Network.loadingFinished", lambda e: loaded.__setitem__(e["requestId"], e["encodedDataLength"]))
        start = time.perf_counter()
        tab.goto(page.url, wait_until="commit", timeout=60_000)
        tab.locator(page.drawn).first.wait_for(state="attached", timeout=60_000)
        drawn = time.perf_counter() - start
        tab.wait_for_load_state("networkidle", timeout=60_000)
        idle = time.perf_counter() - start
        metrics = {m["name"]: m["value"] for m in devtools.send("Performance.getMetrics")["metrics"]}
        return Timing(drawn, idle, len(loaded), int(sum(loaded.values())), float(metrics["ThreadTime"]))
    finally:
        context.close()


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--chromium", default=os.environ.get("REPEAT_GUARD_CHROMIUM", "/usr/bin/chromium"))
    args = parser.parse_args(argv)
    if not Path(args.chromium).is_file():
        print(f"{args.chromium} is missing: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        db, bare = Path(folder) / "demo.db", Path(folder) / "bare.py"
        bare.write_text(BARE)
        cli = [sys.executable, "-m", "otel_repeat_guard.cli.main"]
        subprocess.run([*cli, "demo", "--db", str(db), "--seconds", "0"], check=True, capture_output=True, timeout=300)
        dash_port, bare_port = _free_port(), _free_port()
        streamlit = [sys.executable, "-m", "streamlit", "run", str(bare), "--server.headless", "true"]
        bare_command = [*streamlit, "--server.port", str(bare_port), "--browser.gatherUsageStats", "false"]
        with (
            _serving([*cli, "dashboard", "--db", str(db), "--port", str(dash_port)], dash_port) as dash_url,
            _serving(bare_command, bare_port) as bare_url,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=args.chromium, args=LAUNCH_ARGS, headless=True)
            pages = (
                Page("dashboard (Overview)", dash_url, FIGURE_SELECTOR),
                Page("bare Streamlit page", bare_url, "[data-testid=stMarkdown]"),
            )
            timings: dict[str, list[Timing]] = {page.name: [] for page in pages}
            loads = []
            for run in range(args.runs + 1):
                for page in pages if run % 2 == 0 else pages[::-1]:
                    timings[page.name].append(_time(browser, page))
                loads.append(os.getloadavg()[0])
            browser.close()
    print(
        f"fresh page, {args.runs} runs each after one warm-up, load {min(loads):.1f}-{max(loads):.1f} "
        f"(1-minute average over the runs), {os.cpu_count()} CPUs"
    )
    print(
        f"{'page':<24} {'first run':>10} {'drawn (median)':>15} {'idle (median)':>14} {'idle (range)':>14} "
        f"{'files':>6} {'bytes':>10} {'browser CPU':>12}"
    )
    medians = {}
    for name, runs in timings.items():
        first, rest = runs[0], runs[1:]
        idle = [t.idle_s for t in rest]
        medians[name] = _median(idle)
        print(
            f"{name:<24} {first.idle_s:>9.2f}s {_median([t.drawn_s for t in rest]):>14.2f}s "
            f"{medians[name]:>13.2f}s {min(idle):>6.2f}-{max(idle):.2f}s {rest[-1].files:>6} {rest[-1].bytes:>10,} "
            f"{_median([t.cpu_s for t in rest]):>11.2f}s"
        )
    gap = medians[pages[0].name] - medians[pages[1].name]
    print(f"the dashboard's page, less the bare page, median to network idle: {gap:+.2f} s (goal: at most {GOAL_S} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
