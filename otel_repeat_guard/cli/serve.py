"""``otel-repeat-guard dashboard``: the Streamlit server over a store, checked before it starts.

The store (SQLite, or a ClickHouse table), the port, the extra and the trace URL are each refused in one line before
anything is printed or started; then Streamlit runs the packaged page as a child process, which Ctrl+C or SIGTERM
takes down with the command.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

from otel_repeat_guard.cli.ingest import CliError, check_store
from otel_repeat_guard.cli.ports import busy_port
from otel_repeat_guard.dashboard.settings import STORE_ENV, TRACE_URL_ENV, check_trace_url
from otel_repeat_guard.store.schema import DB_ENV, SCHEMA_VERSION, StoreError, default_db_path, upgrade


def app_path() -> Path:
    """The Streamlit script, inside the installed package (works from a wheel too)."""
    spec = importlib.util.find_spec("otel_repeat_guard.dashboard")
    if spec is None or spec.origin is None:  # pragma: no cover - the package is importable by definition
        raise CliError("the otel_repeat_guard.dashboard package is missing from this installation")
    return Path(spec.origin).parent / "app.py"


PORT_SETTING_ENV = "OTEL_REPEAT_GUARD_PORT_SETTING"
"""How the user chooses the port where the command was started, for the busy-port hint: ``--port`` unless set
(the Makefile's ``demo`` and ``dashboard`` targets set ``make demo PORT=…``)."""


def check_port(host: str, port: int) -> None:
    """Refuse a port that is taken, in one line, before anything is printed or started."""
    refusal = busy_port(host, port, choose_with=os.environ.get(PORT_SETTING_ENV) or "--port")
    if refusal is not None:
        raise CliError(refusal)


def check_dashboard_extra() -> None:
    """Refuse, with the install command, when the dashboard's packages are missing."""
    missing = [
        name for name in ("streamlit", "altair", "pandas", "genai_prices") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise CliError(
            f"the dashboard needs its extra ({', '.join(missing)} missing): pip install 'otel-repeat-guard[dashboard]'"
        )


def checked_trace_url(trace_url: str) -> str:
    try:
        return check_trace_url(trace_url)
    except ValueError as exc:
        raise CliError(f"--trace-url: {exc}") from None


def dashboard_command(db: Path | None, host: str, port: int, trace_url: str | None) -> list[str]:
    """The Streamlit command line for the dashboard (on the SQLite store ``db``, checked first, if given)."""
    check_dashboard_extra()
    if trace_url is None and (from_env := os.environ.get(TRACE_URL_ENV)):  # what the dashboard will read
        try:
            check_trace_url(from_env)
        except ValueError as exc:
            raise CliError(f"{TRACE_URL_ENV}: {exc}") from None
    if db is not None:
        check_store(db, must_exist=True)
    if trace_url is not None:
        checked_trace_url(trace_url)
    return [
        sys.executable,
        "-m",
        "otel_repeat_guard.dashboard.launch",  # Streamlit's own command line, the page's imports done first
        "run",
        str(app_path()),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",  # no "Deploy" button: this is a viewer's page
    ]


def run_dashboard(db: Path | None, *, host: str, port: int, trace_url: str | None) -> int:
    db = db or default_db_path()
    command = dashboard_command(db, host, port, trace_url)
    check_port(host, port)  # after the store's checks, before anything is printed
    try:
        old = upgrade(db)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    if old is not None:
        print(f"upgraded the store {db} in place from schema {old} to {SCHEMA_VERSION}", flush=True)
    env = dict(os.environ)
    env[DB_ENV] = str(db.resolve())
    return _serve(command, env, str(db), host, port, trace_url)


def run_clickhouse_dashboard(store: str, *, host: str, port: int, trace_url: str | None) -> int:
    """The dashboard on a ClickHouse table: checked (reachable, credentials, table) before Streamlit starts."""
    from otel_repeat_guard.clickhouse.commands import check_store_url  # noqa: PLC0415 - the clickhouse extra

    check_dashboard_extra()
    if trace_url is not None:
        checked_trace_url(trace_url)
    target = check_store_url(store)
    command = dashboard_command(None, host, port, trace_url)
    check_port(host, port)
    env = dict(os.environ)
    env[STORE_ENV] = store  # the URL holds no password (refused there): that stays in its variable or file
    return _serve(command, env, target.describe(), host, port, trace_url)


def _serve(command: list[str], env: dict[str, str], shown: str, host: str, port: int, trace_url: str | None) -> int:
    if trace_url is not None:
        env[TRACE_URL_ENV] = trace_url
    shown_host = f"[{host}]" if ":" in host else host
    print(f"dashboard for {shown} at http://{shown_host}:{port}  (Ctrl+C to stop)", flush=True)
    process = subprocess.Popen(command, env=env)

    def stop(signum: int, frame: object) -> None:  # SIGTERM: take the server down with us
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
