"""Every command started without the extra it needs says which extra to install, in one line, exit 2: in real
virtualenvs holding the checkout with one extra (``[dashboard]``, what ``make demo`` installs) or none.

Each virtualenv is built once, in the checkout (``.venv-dashboard-only``, ``.venv-core-only``), and rebuilt when
pyproject.toml changes; the install is editable and pure Python, so it runs the checkout's code.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _venv(name: str, extras: str) -> Path:
    """``ROOT/name`` holding the checkout with ``extras`` (editable, pure Python): its bin directory."""
    venv = ROOT / name
    marker = venv / ".installed"
    key = hashlib.sha256(str(venv).encode()).hexdigest()[:12]
    with (Path(tempfile.gettempdir()) / f"otel-repeat-guard-{key}.lock").open("w") as lock:  # both builds' runs
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists() or marker.stat().st_mtime < (ROOT / "pyproject.toml").stat().st_mtime:
            python = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
            environment = {**os.environ, "OTEL_REPEAT_GUARD_PURE": "1"}
            environment.pop("PYTHONPATH", None)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--quiet", "-e", f"{ROOT}{extras}"],
                check=True, timeout=900, env=environment, capture_output=True,
            )  # fmt: skip
            marker.touch()
    return venv / "bin"


def _refusal(bin_dir: Path, argv: list[str], tmp_path: Path) -> str:
    environment = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(bin_dir / "otel-repeat-guard"), *argv],
        capture_output=True, text=True, timeout=120, env=environment, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    return done.stderr.removeprefix("otel-repeat-guard: error: ").rstrip("\n")


DASHBOARD_ONLY = {
    "doctor on files": (["doctor", "{capture}"], "ingest"),
    "doctor --store on a server": (["doctor", "--store", "clickhouse://u@127.0.0.1:1/otel"], "clickhouse"),
    "doctor --store on chdb": (["doctor", "--store", "chdb://{tmp}"], "clickhouse"),
    "dashboard --store on a server": (["dashboard", "--store", "clickhouse://u@127.0.0.1:1/otel"], "clickhouse"),
    "rollup": (["rollup", "--store", "clickhouse://u@127.0.0.1:1/otel?rollup=guard"], "clickhouse"),
    "ingest a file": (["ingest", "{capture}", "--db", "x.db"], "ingest"),
    "ingest --from": (["ingest", "--from", "chdb://{tmp}", "--db", "x.db"], "ingest"),
    "demo --otlp": (["demo", "--otlp", "--seconds", "0", "--db", "x.db"], "otlp"),
}
CORE_ONLY = {
    "dashboard": (["dashboard", "--db", "x.db"], "dashboard"),
    "doctor --store": (["doctor", "--store", "chdb://{tmp}"], "dashboard"),
    "rollup": (["rollup", "--store", "chdb://{tmp}?rollup=guard"], "dashboard"),
    "demo --dashboard": (["demo", "--dashboard", "--seconds", "0", "--db", "x.db"], "dashboard"),
}
CAPTURE = ROOT / "tests" / "fixtures" / "langchain_openinference" / "spans.jsonl"


def _words(argv: list[str], tmp_path: Path) -> list[str]:
    return [word.format(capture=CAPTURE, tmp=tmp_path) for word in argv]


@pytest.fixture(scope="module")
def dashboard_only() -> Path:
    bin_dir = _venv(".venv-dashboard-only", "[dashboard]")
    lacks = subprocess.run([str(bin_dir / "python"), "-c", "import zstandard"], capture_output=True, check=False)
    assert lacks.returncode == 1, "the [dashboard] virtualenv has the ingest extra's zstandard"
    return bin_dir


@pytest.fixture(scope="module")
def core_only() -> Path:
    return _venv(".venv-core-only", "")


@pytest.mark.parametrize(("argv", "extra"), list(DASHBOARD_ONLY.values()), ids=list(DASHBOARD_ONLY))
def test_a_command_on_the_dashboard_install_names_the_extra_it_lacks(
    dashboard_only: Path, argv: list[str], extra: str, tmp_path: Path
) -> None:
    said = _refusal(dashboard_only, _words(argv, tmp_path), tmp_path)
    assert f"pip install 'otel-repeat-guard[{extra}]'" in said and "Traceback" not in said, said


@pytest.mark.parametrize(("argv", "extra"), list(CORE_ONLY.values()), ids=list(CORE_ONLY))
def test_a_command_on_the_install_without_extras_names_the_extra_it_lacks(
    core_only: Path, argv: list[str], extra: str, tmp_path: Path
) -> None:
    said = _refusal(core_only, _words(argv, tmp_path), tmp_path)
    assert f"pip install 'otel-repeat-guard[{extra}]'" in said and "Traceback" not in said, said


def test_the_in_process_doctor_and_the_guard_need_no_extra(core_only: Path) -> None:
    """docs/operations.md's ``otel_repeat_guard.doctor.diagnose(spans)`` and the guard itself, on the bare install."""
    script = (
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from otel_repeat_guard import RepeatGuardSpanProcessor\n"
        "from otel_repeat_guard.doctor import diagnose\n"
        "provider, spans = TracerProvider(), InMemorySpanExporter()\n"
        "provider.add_span_processor(RepeatGuardSpanProcessor())\n"
        "provider.add_span_processor(SimpleSpanProcessor(spans))\n"
        "tracer = provider.get_tracer('t')\n"
        "with tracer.start_as_current_span('invoke_agent a', attributes={'gen_ai.operation.name': 'invoke_agent'}):\n"
        "    for _ in range(3):\n"
        "        tracer.start_span('execute_tool grep', attributes={'gen_ai.operation.name': 'execute_tool',\n"
        "            'gen_ai.tool.name': 'grep', 'gen_ai.tool.call.arguments': '{}'}).end()\n"
        "print(diagnose(spans.get_finished_spans()).exit_code)\n"
    )
    done = subprocess.run([str(core_only / "python"), "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr
