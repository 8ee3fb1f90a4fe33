"""The command line's ``ingest``, ``doctor`` and ``rollup``: their arguments, their input checks and their runs; and
the one-line refusal every command shares (:class:`CliError`, exit code 2)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from otel_repeat_guard.core.config import GuardConfig
from otel_repeat_guard.core.urls import safe_url
from otel_repeat_guard.store.schema import (
    StoreError,
    check_creatable,
    check_integrity,
    default_db_path,
    open_for_reading,
)


class CliError(Exception):
    """Bad input: printed as ``otel-repeat-guard: error: ...`` with exit code 2."""


_EXTRAS = (  # a module a command imports when it needs it, and the extra that installs it
    (("zstandard", "google.protobuf", "opentelemetry.proto"), "ingest"),
    (("clickhouse_connect", "chdb"), "clickhouse"),
    (("streamlit", "altair", "pandas", "genai_prices"), "dashboard"),
    (("opentelemetry.exporter.otlp",), "otlp"),
    (("redis",), "redis"),
)


def missing_extra(command: str, exc: ModuleNotFoundError) -> CliError:
    """The one-line refusal of ``command`` when a module of an extra is not installed: which extra to install."""
    name = exc.name or "a module"
    for modules, extra in _EXTRAS:
        if any(name == module or name.startswith(f"{module}.") for module in modules):
            return CliError(
                f"{command} needs the {extra} extra ({name} is missing): pip install 'otel-repeat-guard[{extra}]'"
            )
    return CliError(f"{command} needs {name}, which is not installed: reinstall otel-repeat-guard with its extras")


def _plain(text: str) -> str:
    """``text`` if it is a number written in ASCII: int() and float() also read other scripts' digits ('٣')
    and underscores ('1_000'), which the environment's settings refuse too."""
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return text


def ascii_int(text: str) -> int:
    """A whole number written in plain ASCII digits; ValueError otherwise."""
    return int(_plain(text))


def store_file(text: str) -> Path:
    """``--db``: a store's file; an empty path (which would read as the current directory) is refused."""
    if not text:
        raise argparse.ArgumentTypeError("give the store's file, such as ./repeat-guard.db, not an empty path")
    return Path(text)


def seconds(text: str) -> float:
    try:
        value = float(_plain(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}") from None
    if not value >= 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def seconds_between(low: float, high: float) -> Callable[[str], float]:
    """``seconds``, from ``low`` to ``high``: a poll of no time spins a core, an endless one overflows the clock."""

    def parse(text: str) -> float:
        value = seconds(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a number of seconds from {low:g} to {high:,g}, got {text}")
        return value

    return parse


_LAST_NS = 2**63 - 1  # 2262-04-11T23:47:16.854775807Z: the last time a 64-bit nanosecond count holds


_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def time_point(text: str) -> int:
    """A point in time, in ns since the epoch: a duration ago (``90m``, ``24h``, ``7d``) or an ISO 8601 date or
    time (``2026-12-05``, ``2026-12-05T10:00``; UTC unless it names its offset)."""
    value, unit = text[:-1], text[-1:].lower()
    if unit in _UNITS and value.isascii() and value.replace(".", "", 1).isdigit():
        now = time.time_ns()
        ago = float(value) * _UNITS[unit] * 1e9  # inf for a number of 309 digits or more: no int() of it
        return now - int(ago) if ago < now else 0  # one before the epoch reads from the epoch on
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a time (2026-12-05, 2026-12-05T10:00, UTC unless an offset is given) or a duration ago "
            f"(90m, 24h, 7d), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000
    if ns > _LAST_NS:
        raise argparse.ArgumentTypeError(
            f"must be a time before 2262-04-11 (the last a nanosecond timestamp holds), got {text!r}"
        )
    return max(0, ns)


def add_range(parser: Any, what: str) -> None:
    """``--since`` and ``--until``: the time range of a ClickHouse table that ``what`` reads."""
    parser.add_argument(
        "--since", type=time_point, default=None, metavar="WHEN", help=f"{what} from this time on (24h, 2026-12-05)"
    )
    parser.add_argument("--until", type=time_point, default=None, metavar="WHEN", help=f"{what} up to this time")


def checked_range(args: argparse.Namespace, table: str | None, flag: str) -> tuple[int | None, int | None]:
    """``--since`` and ``--until`` (None where not given), refused in one line without a ``table`` (``flag`` names
    it) or when they are the wrong way round."""
    if table is None and (args.since is not None or args.until is not None):
        raise CliError(f"--since and --until bound a ClickHouse table ({flag} URL); files are read whole")
    if args.since is not None and args.until is not None and args.since > args.until:
        raise CliError("--since is after --until: nothing lies between them")
    return args.since, args.until


STORE_HELP = (
    "read the OpenTelemetry Collector's ClickHouse table instead: clickhouse://USER@HOST:8123/DB?table=otel_traces "
    "or chdb://DIR (password from $OTEL_REPEAT_GUARD_CLICKHOUSE_PASSWORD or _PASSWORD_FILE, never the URL)"
)


def add_ingest_commands(commands: Any, db_help: str) -> None:
    """The ``ingest`` and ``doctor`` sub-commands of ``commands`` (the CLI's sub-parsers)."""
    ingest = commands.add_parser(
        "ingest",
        help="read OTel Collector file-exporter output (OTLP JSON lines, optionally zstd) into the store",
        description="Read the OTel Collector file exporter's output into the store. Malformed records are "
        "reported as PATH:LINE, skipped and counted; spans already in the store are skipped, so ingesting "
        "a file again inserts nothing twice.",
    )
    ingest.add_argument("path", type=Path, nargs="?", metavar="PATH", help="the file exporter's output file")
    ingest.add_argument(
        "--from",
        dest="source",
        default=None,
        metavar="URL",
        help="read the Collector's ClickHouse table instead of a file, all of it (with --replay: the guard's chain "
        "logic over spans recorded where no guard ran): clickhouse://USER@HOST:8123/DB?table=otel_traces or "
        "chdb://DIR, the password as for the dashboard's --store",
    )
    ingest.add_argument("--db", type=store_file, default=None, help=db_help)
    add_range(ingest, "with --from: the spans that started")
    ingest.add_argument(
        "--follow", action="store_true", help="keep reading as the file grows and rotates, until interrupted"
    )
    ingest.add_argument(
        "--replay",
        action="store_true",
        help="run the guard's chain logic over spans recorded without the guard, so their loops show too",
    )
    ingest.add_argument("--no-arguments", action="store_true", help="store argument digests only, no argument text")
    ingest.add_argument(
        "--poll", type=seconds_between(0.01, 3600), default=0.5, help="seconds between checks while following"
    )
    ingest.add_argument("--quiet", action="store_true", help="no progress line")

    doctor = commands.add_parser(
        "doctor",
        help="check that the guard can compare the tool calls in collector output, and say what fixes it if not",
        description="Play collector file-exporter output (OTLP JSON lines, optionally zstd) through the guard and "
        "report, per instrumentation scope and tool, how many tool calls it recognised, where their arguments "
        "came from, how their agent runs were resolved, and each blind spot with the setting that fixes it. "
        "Exit code 0 when every recognised call can be compared, 1 when some cannot, 2 for input it cannot read.",
    )
    doctor.add_argument("paths", type=Path, nargs="*", metavar="FILE", help="the file exporter's output files")
    doctor.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help=STORE_HELP + " (instead of files); or an embedded store's path, for its reminders by wording variant",
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    add_range(doctor, "with --store: the tool calls that ended")

    rollup = commands.add_parser(
        "rollup",
        help="roll a ClickHouse table's calls up into a database of the guard's own, so the dashboard reads fast",
        description="Create (if missing) the guard's rollup of the Collector's ClickHouse table in the database "
        "the store URL names with rollup=DB, and roll up every hour of spans not yet rolled up (or that got spans "
        "since). Re-runnable: run it every few minutes (cron). The dashboard and doctor read the rollup when "
        "given the same URL, and the spans after it from the table. Nothing is written to the table.",
    )
    rollup.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="clickhouse://USER@HOST:8123/DB?table=otel_traces&rollup=ROLLUP_DB or chdb://DIR?rollup=ROLLUP_DB",
    )
    rollup.add_argument(
        "--settle",
        type=seconds_between(0, 366 * 86_400),
        default=300.0,
        help="leave the hours that ended less than this many seconds ago to the table (default 300)",
    )


def run_doctor(args: argparse.Namespace) -> int:
    if args.store is not None or not args.paths:
        if args.store is None or args.paths:
            raise CliError("doctor reads either collector files (FILE ...) or a ClickHouse table (--store URL)")
        return clickhouse_doctor(args.store, checked_range(args, args.store, "--store"), as_json=args.json)
    checked_range(args, None, "--store")
    try:
        from otel_repeat_guard.cli.doctor import diagnose, read_files, render  # noqa: PLC0415 - needs the ingest extra
    except ImportError as exc:
        raise CliError(
            f"doctor needs the ingest extra ({exc.name} is missing): pip install 'otel-repeat-guard[ingest]'"
        ) from None
    for path in args.paths:
        check_input(path, may_be_missing=False)
    try:
        read = read_files(args.paths)
    except OSError as exc:
        raise CliError(f"cannot read {exc.filename}: {exc.strerror}") from None
    if not read.requests:  # text, binary, an empty file: nothing the guard could be judged on
        first = f" (first: {' '.join(read.problems[0].split())[:160]})" if read.problems else " (no record at all)"
        raise CliError(f"{' '.join(map(str, args.paths))}: no OTLP trace record to diagnose{first}")
    for problem in read.problems:
        print(f"skipped malformed record {problem}", file=sys.stderr)
    report = diagnose(read.spans, config=GuardConfig.from_env())
    print(render(report, args.json))
    return report.exit_code


def check_input(path: Path, *, may_be_missing: bool) -> None:
    """Refuse an input that is not a readable file (a directory, a symlink loop, no permission), in one line.

    With ``may_be_missing`` (``--follow``) a file that does not exist yet is fine: it is waited for.
    """
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        if may_be_missing and not path.is_symlink():
            return
        raise CliError(f"no file at {path}") from None
    except IsADirectoryError:
        raise CliError(f"{path} is a directory: give the file the collector writes") from None
    except OSError as exc:  # ELOOP, EACCES, ...
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def check_store(db: Path, *, must_exist: bool) -> None:
    """Refuse a store that is missing (if it must exist), cannot be made (a directory or a device at its path, a
    missing directory), damaged or not ours, before it is used.

    The whole file is checked (``PRAGMA quick_check``), not only its schema, so damage deep in
    it stops the command with exit code 2 instead of failing writes or dashboard queries later.
    An older schema passes: every command upgrades it in place (a writer opening it does).
    """
    try:
        if not must_exist and not db.exists():
            check_creatable(db)  # a writer creates it, when it has something to write
            return
        conn, _ = open_for_reading(db, upgradable=True)
        try:
            check_integrity(conn, db)
        finally:
            conn.close()
    except StoreError as exc:
        raise CliError(str(exc)) from None


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # mid-batch, the batch's transaction is rolled back; the store is closed


def _stop_on_sigterm() -> Any:
    """SIGTERM (docker stop, a supervisor) stops an ingest as Ctrl+C does, not as a kill: the handler it replaced,
    to put back; None off the main thread (where Python takes no handler, and the caller has its own)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _stop)


def run_ingest(args: argparse.Namespace) -> int:
    try:
        from otel_repeat_guard.ingest.progress import Progress  # noqa: PLC0415 - needs the ingest extra
        from otel_repeat_guard.ingest.runner import Ingest, IngestOptions, NoTraceRecords  # noqa: PLC0415
    except ImportError as exc:
        raise CliError(
            f"ingest needs its extra ({exc.name} is missing): pip install 'otel-repeat-guard[ingest]'"
        ) from None

    db: Path = args.db or default_db_path()
    source: Any = args.path
    if args.source is not None or args.path is None:
        if args.path is not None or args.source is None:
            raise CliError("ingest reads either a collector file (PATH) or a ClickHouse table (--from URL)")
        if args.follow:
            raise CliError("--follow follows a file; a ClickHouse table is read once (--from URL)")
        from otel_repeat_guard.clickhouse.commands import table_spans  # noqa: PLC0415 - the clickhouse extra

        span = checked_range(args, args.source, "--from")
        source = table_spans(args.source, *span)  # reachable, with its table, or a one-line StoreError
    else:
        checked_range(args, None, "--from")
        check_input(args.path, may_be_missing=args.follow)  # before the store file is created
    check_store(db, must_exist=False)
    options = IngestOptions(
        follow=args.follow, replay=args.replay, store_arguments=not args.no_arguments, poll_seconds=args.poll
    )
    job = Ingest(source, db, options, progress=None if args.quiet else Progress())
    if args.follow:
        print(f"following {args.path} into {db} (Ctrl+C to stop)", flush=True)

    previous = _stop_on_sigterm()
    try:
        stats = job.run()
    except KeyboardInterrupt:
        stats = job.stats
    except NoTraceRecords as exc:  # text, binary, logs or metrics: not collector trace output
        raise CliError(str(exc)) from None
    except OSError as exc:  # the file changed under a follower: unreadable now, replaced by a directory, ...
        raise CliError(f"cannot read {exc.filename or args.path}: {exc.strerror or exc}") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print(f"ingested {job.name} into {db}: {stats.summary()}", flush=True)
    if args.replay and stats.replayed_traces and not stats.new_spans:
        print(
            "nothing changed: every span was in the store already, so the replay stored nothing "
            "(replay a file on its first ingest)",
            flush=True,
        )
    return 0


def run_rollup(args: argparse.Namespace) -> int:
    """``rollup --store``: the table's new hours rolled up into the rollup database."""
    from otel_repeat_guard.clickhouse.commands import render_rollup, rollup  # noqa: PLC0415 - the clickhouse extra
    from otel_repeat_guard.clickhouse.target import is_clickhouse  # noqa: PLC0415

    if not is_clickhouse(args.store):
        raise CliError(f"rollup reads a ClickHouse table: clickhouse://… or chdb://…, got {safe_url(args.store)!r}")
    print(render_rollup(rollup(args.store, args.settle)))
    return 0


def clickhouse_doctor(store: str, span: tuple[int | None, int | None], *, as_json: bool) -> int:
    """``doctor --store``: what the guard could and could not see in the table (in ``span``, the ends of the calls
    in ns, either side open); 1 if anything was unseen."""
    from otel_repeat_guard.clickhouse.target import is_clickhouse  # noqa: PLC0415

    a_url = not Path(store).exists() and (
        ":" in store or "@" in store
    )  # refused as a ClickHouse URL, its secret unsaid
    if not is_clickhouse(store) and not a_url:  # the embedded store: its experiment's table
        try:
            from otel_repeat_guard.cli.store_doctor import store_doctor  # noqa: PLC0415 - pandas, on this path only
        except ImportError as exc:
            raise CliError(
                f"doctor --store on the embedded store needs the dashboard extra ({exc.name} is missing): "
                "pip install 'otel-repeat-guard[dashboard]'"
            ) from None
        return store_doctor(store, span, as_json=as_json)
    from otel_repeat_guard.clickhouse.commands import doctor, render  # noqa: PLC0415 - the clickhouse extra

    report = doctor(store, *span)
    print(render(report, as_json=as_json))
    return 0 if report.comparable else 1
