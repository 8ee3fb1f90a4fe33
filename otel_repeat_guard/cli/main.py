"""The ``otel-repeat-guard`` command: ``demo``, ``dashboard``, ``ingest``, ``doctor`` and ``rollup``; and
``claude-code-hook`` (:mod:`otel_repeat_guard.cli.claude_code_hook`, exit code always 0).

Exit codes: 0 success, 2 bad input (missing or unreadable store, wrong schema, missing
extra), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_repeat_guard.cli.ingest import (
    STORE_HELP,
    CliError,
    add_ingest_commands,
    ascii_int,
    check_store,
    missing_extra,
    run_doctor,
    run_ingest,
    run_rollup,
    seconds,
    store_file,
)
from otel_repeat_guard.cli.serve import (
    check_dashboard_extra,
    check_port,
    checked_trace_url,
    run_clickhouse_dashboard,
    run_dashboard,
)
from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.demo.console import Console
from otel_repeat_guard.demo.runner import Counts, run_scenario
from otel_repeat_guard.demo.scenario import scenario
from otel_repeat_guard.store.origin import start_demo_store
from otel_repeat_guard.store.schema import (
    DB_ENV,
    StoreError,
    default_db_path,
)
from otel_repeat_guard.version import __version__, build_mode

EXIT_USAGE = 2
DEMO_AGENTS = 8  # two of each persona
DEFAULT_PORT = 8501
DEFAULT_HOST = "127.0.0.1"


def _positive_int(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1-65535), got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1-65535), got {text}")
    return value


def _add_dashboard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"dashboard port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST}: this machine only)"
    )
    parser.add_argument(
        "--trace-url",
        default=None,
        help="trace link template with {trace_id} (and optionally {span_id}), e.g. "
        "http://localhost:16686/trace/{trace_id} for Jaeger (default: $OTEL_REPEAT_GUARD_TRACE_URL; "
        "without one, no trace links)",
    )


def _version_text() -> str:
    """``--version``: the version and the build, e.g. ``otel-repeat-guard 0.1.0 (compiled)``."""
    return f"%(prog)s {__version__} ({build_mode()})"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal is one line (argparse prints its usage block first): exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="otel-repeat-guard",
        description="Loop hotspots of LLM agents: a scripted demo and a dashboard.",
        epilog="Claude Code runs `otel-repeat-guard claude-code-hook` as a command hook: the event's JSON on stdin, "
        "its answer (a reminder, when one is due) on stdout. See docs/claude-code.md.",
    )
    parser.add_argument("--version", action="version", version=_version_text())
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{demo,dashboard,ingest,doctor,rollup,claude-code-hook}"
    )
    db_help = f"SQLite store (default: ${DB_ENV} or ./repeat-guard.db)"

    demo = commands.add_parser(
        "demo",
        help="run a simulated multi-agent workload through the guard into the store",
        description="Run a scripted multi-agent workload (tool calls, model calls with token usage, loops, "
        "reminders heeded and ignored) through a real TracerProvider, the guard and the SQLite exporter. "
        "The store starts fresh: a store the demo made is emptied first, and a store with other calls is "
        "refused unless --append. With --dashboard, the dashboard then serves it.",
    )
    demo.add_argument("--db", type=store_file, default=None, help=db_help)
    demo.add_argument(
        "--append", action="store_true", help="add to the store's calls instead of starting from an empty store"
    )
    demo.add_argument(
        "--agents", type=_positive_int, default=DEMO_AGENTS, help=f"top-level agents (default {DEMO_AGENTS})"
    )
    demo.add_argument("--seconds", type=seconds, default=20.0, help="upper bound on the run time (default 20)")
    demo.add_argument("--dashboard", action="store_true", help="then start the dashboard on the same store")
    demo.add_argument("--no-arguments", action="store_true", help="store argument digests only, no argument text")
    demo.add_argument(
        "--otlp",
        action="store_true",
        help="also export spans and the guard's metrics as the standard variables say: OTEL_TRACES_EXPORTER and "
        "OTEL_METRICS_EXPORTER (otlp by default; lists, console, prometheus), OTEL_EXPORTER_OTLP_*",
    )
    _add_dashboard_options(demo)

    dashboard = commands.add_parser(
        "dashboard",
        help="start the Streamlit dashboard on a store",
        description="Serve the loop-hotspot dashboard on a store: repeated calls, wasted time, tokens and cost, "
        "whether reminders worked, and each run's timeline. It binds to 127.0.0.1 unless --host says otherwise. "
        "A store of an older schema is upgraded in place first.",
    )
    dashboard.add_argument("--db", type=store_file, default=None, help=db_help)
    dashboard.add_argument("--store", default=None, metavar="URL", help=STORE_HELP)
    _add_dashboard_options(dashboard)

    add_ingest_commands(commands, db_help)
    commands.add_parser(  # main() hands its words to the hook before this parser is built: listed, for --help
        "claude-code-hook",
        help="Claude Code's command hook: the event's JSON on stdin, its answer (a reminder, when one is due) on "
        "stdout; always exit 0 (docs/claude-code.md)",
        add_help=False,
    )
    return parser


def run_demo(args: argparse.Namespace) -> int:
    db: Path = args.db or default_db_path()
    if args.dashboard:
        check_dashboard_extra()  # before the demo runs, not after
        if args.trace_url is not None:
            checked_trace_url(args.trace_url)
        check_port(args.host, args.port)  # a port taken now is refused before the demo prints a line
    check_store(db, must_exist=False)
    # the exporters' settings before the store is emptied: a refusal must leave the last demo's calls in place
    extra_exporters, meter_provider = _otlp_for_demo() if args.otlp else (None, None)
    try:
        start_demo_store(db, append=args.append)
        scripts = scenario(args.agents)
        counts = Counts()
        verb = "adding to" if args.append else "writing to a fresh"
        print(f"otel-repeat-guard demo: {len(scripts)} agents (plus subagents) {verb} store {db}", flush=True)
        started = time.monotonic()
        with Console(counts) as console:
            run_scenario(
                scripts,
                db,
                seconds=args.seconds,
                on_reminder=console.reminder,
                counts=counts,
                store_arguments=not args.no_arguments,
                extra_exporters=extra_exporters,
            )
    finally:
        if meter_provider is not None:
            meter_provider.shutdown()  # exports the guard's final metric values
    excluded, _ = counts.details()
    print(
        f"done in {time.monotonic() - started:.1f} s; the store is {db}. The dashboard counts the "
        f"{counts.calls - excluded} tracked tool calls; the {excluded} calls of excluded tools are stored, not counted.",
        flush=True,
    )
    if args.dashboard:
        return run_dashboard(db, host=args.host, port=args.port, trace_url=args.trace_url)
    print(f"see the hotspots with: otel-repeat-guard dashboard --db {shlex.quote(str(db))}", flush=True)
    return 0


def _otlp_for_demo() -> tuple[Callable[[], Sequence[SpanExporter]], MeterProvider]:
    """Span exporters per demo service and a global meter provider for the guard's metrics, as the
    standard OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER variables ask (otlp by default)."""
    from opentelemetry import metrics  # noqa: PLC0415 - only with --otlp

    from otel_repeat_guard.setup.configure import build_resource, metric_readers, span_exporters  # noqa: PLC0415
    from otel_repeat_guard.setup.environment import check_environment  # noqa: PLC0415

    try:
        check_environment()  # each wrong variable named, before the SDK refuses it naming none
        span_exporters()  # fail early and clearly if an exporter is missing or misconfigured
        readers = metric_readers(export_interval_millis=2000)  # after: a reader's thread starts when it is made
    except ValueError as exc:
        raise CliError(str(exc)) from None
    meter_provider = MeterProvider(metric_readers=readers, resource=build_resource("otel-repeat-guard-demo", None))
    metrics.set_meter_provider(meter_provider)
    return span_exporters, meter_provider


def _dashboard(args: argparse.Namespace) -> int:
    if args.store is None:
        return run_dashboard(args.db, host=args.host, port=args.port, trace_url=args.trace_url)
    if args.db is not None:
        raise CliError("--db and --store name two stores: give one")
    return run_clickhouse_dashboard(args.store, host=args.host, port=args.port, trace_url=args.trace_url)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["claude-code-hook"]:  # a Claude Code hook: stdin to stdout, always 0, no parser to build
        from otel_repeat_guard.cli.claude_code_hook import main as claude_code_hook  # noqa: PLC0415

        return claude_code_hook(words[1:])
    return _command(argv)


def _command(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:  # the guard's settings, read where every command reads them: one wrong is a refusal, not a traceback
            GuardConfig.from_env()
        except ValueError as exc:
            raise CliError(str(exc)) from None
        commands: dict[str, Callable[[argparse.Namespace], int]] = {
            "demo": run_demo,
            "ingest": run_ingest,
            "doctor": run_doctor,
            "rollup": run_rollup,
            "claude-code-hook": lambda _: main(["claude-code-hook"]),  # parsed here only when called directly
        }
        try:
            code = commands.get(args.command, _dashboard)(args)
        except ModuleNotFoundError as exc:  # a module of an extra this install has not: the extra, in one line
            raise missing_extra(args.command, exc) from None
        sys.stdout.flush()  # here, where a reader that went away is caught, not at the interpreter's exit
        return code
    except (CliError, StoreError) as exc:
        print(f"otel-repeat-guard: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head`: the reader has what it wanted; end as a tool SIGPIPE ends, unsaid
        _silence_stdout()
        return 141


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush finds no closed pipe to fail on."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # stdout replaced by one with no descriptor
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
